import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { advanceSettling, FakeClock, settle } from '../../test/support/fake-clock.js';
import { ScriptedSpawn, type ScriptedChild, type ScriptedChildOptions } from '../../test/support/scripted-child.js';
import { supervisorOptions, testModel } from '../../test/support/supervisor-fixture.js';
import { captureLogger, silentLogger } from '../../test/support/test-logger.js';
import type { ServiceError } from '../core/errors.js';
import type { BatchInput, BatchItemOutcome, SequenceBatchInput, StreamInput, StreamSink } from '../protocol/work.js';
import { createMetrics } from '../telemetry/metrics.js';
import type { SpawnRequest } from './spawn.js';
import { createSupervisor, type SupervisedModel, type SupervisorOptions } from './supervisor.js';

/** Restart policy and timeouts of these tests; heartbeats are rare so that long advances need no steps. */
const OPTIONS: Partial<SupervisorOptions> = {
  loadLockPath: '',
  handshakeTimeoutMs: 1_000,
  loadTimeoutMs: 5_000,
  warmupTimeoutMs: 5_000,
  heartbeatIntervalMs: 60_000,
  heartbeatMissLimit: 3,
  batchTimeoutMs: 30_000,
  closeTimeoutMs: 1_000,
  restartInitialBackoffMs: 100,
  restartMaxBackoffMs: 1_000,
  crashLoopWindowMs: 60_000,
  crashLoopMaxFailures: 4,
};

function setup(
  models: Record<string, Partial<SupervisedModel>>,
  childOptions: ScriptedChildOptions | ((request: SpawnRequest, index: number) => ScriptedChildOptions) = {},
  overrides: Partial<SupervisorOptions> = {},
) {
  const clock = new FakeClock();
  const spawner = new ScriptedSpawn(childOptions);
  const metrics = createMetrics();
  const fullModels = Object.fromEntries(Object.entries(models).map(([name, m]) => [name, testModel({ command: ['fake-host'], ...m })]));
  const supervisor = createSupervisor(supervisorOptions(fullModels, { ...OPTIONS, ...overrides }), {
    spawn: spawner.spawn,
    clock,
    log: silentLogger(),
    metrics,
    baseEnv: {},
  });
  let changes = 0;
  supervisor.onInstancesChanged(() => (changes += 1));
  return { clock, spawner, supervisor, metrics, changes: () => changes };
}

/** Starts a supervisor whose children all start by themselves; resolves once every slot is ready. */
async function setupStarted(models: Record<string, Partial<SupervisedModel>>, childOptions: ScriptedChildOptions = {}) {
  const built = setup(models, { shouldStartByItself: true, ...childOptions });
  await built.supervisor.start();
  return built;
}

const ids = (views: readonly { instanceId: string }[]) => views.map((v) => v.instanceId);

function batch(batchId: string, requestIds: readonly string[] = ['r1']): BatchInput {
  return {
    batchId,
    requests: requestIds.map((requestId) => ({
      requestId,
      audio: new Int16Array(160),
      language: null,
      prompt: null,
      wordTimestamps: false,
    })),
  };
}

function track<T>(promise: Promise<T>) {
  const seen: { value?: T; error?: ServiceError; isSettled: boolean } = { isSettled: false };
  promise.then(
    (value) => Object.assign(seen, { value, isSettled: true }),
    (error: ServiceError) => Object.assign(seen, { error, isSettled: true }),
  );
  return seen;
}

const codes = (outcomes: readonly BatchItemOutcome[]) => outcomes.map((o) => (o.ok ? 'ok' : o.error.code));

/** A child that says Hello, then dies on its LoadRequest (as a model whose load crashes the host). */
async function crashOnLoad(child: ScriptedChild): Promise<void> {
  child.hello();
  await settle();
  child.expect('LoadRequest');
  child.exit(1);
  await settle();
}

describe('Supervisor start', () => {
  it('starts one instance per slot of every model and resolves when all are ready', async () => {
    const { spawner, supervisor } = setup({ a: { instances: 2 }, b: {} });
    const started = track(supervisor.start());
    await settle();
    assert.equal(spawner.children.length, 3);
    assert.deepEqual(
      spawner.requests.map((r) => r.env.VOXMUX_INSTANCE_ID),
      ['a-0-g1', 'a-1-g1', 'b-0-g1'],
    );
    assert.ok(spawner.requests.every((r) => r.command === 'fake-host'));
    assert.equal(supervisor.availability('a'), 'starting');
    await spawner.children[0]!.walkToReady();
    await spawner.children[2]!.walkToReady();
    assert.equal(started.isSettled, false, 'start() waits for every slot');
    assert.deepEqual(ids(supervisor.readyInstances('a')), ['a-0-g1']);
    assert.equal(supervisor.availability('a'), 'ready');
    await spawner.children[1]!.walkToReady();
    assert.equal(started.isSettled, true);
    assert.deepEqual(ids(supervisor.readyInstances('a')), ['a-0-g1', 'a-1-g1']);
    assert.deepEqual(ids(supervisor.readyInstances('b')), ['b-0-g1']);
    assert.deepEqual(
      supervisor.stats().instances.map((i) => [i.instanceId, i.state, i.pid, i.restarts]),
      [
        ['a-0-g1', 'ready', 1000, 0],
        ['a-1-g1', 'ready', 1001, 0],
        ['b-0-g1', 'ready', 1002, 0],
      ],
    );
    supervisor.destroy();
  });

  it('resolves start() when a slot fails its first start, and restarts that slot', async () => {
    const { clock, spawner, supervisor } = setup({ m: { instances: 2 } });
    const started = supervisor.start();
    await spawner.children[0]!.walkToReady();
    await crashOnLoad(spawner.children[1]!);
    await started;
    assert.deepEqual(ids(supervisor.readyInstances('m')), ['m-0-g1']);
    assert.equal(supervisor.stats().instances[1]!.state, 'restarting');
    clock.advance(100);
    await settle();
    assert.equal(spawner.last().pid, 1002);
    assert.equal(spawner.requests.at(-1)!.env.VOXMUX_INSTANCE_ID, 'm-1-g2');
    supervisor.destroy();
  });
});

describe('Supervisor restarts', () => {
  it('restarts a crashed instance after restartInitialBackoffMs, as a new generation', async () => {
    const { clock, spawner, supervisor, metrics } = await setupStarted({ m: {} });
    const first = spawner.last();
    clock.advance(5_000);
    first.exit(70);
    await settle();
    assert.deepEqual(supervisor.readyInstances('m'), []);
    const snapshot = supervisor.stats().instances[0]!;
    assert.equal(snapshot.state, 'restarting');
    assert.equal(snapshot.restarts, 0, 'a restart counts once it has spawned its instance');
    assert.equal(snapshot.pid, null);
    assert.deepEqual(snapshot.lastEnd, { reason: 'exited', exitCode: 70, signal: null, code: 'instance_crashed', atMs: clock.wallMs() });
    clock.advance(99);
    await settle();
    assert.equal(spawner.children.length, 1, 'no restart before the backoff');
    clock.advance(1);
    await settle();
    assert.equal(spawner.children.length, 2);
    assert.deepEqual(ids(supervisor.readyInstances('m')), ['m-0-g2']);
    assert.equal(supervisor.stats().instances[0]!.state, 'ready');
    assert.equal(supervisor.stats().instances[0]!.restarts, 1);
    assert.equal((await metrics.instanceRestarts.get()).values[0]?.value, 1);
    supervisor.destroy();
  });

  it('doubles the backoff with each failure before ready, then flags a crash loop and restarts at restartMaxBackoffMs', async () => {
    const { clock, spawner, supervisor } = setup({ m: {} });
    const started = supervisor.start();
    await crashOnLoad(spawner.last());
    await started;
    // Each restart comes exactly at its backoff: not a millisecond before.
    const expected = [
      { delayMs: 100, isCrashLoop: false },
      { delayMs: 200, isCrashLoop: false },
      { delayMs: 400, isCrashLoop: false },
      { delayMs: 1_000, isCrashLoop: true },
      { delayMs: 1_000, isCrashLoop: true },
      { delayMs: 1_000, isCrashLoop: true },
    ];
    for (const [failure, { delayMs, isCrashLoop }] of expected.entries()) {
      assert.equal(supervisor.stats().instances[0]!.isCrashLoop, isCrashLoop, `crash loop after failure ${failure + 1}`);
      assert.equal(supervisor.stats().instances[0]!.state, 'restarting');
      clock.advance(delayMs - 1);
      await settle();
      assert.equal(spawner.children.length, failure + 1, `no restart before ${delayMs} ms`);
      clock.advance(1);
      await settle();
      assert.equal(spawner.children.length, failure + 2, `a restart at ${delayMs} ms`);
      await crashOnLoad(spawner.last());
    }
    assert.equal(supervisor.stats().instances[0]!.restarts, 6, 'six restarts spawned; the seventh waits for its backoff');
    assert.equal(supervisor.availability('m'), 'unavailable');
    supervisor.destroy();
  });

  it('clears the crash-loop flag once the slot is ready again, and judges a failure soon after with the loop kept', async () => {
    const { clock, spawner, supervisor } = setup({ m: {} });
    const started = supervisor.start();
    await crashOnLoad(spawner.last());
    await started;
    for (const delayMs of [100, 200, 400]) {
      await advanceSettling(clock, delayMs, delayMs);
      await crashOnLoad(spawner.last());
    }
    assert.equal(supervisor.stats().instances[0]!.isCrashLoop, true);
    assert.equal(supervisor.availability('m'), 'unavailable');
    await advanceSettling(clock, 1_000, 1_000);
    await spawner.last().walkToReady();
    assert.equal(supervisor.stats().instances[0]!.state, 'ready');
    assert.equal(supervisor.stats().instances[0]!.isCrashLoop, false, '/health/ready shows a ready instance in a crash loop');
    assert.equal(supervisor.availability('m'), 'ready');
    spawner.last().exit(1); // within crashLoopWindowMs of the loop's failures: still a loop, restarted at the longest backoff
    await settle();
    assert.deepEqual([supervisor.stats().instances[0]!.isCrashLoop, supervisor.stats().instances[0]!.state], [true, 'restarting']);
    await advanceSettling(clock, 999, 999);
    assert.equal(spawner.children.length, 5);
    await advanceSettling(clock, 1, 1);
    assert.equal(spawner.children.length, 6);
    supervisor.destroy();
  });

  it('reports a model unavailable only when every one of its slots is in a crash loop', async () => {
    // Replacements that are not crashed wait in their handshake meanwhile: they must not time out.
    const { clock, spawner, supervisor } = setup({ m: { instances: 2 } }, {}, { handshakeTimeoutMs: 600_000 });
    const started = supervisor.start();
    await crashOnLoad(spawner.children[0]!);
    await crashOnLoad(spawner.children[1]!);
    await started;
    const failSlot = async (index: number, times: number) => {
      for (let i = 0; i < times; i++) {
        await advanceSettling(clock, 1_000, 100);
        await crashOnLoad(spawner.of(supervisor.stats().instances[index]!.instanceId));
      }
    };
    // Slot 0 reaches crashLoopMaxFailures (4); slot 1 stays one short, then gets there too.
    await failSlot(0, 3);
    await failSlot(1, 2);
    assert.deepEqual(
      supervisor.stats().instances.map((i) => i.isCrashLoop),
      [true, false],
    );
    assert.equal(supervisor.availability('m'), 'starting');
    await failSlot(1, 1);
    assert.deepEqual(
      supervisor.stats().instances.map((i) => i.isCrashLoop),
      [true, true],
    );
    assert.equal(supervisor.availability('m'), 'unavailable');
    supervisor.destroy();
  });

  it('declares a silent instance wedged and replaces it', async () => {
    const { clock, spawner, supervisor } = await setupStarted({ m: {} });
    spawner.last().goSilent();
    // Three beats unanswered (60 s apart); the fourth finds them missing.
    await advanceSettling(clock, 240_000, 60_000);
    const snapshot = supervisor.stats().instances[0]!;
    assert.equal(snapshot.lastEnd?.reason, 'wedged');
    assert.equal(snapshot.lastEnd?.code, 'instance_wedged');
    assert.equal(snapshot.lastEnd?.signal, 'SIGKILL');
    assert.deepEqual(spawner.children[0]!.kills, ['SIGKILL']);
    clock.advance(100);
    await settle();
    assert.deepEqual(ids(supervisor.readyInstances('m')), ['m-0-g2']);
    supervisor.destroy();
  });
});

describe('Supervisor dispatch', () => {
  it('runs a batch on the instance it names and returns its outcomes', async () => {
    const { spawner, supervisor, metrics } = await setupStarted({ m: {} });
    const running = supervisor.runBatch('m-0-g1', batch('b1', ['r1', 'r2']));
    const sent = spawner.last().expect('RunBatch');
    spawner.last().reply(sent, { type: 'BatchResult', items: [{ transcript: { durationS: 2 } }, { error: { code: 'invalid_audio' } }] });
    assert.deepEqual(codes(await running), ['ok', 'invalid_audio']);
    assert.equal((await metrics.executions.get()).values[0]?.value, 1);
    assert.equal((await metrics.audioProcessed.get()).values[0]?.value, 2);
    supervisor.destroy();
  });

  it('rejects runBatch with instance_crashed for an instance that is gone or never was', async () => {
    const { spawner, supervisor } = await setupStarted({ m: {} });
    spawner.last().exit(1);
    await settle();
    await assert.rejects(supervisor.runBatch('m-0-g1', batch('b1')), { code: 'instance_crashed' });
    await assert.rejects(supervisor.runBatch('nope-0-g1', batch('b2')), { code: 'instance_crashed' });
    supervisor.destroy();
  });

  it('fails the running batch with instance_crashed when its instance dies', async () => {
    const { spawner, supervisor } = await setupStarted({ m: {} });
    const running = supervisor.runBatch('m-0-g1', batch('b1'));
    spawner.last().expect('RunBatch');
    spawner.last().exit(null, 'SIGSEGV');
    await assert.rejects(running, { code: 'instance_crashed' });
    assert.equal(supervisor.stats().instances[0]!.lastEnd?.signal, 'SIGSEGV');
    supervisor.destroy();
  });

  it('notifies onInstancesChanged on every instance state change, until unsubscribed', async () => {
    const { clock, spawner, supervisor } = setup({ m: {} }, { shouldStartByItself: true });
    const seen: string[] = [];
    const unsubscribe = supervisor.onInstancesChanged(() => seen.push(supervisor.stats().instances[0]!.state));
    await supervisor.start();
    assert.deepEqual(seen, ['handshaking', 'loading', 'warming', 'ready', 'ready']);
    seen.length = 0;
    spawner.last().exit(1);
    await settle();
    // The instance's own end (crashed), then the slot's pending restart.
    assert.deepEqual(seen, ['crashed', 'restarting']);
    seen.length = 0;
    unsubscribe();
    clock.advance(100);
    await settle();
    assert.deepEqual(seen, []);
    assert.equal(supervisor.availability('m'), 'ready');
    supervisor.destroy();
  });
});

describe('Supervisor sequence, stream and resource work', () => {
  const sequenceBatch = (): SequenceBatchInput => ({
    batchId: 'q1',
    items: [
      {
        requestId: 'a:1',
        sessionId: 'a',
        seq: 1,
        audio: new Int16Array(160),
        state: { kind: 'attached', bytes: Uint8Array.of(4, 2) },
        isLast: false,
        options: {},
      },
    ],
  });
  const streamInput = (): StreamInput => ({
    streamId: 's1',
    requestId: 'r1',
    resource: null,
    params: {},
    body: new Uint8Array(),
    creditChunks: 2,
  });
  const recordingSink = () => {
    const chunks: number[] = [];
    const ends: string[] = [];
    const sink: StreamSink = { chunk: (c) => chunks.push(c.index), end: (e) => ends.push(e.ok ? 'ok' : e.error.code) };
    return { sink, chunks, ends };
  };

  it('counts busy time per slot and per GPU, and the requests completed with a result (#21)', async () => {
    const built = setup({ m: {} }, { shouldStartByItself: true }, { nodeGpus: [0] });
    await built.supervisor.start();
    const { clock, spawner, supervisor } = built;
    assert.equal(supervisor.stats().instances[0]!.gpu, 0);
    const running = supervisor.runBatch('m-0-g1', batch('b1', ['r1', 'r2']));
    const sent = spawner.last().expect('RunBatch');
    clock.advance(100);
    spawner.last().reply(sent, { type: 'BatchResult', items: [{ transcript: { durationS: 2 } }, { error: { code: 'invalid_audio' } }] });
    await running;
    clock.advance(50); // idle: not busy
    const sequence = supervisor.runSequenceBatch('m-0-g1', sequenceBatch());
    const sentSequence = spawner.last().expect('RunSequenceBatch');
    clock.advance(30);
    assert.equal(supervisor.stats().instances[0]!.busyMs, 130, 'the open interval counts');
    spawner.last().reply(sentSequence, { type: 'SequenceResult', items: [{ output: { n: 1 }, state: Uint8Array.of(7) }] });
    await sequence;
    clock.advance(20);
    const stats = supervisor.stats();
    assert.deepEqual([stats.instances[0]!.busyMs, stats.instances[0]!.completedRequests], [130, 2]);
    assert.deepEqual(stats.gpus, [{ gpu: 0, busyMs: 130 }]);
    supervisor.destroy();
  });

  it('runs a sequence batch on the instance it names, with state in and out, and counts it', async () => {
    const { spawner, supervisor, metrics } = await setupStarted({ m: {} });
    const running = supervisor.runSequenceBatch('m-0-g1', sequenceBatch());
    const sent = spawner.last().expect('RunSequenceBatch');
    assert.deepEqual([...sent.items[0]!.state], [4, 2]);
    spawner.last().reply(sent, { type: 'SequenceResult', items: [{ output: { n: 1 }, state: Uint8Array.of(7) }] });
    const [outcome] = await running;
    assert.ok(outcome?.ok);
    assert.deepEqual([outcome.output, [...outcome.state]], [{ n: 1 }, [7]]);
    assert.equal((await metrics.sequenceExecutions.get()).values[0]?.value, 1);
    assert.equal((await metrics.sequenceItemsExecuted.get()).values[0]?.value, 1);
    supervisor.destroy();
  });

  it('fails a running sequence batch with instance_crashed when its instance dies, and refuses one for a gone instance', async () => {
    const { spawner, supervisor } = await setupStarted({ m: {} });
    const running = supervisor.runSequenceBatch('m-0-g1', sequenceBatch());
    spawner.last().expect('RunSequenceBatch');
    spawner.last().exit(null, 'SIGKILL');
    await assert.rejects(running, { code: 'instance_crashed' });
    await assert.rejects(supervisor.runSequenceBatch('m-0-g1', sequenceBatch()), { code: 'instance_crashed' });
    supervisor.endSessions('m-0-g1', ['a']);
    supervisor.destroy();
  });

  it('passes endSessions to the instance', async () => {
    const { spawner, supervisor } = await setupStarted({ m: {} });
    supervisor.endSessions('m-0-g1', ['a', 'b']);
    assert.deepEqual(spawner.last().expect('EndSessions').sessionIds, ['a', 'b']);
    supervisor.destroy();
  });

  it('streams chunks to the sink, and ends it with instance_crashed when the instance dies mid-stream', async () => {
    const { spawner, supervisor, metrics } = await setupStarted({ m: {} });
    const { sink, chunks, ends } = recordingSink();
    const control = supervisor.openStream('m-0-g1', streamInput(), sink);
    const start = spawner.last().expect('StartStream');
    spawner.last().reply(start, { type: 'StreamChunk' });
    spawner.last().reply(start, { type: 'StreamChunk' });
    await settle();
    control.grant(2);
    assert.equal(spawner.last().expect('StreamCredit').chunks, 2);
    spawner.last().exit(null, 'SIGKILL');
    await settle();
    assert.deepEqual(chunks, [0, 1]);
    assert.deepEqual(ends, ['instance_crashed']);
    const streams = (await metrics.instanceStreams.get()).values.find((v) => v.labels.outcome === 'instance_crashed');
    assert.equal(streams?.value, 1);
    supervisor.destroy();
  });

  it('no longer lists an instance as ready while it ends the streams of its death', async () => {
    const { spawner, supervisor } = await setupStarted({ m: {} });
    const readyAtEnd: string[][] = [];
    const sink: StreamSink = { chunk: () => undefined, end: () => readyAtEnd.push(ids(supervisor.readyInstances('m'))) };
    supervisor.openStream('m-0-g1', streamInput(), sink);
    spawner.last().expect('StartStream');
    spawner.last().exit(null, 'SIGKILL');
    await settle();
    // A scheduler retrying the stream from its end must not pick the dying instance again.
    assert.deepEqual(readyAtEnd, [[]]);
    supervisor.destroy();
  });

  it('ends the sink of a stream opened on a gone instance with instance_crashed at once', async () => {
    const { spawner, supervisor } = await setupStarted({ m: {} });
    spawner.last().exit(1);
    await settle();
    const { sink, ends } = recordingSink();
    const control = supervisor.openStream('m-0-g1', streamInput(), sink);
    control.cancel();
    assert.deepEqual(ends, ['instance_crashed']);
    supervisor.destroy();
  });

  it('cancel ends the sink once with stream_cancelled when the host confirms', async () => {
    const { spawner, supervisor } = await setupStarted({ m: {} });
    const { sink, ends } = recordingSink();
    const control = supervisor.openStream('m-0-g1', streamInput(), sink);
    const start = spawner.last().expect('StartStream');
    control.cancel();
    assert.equal(spawner.last().expect('CancelStream').streamId, 's1');
    spawner.last().reply(start, { type: 'StreamEnd', error: { code: 'stream_cancelled' } });
    await settle();
    assert.deepEqual(ends, ['stream_cancelled']);
    supervisor.destroy();
  });

  it('puts heartbeat resources into readyInstances and notifies onInstancesChanged when they change', async () => {
    const { clock, spawner, supervisor, changes, metrics } = await setupStarted({ m: {} });
    const before = changes();
    spawner.last().heartbeat = {
      ...spawner.last().heartbeat,
      resources: [{ name: 'alloy', kind: 'voice', residency: 'device', bytes: 512 }],
    };
    await advanceSettling(clock, 60_000, 60_000);
    assert.deepEqual(supervisor.readyInstances('m'), [
      { instanceId: 'm-0-g1', resources: [{ name: 'alloy', residency: 'device', bytes: 512 }] },
    ]);
    assert.equal(changes(), before + 1);
    assert.equal((await metrics.instanceResources.get()).values[0]?.value, 1);
    await advanceSettling(clock, 60_000, 60_000);
    assert.equal(changes(), before + 1, 'an unchanged report does not notify');
    const loading = supervisor.loadResource('m-0-g1', 'echo', 'voice', {});
    spawner.last().reply(spawner.last().expect('LoadResource'), { type: 'ResourceLoaded', bytes: 64 });
    assert.equal((await loading).bytes, 64);
    assert.deepEqual(
      supervisor.readyInstances('m')[0]?.resources.map((r) => r.name),
      ['alloy', 'echo'],
    );
    assert.equal(changes(), before + 2);
    supervisor.destroy();
  });
});

describe('Supervisor catalogue and resource counters (#18)', () => {
  const voice = (name: string, language = 'en-US') => ({
    name,
    kind: 'voice',
    language,
    sampleRate: 16_000,
    gender: null,
    description: name,
  });
  const counters = (overrides: Partial<Record<string, number>> = {}) => ({
    hits: 0,
    misses: 0,
    loadsFromDisk: 0,
    loadsFromHost: 0,
    evictions: 0,
    diskLoadMs: 0,
    hostLoadMs: 0,
    budgetBytes: 1000,
    residentBytes: 0,
    ...overrides,
  });

  it("lists the union of its instances' catalogues by name, keeps it across a restart, and none for other models", async () => {
    const catalogs = [
      [voice('a'), voice('b')],
      [voice('b', 'en-GB'), voice('c')],
    ];
    const { clock, spawner, supervisor } = setup({ m: { instances: 2 }, n: {} }, (request) => {
      const slot = /^m-(\d)-g1$/.exec(request.env.VOXMUX_INSTANCE_ID ?? '')?.[1];
      return { shouldStartByItself: true, catalog: slot === undefined ? [] : catalogs[Number(slot)] };
    });
    assert.deepEqual(supervisor.catalog('m'), [], 'nothing is listed before an instance loaded');
    await supervisor.start();
    assert.deepEqual(supervisor.catalog('m'), [voice('a'), voice('b'), voice('c')]);
    assert.deepEqual(supervisor.catalog('n'), []);
    assert.deepEqual(supervisor.catalog('nope'), []);
    spawner.children[0]!.exit(null, 'SIGKILL');
    await settle();
    assert.deepEqual(
      supervisor.catalog('m').map((e) => e.name),
      ['a', 'b', 'c'],
      'a restarting slot keeps its catalogue',
    );
    await advanceSettling(clock, 100, 100);
    supervisor.destroy();
  });

  it('follows each heartbeat in the gauges of what the instances report (memory, eager batches, graph replays)', async () => {
    const { clock, spawner, metrics } = await setupStarted({ m: {} });
    const gauge = async (metric: { get(): Promise<{ values: { value: number }[] }> }) => (await metric.get()).values[0]?.value;
    spawner.last().heartbeat = { ...spawner.last().heartbeat, memoryBytes: 4096, eagerBatches: 2, graphReplays: 7 };
    await advanceSettling(clock, 60_000, 60_000);
    assert.deepEqual(
      [await gauge(metrics.instanceMemory), await gauge(metrics.eagerBatches), await gauge(metrics.graphReplays)],
      [4096, 2, 7],
    );
    spawner.last().heartbeat = { ...spawner.last().heartbeat, graphReplays: 19 };
    await advanceSettling(clock, 60_000, 60_000);
    assert.equal(await gauge(metrics.graphReplays), 19, 'no state change in between: the beat alone updates it');
  });

  it("exports the growth of each instance's resource counters, per instance index, across a restart", async () => {
    const { clock, spawner, supervisor, metrics } = await setupStarted({ m: {} });
    const value = async (metric: { get(): Promise<{ values: { labels: object; value: number }[] }> }, labels: object) =>
      (await metric.get()).values.find((v) => JSON.stringify(v.labels) === JSON.stringify(labels))?.value;
    const labels = { model: 'm', instance_index: '0' };
    spawner.last().heartbeat = {
      ...spawner.last().heartbeat,
      resources: [{ name: 'alba', kind: 'voice', residency: 'device', bytes: 400 }],
      resourceCounters: counters({
        hits: 3,
        misses: 2,
        loadsFromDisk: 1,
        loadsFromHost: 1,
        diskLoadMs: 1500,
        hostLoadMs: 20,
        residentBytes: 400,
      }),
    };
    await advanceSettling(clock, 60_000, 60_000);
    const snapshot = supervisor.stats().instances[0]!;
    assert.deepEqual(snapshot.resources, [{ name: 'alba', kind: 'voice', residency: 'device', bytes: 400 }]);
    assert.equal(snapshot.resourceCounters?.hits, 3);
    spawner.last().heartbeat = {
      ...spawner.last().heartbeat,
      resourceCounters: counters({
        hits: 5,
        misses: 2,
        loadsFromDisk: 1,
        loadsFromHost: 1,
        evictions: 1,
        diskLoadMs: 1500,
        hostLoadMs: 20,
      }),
    };
    await advanceSettling(clock, 60_000, 60_000);
    assert.equal(await value(metrics.resourceHits, labels), 5);
    assert.equal(await value(metrics.resourceMisses, labels), 2);
    assert.equal(await value(metrics.resourceEvictions, labels), 1);
    assert.equal(await value(metrics.resourceLoads, { ...labels, source: 'disk' }), 1);
    assert.equal(await value(metrics.resourceLoads, { ...labels, source: 'host' }), 1);
    assert.equal(await value(metrics.resourceLoadDuration, { ...labels, source: 'disk' }), 1.5);
    assert.equal(await value(metrics.resourceBudgetBytes, labels), 1000);
    assert.equal(await value(metrics.resourceResidentBytes, labels), 0);

    spawner.last().heartbeat = {
      ...spawner.last().heartbeat,
      resourceCounters: counters({ hits: 5, misses: 2, loadsFromDisk: 1, loadsFromHost: 1, evictions: 1, residentBytes: 300 }),
    };
    await advanceSettling(clock, 60_000, 60_000);
    assert.equal(await value(metrics.resourceResidentBytes, labels), 300);
    spawner.last().exit(null, 'SIGKILL');
    await settle();
    assert.equal(await value(metrics.resourceResidentBytes, labels), 0, 'a slot without a live instance holds nothing');
    assert.equal(supervisor.stats().instances[0]!.resourceCounters, null);
    // A new instance in the slot counts from zero: its counts add to the slot's series.
    await advanceSettling(clock, 100, 100);
    spawner.last().heartbeat = { ...spawner.last().heartbeat, resourceCounters: counters({ hits: 2, misses: 1, loadsFromDisk: 1 }) };
    await advanceSettling(clock, 60_000, 60_000);
    assert.equal(supervisor.stats().instances[0]!.instanceId, 'm-0-g2');
    assert.equal(await value(metrics.resourceHits, labels), 7);
    assert.equal(await value(metrics.resourceMisses, labels), 3);
    assert.equal(await value(metrics.resourceLoads, { ...labels, source: 'disk' }), 2);
    supervisor.destroy();
  });

  it("exports the growth of each instance's engine counters by name, per instance index, across a restart", async () => {
    const { clock, spawner, supervisor, metrics } = await setupStarted({ m: {} });
    const value = async (name: string) =>
      (await metrics.engineEvents.get()).values.find(
        (v) => v.labels.model === 'm' && v.labels.instance_index === '0' && v.labels.name === name,
      )?.value;
    const beat = (engineCounters: { name: string; value: number }[]) => {
      spawner.last().heartbeat = { ...spawner.last().heartbeat, engineCounters };
    };
    beat([
      { name: 'encoderWindows', value: 6 },
      { name: 'tokens', value: 270 },
    ]);
    await advanceSettling(clock, 60_000, 60_000);
    beat([
      { name: 'encoderWindows', value: 8 },
      { name: 'tokens', value: 400 },
      // Names that are not camelCase words are not exported (the label set stays bounded).
      { name: 'bad name', value: 1 },
    ]);
    await advanceSettling(clock, 60_000, 60_000);
    assert.deepEqual([await value('encoderWindows'), await value('tokens'), await value('bad name')], [8, 400, undefined]);
    assert.deepEqual(supervisor.stats().instances[0]!.engineCounters, { encoderWindows: 8, tokens: 400 });
    spawner.last().exit(null, 'SIGKILL');
    await settle();
    assert.deepEqual(supervisor.stats().instances[0]!.engineCounters, {}, 'a slot without a live instance reports none');
    // A new instance in the slot counts from zero: its counts add to the slot's series.
    await advanceSettling(clock, 100, 100);
    beat([{ name: 'encoderWindows', value: 2 }]);
    await advanceSettling(clock, 60_000, 60_000);
    assert.equal(supervisor.stats().instances[0]!.instanceId, 'm-0-g2');
    assert.deepEqual([await value('encoderWindows'), await value('tokens')], [10, 400]);
    supervisor.destroy();
  });

  it('keeps the resident bytes of a slot at 0 when its instance’s last heartbeat is read after its exit', async () => {
    // Node's 'exit' event may come while the child's pipes still hold its last output: a heartbeat
    // the host wrote just before it died is read after its end, and set the gauge of a slot with no
    // live instance back to what the dead instance held ("0 while the slot has no live instance").
    const { clock, spawner, supervisor, metrics } = await setupStarted({ m: {} });
    const resident = async () =>
      (await metrics.resourceResidentBytes.get()).values.find((v) => v.labels.model === 'm' && v.labels.instance_index === '0')?.value;
    const child = spawner.last();
    child.heartbeat = { ...child.heartbeat, resourceCounters: counters({ hits: 1, residentBytes: 300 }) };
    await advanceSettling(clock, 60_000, 60_000);
    assert.equal(await resident(), 300);
    child.holdOutputUntilExit();
    child.send({ type: 'HeartbeatAck', resourceCounters: counters({ hits: 2, residentBytes: 500 }) });
    child.exit(null, 'SIGSEGV');
    await settle();
    assert.equal(supervisor.stats().instances[0]!.state, 'restarting');
    assert.equal(await resident(), 0, 'a slot without a live instance holds nothing');
    supervisor.destroy();
  });
});
describe('Supervisor close and destroy', () => {
  it('close() lets running batches finish, then closes every instance', async () => {
    const { spawner, supervisor } = await setupStarted({ m: { instances: 2 } });
    const [a, b] = spawner.children as [ScriptedChild, ScriptedChild];
    const running = track(supervisor.runBatch('m-0-g1', batch('b1')));
    const sent = a.expect('RunBatch');
    const closed = track(supervisor.close());
    await settle();
    a.expect('Close');
    b.expect('Close');
    assert.equal(supervisor.availability('m'), 'unavailable');
    assert.deepEqual(supervisor.readyInstances('m'), []);
    b.send({ type: 'Closed' });
    b.exit(0);
    await settle();
    assert.equal(running.isSettled, false);
    assert.equal(closed.isSettled, false);
    a.reply(sent, { type: 'BatchResult' });
    await settle();
    assert.deepEqual(codes(running.value!), ['ok']);
    assert.equal(closed.isSettled, false, 'close() waits for the last instance to exit');
    a.send({ type: 'Closed' });
    a.exit(0);
    await settle();
    assert.equal(closed.isSettled, true);
    assert.deepEqual(
      supervisor.stats().instances.map((i) => [i.state, i.lastEnd?.reason, i.restarts]),
      [
        ['closed', 'closed', 0],
        ['closed', 'closed', 0],
      ],
    );
    assert.deepEqual(a.kills, []);
  });

  it('close() cancels a pending restart and kills an instance that does not exit within closeTimeoutMs', async () => {
    const { clock, spawner, supervisor } = await setupStarted({ m: { instances: 2 } });
    const [a, b] = spawner.children as [ScriptedChild, ScriptedChild];
    a.exit(1);
    await settle();
    assert.equal(supervisor.stats().instances[0]!.state, 'restarting');
    const closed = track(supervisor.close());
    await settle();
    b.expect('Close');
    clock.advance(999);
    await settle();
    assert.equal(closed.isSettled, false);
    clock.advance(1);
    await settle();
    assert.equal(closed.isSettled, true);
    assert.deepEqual(b.kills, ['SIGKILL']);
    clock.advance(10_000);
    await settle();
    assert.equal(spawner.children.length, 2, 'no restart after close()');
  });

  it('close() during an instance start ends it closed, without a restart', async () => {
    const { clock, spawner, supervisor } = setup({ m: {} });
    void supervisor.start();
    const child = spawner.last();
    child.hello();
    await settle();
    const load = child.expect('LoadRequest');
    const closed = supervisor.close();
    await settle();
    child.expect('Close');
    child.reply(load, { type: 'LoadResult' });
    child.send({ type: 'Closed' });
    child.exit(0);
    await closed;
    child.expectNothing();
    assert.deepEqual(
      supervisor.stats().instances.map((i) => [i.state, i.lastEnd?.reason, i.lastEnd?.code, i.restarts]),
      [['closed', 'closed', null, 0]],
    );
    clock.advance(10_000);
    await settle();
    assert.equal(spawner.children.length, 1);
  });

  it('destroy() kills every instance now, fails running batches with shutting_down and restarts nothing', async () => {
    const { clock, spawner, supervisor } = await setupStarted({ m: { instances: 2 } });
    const running = [supervisor.runBatch('m-0-g1', batch('b1')), supervisor.runBatch('m-1-g1', batch('b2'))];
    supervisor.destroy();
    const settled = await Promise.allSettled(running);
    assert.deepEqual(
      settled.map((s) => (s.status === 'rejected' ? (s.reason as ServiceError).code : 'fulfilled')),
      ['shutting_down', 'shutting_down'],
    );
    assert.deepEqual(
      spawner.children.map((c) => c.kills),
      [['SIGKILL'], ['SIGKILL']],
    );
    clock.advance(10_000);
    await settle();
    assert.equal(spawner.children.length, 2);
    assert.deepEqual(
      supervisor.stats().instances.map((i) => i.state),
      ['closed', 'closed'],
    );
    assert.equal(supervisor.availability('m'), 'unavailable');
  });
});

describe('Supervisor exclusive warmup', () => {
  it('warms instances one at a time at start, offering none for dispatch while one warms up', async () => {
    const { spawner, supervisor } = setup({ m: { instances: 2, exclusiveWarmup: true } });
    const started = supervisor.start();
    const [a, b] = spawner.children as [ScriptedChild, ScriptedChild];
    for (const child of [a, b]) {
      child.hello();
      await settle();
      child.reply(child.expect('LoadRequest'), { type: 'LoadResult' });
      await settle();
    }
    const warmupA = a.expect('WarmupRequest');
    b.expectNothing();
    a.reply(warmupA, { type: 'WarmupResult' });
    await settle();
    // a is ready, but b now holds the gate: nothing is offered until b's warmup ends.
    assert.equal(supervisor.stats().instances[0]!.state, 'ready');
    assert.deepEqual(supervisor.readyInstances('m'), []);
    b.reply(b.expect('WarmupRequest'), { type: 'WarmupResult' });
    await started;
    assert.deepEqual(ids(supervisor.readyInstances('m')), ['m-0-g1', 'm-1-g1']);
    supervisor.destroy();
  });

  /**
   * Two instances with exclusiveWarmup: a runs a slow batch while b dies; b's replacement loads and
   * waits for the warmup gate.
   */
  async function replacementWarmingBesideSlowBatch() {
    const { clock, spawner, supervisor } = setup({ m: { instances: 2, exclusiveWarmup: true } }, (_request, index) => ({
      shouldStartByItself: index < 2,
    }));
    await supervisor.start();
    const [a, b] = spawner.children as [ScriptedChild, ScriptedChild];
    const running = track(supervisor.runBatch('m-0-g1', batch('slow')));
    const sent = a.expect('RunBatch');
    b.exit(1);
    await settle();
    clock.advance(100);
    await settle();
    const replacement = spawner.last();
    replacement.hello();
    await settle();
    replacement.reply(replacement.expect('LoadRequest'), { type: 'LoadResult' });
    await settle();
    return { clock, supervisor, a, running, sent, replacement };
  }

  it('holds dispatch while a replacement warms up, and sends its warmup only once running batches have ended', async () => {
    const { clock, supervisor, a, running, sent, replacement } = await replacementWarmingBesideSlowBatch();
    assert.equal(supervisor.stats().instances[1]!.state, 'warming');
    assert.deepEqual(supervisor.readyInstances('m'), [], 'no instance offered while the gate is held');
    await advanceSettling(clock, 1_000, 10);
    replacement.expectNothing();
    assert.equal(running.isSettled, false);
    a.reply(sent, { type: 'BatchResult' });
    await settle();
    assert.deepEqual(codes(running.value!), ['ok']);
    await advanceSettling(clock, 10, 10);
    replacement.reply(replacement.expect('WarmupRequest'), { type: 'WarmupResult' });
    await settle();
    assert.deepEqual(ids(supervisor.readyInstances('m')), ['m-0-g1', 'm-1-g2']);
    supervisor.destroy();
  });

  it('releases the gate when the warming instance dies', async () => {
    const { clock, spawner, supervisor } = setup({ m: { instances: 2, exclusiveWarmup: true } }, (_request, index) => ({
      shouldStartByItself: index !== 0,
    }));
    const started = supervisor.start();
    const a = spawner.children[0]!;
    a.hello();
    await settle();
    a.reply(a.expect('LoadRequest'), { type: 'LoadResult' });
    await settle();
    a.expect('WarmupRequest');
    a.exit(1);
    await started;
    assert.deepEqual(ids(supervisor.readyInstances('m')), ['m-1-g1']);
    assert.equal(supervisor.stats().instances[0]!.state, 'restarting');
    clock.advance(100);
    await settle();
    assert.deepEqual(ids(supervisor.readyInstances('m')), ['m-0-g2', 'm-1-g1']);
    supervisor.destroy();
  });
  it('releases the gate at once when its holder dies while it waits for running batches to end', async () => {
    const { clock, supervisor, a, running, sent, replacement } = await replacementWarmingBesideSlowBatch();
    assert.deepEqual(supervisor.readyInstances('m'), [], 'the replacement holds the gate, waiting for the slow batch');
    replacement.exit(1);
    await advanceSettling(clock, 50, 10);
    assert.deepEqual(ids(supervisor.readyInstances('m')), ['m-0-g1'], 'a dead holder waits for no batch');
    a.reply(sent, { type: 'BatchResult' });
    await settle();
    assert.deepEqual(codes(running.value!), ['ok']);
    supervisor.destroy();
  });

  it('lets an instance that died waiting for the gate pass it by, without holding dispatch for running batches', async () => {
    const { spawner, supervisor } = setup({ m: { instances: 2, exclusiveWarmup: true } });
    const started = track(supervisor.start());
    const [a, b] = spawner.children as [ScriptedChild, ScriptedChild];
    for (const child of [a, b]) {
      child.hello();
      await settle();
      child.reply(child.expect('LoadRequest'), { type: 'LoadResult' });
      await settle();
    }
    const warmupA = a.expect('WarmupRequest');
    b.exit(1); // dies while it waits for a's warmup to release the gate
    await settle();
    // As the scheduler does: a batch goes to a as soon as a is offered.
    let running: ReturnType<typeof track<readonly BatchItemOutcome[]>> | undefined;
    supervisor.onInstancesChanged(() => {
      if (running === undefined && supervisor.readyInstances('m').length > 0) running = track(supervisor.runBatch('m-0-g1', batch('b1')));
    });
    a.reply(warmupA, { type: 'WarmupResult' });
    await settle();
    assert.ok(running !== undefined, 'a was offered once its warmup ended');
    const sent = a.expect('RunBatch');
    assert.deepEqual(ids(supervisor.readyInstances('m')), ['m-0-g1'], 'the dead instance holds no gate');
    a.reply(sent, { type: 'BatchResult' });
    await settle();
    assert.equal(started.isSettled, true);
    supervisor.destroy();
  });
});

describe('Supervisor stats', () => {
  it('snapshots each slot: facts while live, restarts, lastEnd and restarting state after a crash, frozen', async () => {
    const { clock, spawner, supervisor, metrics } = setup({ m: {} });
    const started = supervisor.start();
    const child = spawner.last();
    clock.advance(400);
    child.hello();
    await settle();
    const stages = [{ stage: 'weight_read' as const, ms: 500, bytes: 1_000_000_000 }];
    clock.advance(1_000);
    child.reply(child.expect('LoadRequest'), { type: 'LoadResult', device: 'cuda:0', memoryBytes: 2048, stages });
    await settle();
    child.reply(child.expect('WarmupRequest'), { type: 'WarmupResult', warmupMs: 250, graphsCaptured: 3 });
    await started;
    const live = supervisor.stats();
    assert.ok(Object.isFrozen(live) && Object.isFrozen(live.instances));
    assert.deepEqual(live.instances[0], {
      instanceId: 'm-0-g1',
      model: 'm',
      index: 0,
      gpu: null,
      pid: 1000,
      state: 'ready',
      restarts: 0,
      isCrashLoop: false,
      device: 'cuda:0',
      memoryBytes: 2048,
      warmupMs: 250,
      graphsCaptured: 3,
      eagerBatches: 0,
      graphReplays: 0,
      runningBatches: 0,
      runningStreams: 0,
      resources: [],
      resourceCounters: null,
      engineCounters: {},
      boot: {
        processStartMs: 400,
        loadMs: 1_000,
        warmupWaitMs: 0,
        warmupMs: 0,
        totalMs: 1_400,
        stages,
        weightReadBytes: 1_000_000_000,
        weightReadBytesPerSecond: 2_000_000_000,
      },
      lastEnd: null,
      busyMs: 0,
      completedRequests: 0,
    });
    // The boot is exported once, when the instance becomes ready (#20).
    const text = await metrics.registry.metrics();
    assert.match(text, /voxmux_instance_boot_phase_seconds_sum\{model="m",phase="process_start"\} 0\.4\n/);
    assert.match(text, /voxmux_instance_boot_stage_seconds_count\{model="m",stage="weight_read"\} 1\n/);
    assert.match(text, /voxmux_instance_weight_read_bytes_per_second\{model="m"\} 2000000000\n/);
    void supervisor.runBatch('m-0-g1', batch('b1')).catch(() => undefined);
    assert.equal(supervisor.stats().instances[0]!.runningBatches, 1);
    clock.advance(3_000);
    assert.equal(supervisor.stats().instances[0]!.busyMs, 3_000, 'busy while its batch runs');
    child.exit(null, 'SIGKILL');
    await settle();
    const after = supervisor.stats().instances[0]!;
    assert.equal(after.busyMs, 3_000, 'busy time outlives the crash; the failed batch completed nothing');
    assert.equal(after.completedRequests, 0);
    assert.deepEqual(
      { state: after.state, pid: after.pid, restarts: after.restarts, lastEnd: after.lastEnd },
      {
        state: 'restarting',
        pid: null,
        restarts: 0,
        lastEnd: { reason: 'exited', exitCode: null, signal: 'SIGKILL', code: 'instance_crashed', atMs: 1_700_000_004_400 },
      },
    );
    supervisor.destroy();
  });
});

describe('Supervisor slots of a stopped model', () => {
  /** Each state of voxmux_instances{model} with a non-zero count. */
  async function instanceGauge(metrics: ReturnType<typeof createMetrics>, model: string): Promise<Record<string, number>> {
    const values = (await metrics.instances.get()).values.filter((v) => v.labels.model === model && v.value !== 0);
    return Object.fromEntries(values.map((v) => [String(v.labels.state), v.value]));
  }

  it('shows a slot whose restart a sleep cancelled as closed, as the model’s other stopped slots', async () => {
    const { spawner, supervisor, metrics } = await setupStarted({ m: { instances: 2 } }, { shouldCloseByItself: true });
    spawner.children[0]!.exit(1);
    await settle();
    assert.deepEqual(
      supervisor.stats().instances.map((i) => i.state),
      ['restarting', 'ready'],
    );
    await supervisor.sleep('m');
    assert.equal(supervisor.modelState('m'), 'stopped');
    assert.deepEqual(
      supervisor.stats().instances.map((i) => i.state),
      ['closed', 'closed'],
      'a stopped slot whose restart was cancelled reads crashed in /health/ready',
    );
    assert.deepEqual(await instanceGauge(metrics, 'm'), { closed: 2 });
    assert.equal(supervisor.stats().instances[0]!.lastEnd?.reason, 'exited', 'the crash stays in lastEnd');
    supervisor.destroy();
  });

  it('counts a restart in voxmux_instance_restarts_total and restarts only once its new instance is spawned, not when a sleep cancels it', async () => {
    const { clock, spawner, supervisor, metrics } = await setupStarted({ m: {} }, { shouldCloseByItself: true });
    const restartsOf = async () =>
      (await metrics.instanceRestarts.get()).values.filter((v) => v.value !== 0).map((v) => [v.labels.reason, v.value]);
    spawner.last().exit(1);
    await settle();
    assert.equal(supervisor.stats().instances[0]!.state, 'restarting');
    await supervisor.sleep('m');
    clock.advance(10_000);
    await settle();
    assert.equal(spawner.children.length, 1, 'the sleep cancelled the restart');
    assert.deepEqual(await restartsOf(), [], 'a restart that never happened is counted');
    assert.equal(supervisor.stats().instances[0]!.restarts, 0);
    // A wake starts the model: that is no restart either.
    assert.equal((await supervisor.wake('m')).isReady, true);
    assert.deepEqual(await restartsOf(), []);
    // A crash whose restart goes ahead is counted when the new instance is spawned, with the crash's reason.
    spawner.last().exit(1);
    await settle();
    assert.deepEqual(await restartsOf(), []);
    assert.equal(supervisor.stats().instances[0]!.restarts, 0);
    clock.advance(100);
    await settle();
    assert.equal(spawner.children.length, 3);
    assert.deepEqual(await restartsOf(), [['exited', 1]]);
    assert.equal(supervisor.stats().instances[0]!.restarts, 1);
    supervisor.destroy();
  });

  it('shows a slot whose instance crashed while a sleep closed it as closed, with the crash in lastEnd', async () => {
    const { spawner, supervisor, metrics } = await setupStarted({ m: { instances: 2 } });
    const [a, b] = spawner.children as [ScriptedChild, ScriptedChild];
    const slept = supervisor.sleep('m');
    await settle();
    b.reply(b.expect('Close'), { type: 'Closed' });
    b.exit(0);
    a.expect('Close');
    a.exit(null, 'SIGSEGV'); // dies before it answers Closed
    await slept;
    assert.deepEqual(
      supervisor.stats().instances.map((i) => [i.state, i.lastEnd?.reason]),
      [
        ['closed', 'exited'],
        ['closed', 'closed'],
      ],
    );
    assert.deepEqual(await instanceGauge(metrics, 'm'), { closed: 2 });
    supervisor.destroy();
  });

  it('logs no error for an instance whose start a sleep or a close cut short: it did not fail', async () => {
    // "error: something a human must look at"; a sleep during the boot (or a wake) kills the
    // instances still starting, on purpose, and each one logged "instance failed to start" at error.
    const clock = new FakeClock();
    const spawner = new ScriptedSpawn({ shouldCloseByItself: true });
    const { log, lines } = captureLogger();
    const supervisor = createSupervisor(supervisorOptions({ m: testModel({ command: ['fake-host'], instances: 2 }) }, OPTIONS), {
      spawn: spawner.spawn,
      clock,
      log,
      metrics: createMetrics(),
      baseEnv: {},
    });
    const started = supervisor.start();
    await settle();
    spawner.children[0]!.hello(); // loading; the other one is still handshaking
    await settle();
    await supervisor.sleep('m');
    await started;
    assert.equal(supervisor.modelState('m'), 'stopped');
    const woken = supervisor.wake('m');
    await settle();
    const loading = spawner.children[2]!;
    loading.hello();
    await settle();
    const load = loading.expect('LoadRequest');
    const closed = supervisor.close(); // the wake's instances, still starting, are closed too
    loading.reply(load, { type: 'LoadResult' }); // loaded as the close came: it is not warmed up
    await closed;
    await woken;
    await settle();
    assert.equal(spawner.children.length, 4);
    const errorsLogged = lines().filter((l) => (l.level as number) >= 50);
    assert.deepEqual(
      errorsLogged.map((l) => [l.code, l.instanceId]),
      [],
    );
  });

  it('shows no memory held by a slot with no live instance, as voxmux_instance_memory_bytes does', async () => {
    // A stopped model's processes are gone and their memory freed (operations.md, idle stop): its
    // slots listed the memoryBytes of their last instances in /health/ready while the gauge read 0.
    const { clock, spawner, supervisor, metrics } = await setupStarted({ m: { instances: 2 } }, { shouldCloseByItself: true });
    for (const child of spawner.children) child.heartbeat = { ...child.heartbeat, memoryBytes: 4096 };
    await advanceSettling(clock, 60_000, 60_000);
    const gauge = async () => (await metrics.instanceMemory.get()).values.find((v) => v.labels.model === 'm')?.value;
    assert.deepEqual(
      supervisor.stats().instances.map((i) => i.memoryBytes),
      [4096, 4096],
    );
    assert.equal(await gauge(), 8192);
    spawner.children[0]!.exit(1);
    await settle();
    assert.deepEqual(
      supervisor.stats().instances.map((i) => [i.state, i.memoryBytes]),
      [
        ['restarting', 0],
        ['ready', 4096],
      ],
    );
    assert.equal(await gauge(), 4096);
    await supervisor.sleep('m');
    assert.deepEqual(
      supervisor.stats().instances.map((i) => [i.state, i.memoryBytes]),
      [
        ['closed', 0],
        ['closed', 0],
      ],
    );
    assert.equal(await gauge(), 0);
    supervisor.destroy();
  });

  it('shows a slot whose restart close() cancelled as closed', async () => {
    const { spawner, supervisor, metrics } = await setupStarted({ m: { instances: 2 } }, { shouldCloseByItself: true });
    spawner.children[0]!.exit(1);
    await settle();
    await supervisor.close();
    assert.deepEqual(
      supervisor.stats().instances.map((i) => i.state),
      ['closed', 'closed'],
    );
    assert.deepEqual(await instanceGauge(metrics, 'm'), { closed: 2 });
  });
});
