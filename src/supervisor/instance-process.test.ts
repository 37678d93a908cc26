import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { advanceSettling, FakeClock, settle } from '../../test/support/fake-clock.js';
import { ScriptedChild, type ScriptedChildOptions } from '../../test/support/scripted-child.js';
import { silentLogger } from '../../test/support/test-logger.js';
import { errors } from '../core/error-catalog.js';
import type { ServiceError } from '../core/errors.js';
import type {
  BatchInput,
  BatchItemOutcome,
  SequenceBatchInput,
  SequenceStateIn,
  StreamChunk,
  StreamEnd,
  StreamInput,
  StreamSink,
} from '../protocol/work.js';
import { InstanceProcess, type InstanceEnd, type InstanceProcessOptions, type InstanceTimeouts } from './instance-process.js';
import type { InstanceState } from './instance-state.js';
import type { SpawnRequest } from './spawn.js';

const TIMEOUTS: InstanceTimeouts = {
  handshakeTimeoutMs: 1_000,
  loadTimeoutMs: 5_000,
  warmupTimeoutMs: 3_000,
  heartbeatIntervalMs: 100,
  heartbeatMissLimit: 3,
  batchTimeoutMs: 2_000,
  closeTimeoutMs: 500,
};

const SPAWN_REQUEST: SpawnRequest = { command: 'fake-host', args: ['--adapter', 'test'], env: { VOXMUX_INSTANCE_ID: 'm-0-g1' } };

function setup(overrides: Partial<InstanceProcessOptions> = {}, childOptions: ScriptedChildOptions = {}) {
  const clock = new FakeClock();
  const child = new ScriptedChild(childOptions);
  const spawned: SpawnRequest[] = [];
  const instance = new InstanceProcess(
    {
      instanceId: 'm-0-g1',
      model: 'm',
      adapter: 'test',
      adapterOptions: { beamSize: 5 },
      loadLockPath: '/tmp/voxmux-test.lock',
      spawnRequest: SPAWN_REQUEST,
      ...TIMEOUTS,
      ...overrides,
    },
    {
      spawn: (request) => {
        spawned.push(request);
        return child;
      },
      clock,
      log: silentLogger(),
    },
  );
  const states: InstanceState[] = [];
  instance.on('stateChanged', ({ state }) => states.push(state));
  const ends: InstanceEnd[] = [];
  instance.on('ended', (end) => ends.push(end));
  return { clock, child, instance, spawned, states, ends };
}

/** Starts the instance and walks its child to ready. */
async function setupReady(overrides: Partial<InstanceProcessOptions> = {}, childOptions: ScriptedChildOptions = {}) {
  const built = setup(overrides, childOptions);
  const started = built.instance.start();
  await built.child.walkToReady();
  await started;
  return built;
}

function batch(batchId: string, requestIds: readonly string[]): BatchInput {
  return {
    batchId,
    requests: requestIds.map((requestId, i) => ({
      requestId,
      audio: Int16Array.from({ length: 160 * (i + 1) }, (_, k) => (k * 7) % 1000),
      language: null,
      prompt: null,
      wordTimestamps: false,
    })),
  };
}

/** Records how a promise settles, so a test can check that it has not settled yet. */
function track<T>(promise: Promise<T>) {
  const seen: { value?: T; error?: ServiceError; isSettled: boolean } = { isSettled: false };
  promise.then(
    (value) => Object.assign(seen, { value, isSettled: true }),
    (error: ServiceError) => Object.assign(seen, { error, isSettled: true }),
  );
  return seen;
}

/** The code each promise rejected with ('fulfilled' for one that did not reject). */
async function rejectionCodes(promises: readonly Promise<unknown>[]): Promise<string[]> {
  const settled = await Promise.allSettled(promises);
  return settled.map((s) => (s.status === 'rejected' ? (s.reason as ServiceError).code : 'fulfilled'));
}

const codes = (outcomes: readonly BatchItemOutcome[]) => outcomes.map((o) => (o.ok ? 'ok' : o.error.code));

describe('InstanceProcess start', () => {
  it('walks handshake → load → warmup → ready, sending the load request and keeping the load and warmup facts', async () => {
    const { child, instance, spawned, states } = setup();
    const started = track(instance.start());
    assert.deepEqual(spawned, [SPAWN_REQUEST]);
    assert.equal(instance.state, 'handshaking');
    child.hello();
    await settle();
    assert.equal(instance.state, 'loading');
    const load = child.expect('LoadRequest');
    assert.deepEqual(
      { instanceId: load.instanceId, model: load.model, adapter: load.adapter, options: load.options, loadLockPath: load.loadLockPath },
      { instanceId: 'm-0-g1', model: 'm', adapter: 'test', options: { beamSize: 5 }, loadLockPath: '/tmp/voxmux-test.lock' },
    );
    child.expectNothing();
    child.reply(load, { type: 'LoadResult', device: 'cuda:0', parameters: 39_000_000, memoryBytes: 300_000_000, loadMs: 1200 });
    await settle();
    assert.equal(instance.state, 'warming');
    child.reply(child.expect('WarmupRequest'), { type: 'WarmupResult', warmupMs: 800, graphsCaptured: 4 });
    await settle();
    assert.equal(started.isSettled, true);
    assert.equal(started.error, undefined);
    assert.deepEqual(states, ['handshaking', 'loading', 'warming', 'ready']);
    const facts = instance.facts;
    assert.deepEqual(
      { pid: facts.pid, device: facts.device, memoryBytes: facts.memoryBytes, loadMs: facts.loadMs, warmupMs: facts.warmupMs },
      { pid: 4242, device: 'cuda:0', memoryBytes: 300_000_000, loadMs: 1200, warmupMs: 800 },
    );
    assert.equal(facts.graphsCaptured, 4);
    assert.deepEqual(child.kills, []);
  });

  it('breaks its boot down: process start, load and warmup timed here, the stages its adapter reported (#20)', async () => {
    const { clock, child, instance } = setup();
    const started = track(instance.start());
    clock.advance(300);
    child.hello();
    await settle();
    assert.equal(instance.facts.boot, undefined);
    clock.advance(2000);
    const stages = [
      { stage: 'weight_read' as const, ms: 1000, bytes: 2_000_000_000 },
      { stage: 'device_upload' as const, ms: 400.5, bytes: 0 },
    ];
    child.reply(child.expect('LoadRequest'), { type: 'LoadResult', stages });
    await settle();
    clock.advance(700);
    child.reply(child.expect('WarmupRequest'), { type: 'WarmupResult', stages: [{ stage: 'graph_capture', ms: 650, bytes: 0 }] });
    await settle();
    assert.equal(started.error, undefined);
    assert.deepEqual(instance.facts.boot, {
      processStartMs: 300,
      loadMs: 2000,
      warmupWaitMs: 0,
      warmupMs: 700,
      totalMs: 3000,
      stages: [...stages, { stage: 'graph_capture', ms: 650, bytes: 0 }],
      weightReadBytes: 2_000_000_000,
      weightReadBytesPerSecond: 2_000_000_000,
    });
  });

  it('rejects with protocol_mismatch and kills the child when Hello names another protocol version', async () => {
    const { child, instance, ends } = setup();
    const started = instance.start();
    child.hello({ protocolVersion: 1 });
    await assert.rejects(started, { code: 'protocol_mismatch' });
    assert.deepEqual(child.kills, ['SIGKILL']);
    assert.equal(instance.state, 'crashed');
    assert.equal(ends[0]?.reason, 'failed_to_start');
    assert.deepEqual(child.received('LoadRequest'), []);
  });

  it('rejects with instance_crashed and kills the child when no Hello comes within handshakeTimeoutMs', async () => {
    const { clock, child, instance, ends } = setup();
    const started = track(instance.start());
    await advanceSettling(clock, 999, 100);
    assert.equal(started.isSettled, false);
    assert.deepEqual(child.kills, []);
    clock.advance(1);
    await settle();
    assert.equal(started.error?.code, 'instance_crashed');
    assert.deepEqual(child.kills, ['SIGKILL']);
    assert.equal(ends[0]?.reason, 'failed_to_start');
  });

  it('rejects with instance_crashed and kills the child when LoadResult does not come within loadTimeoutMs', async () => {
    const { clock, child, instance, ends } = setup();
    const started = track(instance.start());
    child.hello();
    await settle();
    child.expect('LoadRequest');
    // Heartbeats are answered meanwhile: the instance is alive, only its load is slow.
    await advanceSettling(clock, 4_999, 100);
    assert.equal(started.isSettled, false);
    assert.ok(child.received('Heartbeat').length >= 40);
    clock.advance(1);
    await settle();
    assert.equal(started.error?.code, 'instance_crashed');
    assert.deepEqual(child.kills, ['SIGKILL']);
    assert.equal(ends[0]?.reason, 'failed_to_start');
    assert.deepEqual(child.received('WarmupRequest'), []);
  });

  it('rejects with load_failed when the host answers the load with an Error frame', async () => {
    const { child, instance } = setup();
    const started = instance.start();
    child.hello();
    await settle();
    child.reply(child.expect('LoadRequest'), { type: 'Error', code: 'load_failed', message: 'no such checkpoint' });
    await assert.rejects(started, { code: 'load_failed' });
    assert.deepEqual(child.kills, ['SIGKILL']);
  });

  it('rejects with instance_crashed and kills the child when WarmupResult does not come within warmupTimeoutMs', async () => {
    const { clock, child, instance } = setup();
    const started = track(instance.start());
    child.hello();
    await settle();
    child.reply(child.expect('LoadRequest'), { type: 'LoadResult' });
    await settle();
    child.expect('WarmupRequest');
    await advanceSettling(clock, 2_999, 100);
    assert.equal(started.isSettled, false);
    clock.advance(1);
    await settle();
    assert.equal(started.error?.code, 'instance_crashed');
    assert.deepEqual(child.kills, ['SIGKILL']);
    assert.equal(instance.state, 'crashed');
  });

  it('rejects with instance_crashed when the child exits during the load', async () => {
    const { child, instance, ends } = setup();
    const started = instance.start();
    child.hello();
    await settle();
    child.expect('LoadRequest');
    child.exit(1);
    await assert.rejects(started, { code: 'instance_crashed' });
    assert.deepEqual(ends, [{ reason: 'exited', exitCode: 1, signal: null, error: ends[0]?.error }]);
  });

  it('rejects with instance_crashed when the child cannot be started (spawn error)', async () => {
    const { child, instance, ends } = setup();
    const started = instance.start();
    child.fail(new Error('spawn fake-host ENOENT'));
    await assert.rejects(started, { code: 'instance_crashed' });
    assert.equal(ends[0]?.reason, 'failed_to_start');
  });

  it('kills the child when it sends a bad frame', async () => {
    const { child, instance, ends } = setup();
    const started = instance.start();
    child.sendBadFrame();
    await assert.rejects(started, { code: 'bad_frame' });
    assert.deepEqual(child.kills, ['SIGKILL']);
    assert.equal(ends[0]?.error?.code, 'bad_frame');
  });
});

describe('InstanceProcess batches', () => {
  it('sends RunBatch with every request and its audio, and maps the result to ok and per-request failures', async () => {
    const { child, instance } = await setupReady();
    const finished: { batchSize: number; computeMs: number }[] = [];
    instance.on('batchFinished', (e) => finished.push(e));
    const input = batch('b1', ['r1', 'r2', 'r3', 'r4']);
    const running = instance.runBatch(input);
    const sent = child.expect('RunBatch');
    assert.equal(sent.batchId, 'b1');
    assert.deepEqual(
      sent.requests.map((r) => r.requestId),
      ['r1', 'r2', 'r3', 'r4'],
    );
    sent.requests.forEach((r, i) => assert.deepEqual(r.audio, input.requests[i]!.audio));
    assert.equal(instance.facts.runningBatches, 1);
    child.reply(sent, {
      type: 'BatchResult',
      computeMs: 42,
      items: [
        { transcript: { text: 'hello', language: 'en', durationS: 0.01 } },
        { error: { code: 'invalid_audio', message: 'silence' } },
        { error: { code: 'out_of_memory' } },
        { error: { code: 'model_failed' } },
      ],
    });
    const outcomes = await running;
    assert.deepEqual(codes(outcomes), ['ok', 'invalid_audio', 'out_of_memory', 'model_failed']);
    assert.deepEqual(outcomes[0], {
      requestId: 'r1',
      ok: true,
      result: { text: 'hello', language: 'en', durationS: 0.01, segments: null, words: null },
    });
    assert.deepEqual(
      outcomes.map((o) => o.requestId),
      ['r1', 'r2', 'r3', 'r4'],
    );
    assert.deepEqual(finished, [{ batchSize: 4, computeMs: 42 }]);
    assert.equal(instance.facts.runningBatches, 0);
  });

  it('fails a request with bad_frame when the result for it is missing or names another request', async () => {
    const { child, instance } = await setupReady();
    const running = instance.runBatch(batch('b1', ['r1', 'r2', 'r3']));
    child.reply(child.expect('RunBatch'), { type: 'BatchResult', items: [{}, { requestId: 'other' }] });
    assert.deepEqual(codes(await running), ['ok', 'bad_frame', 'bad_frame']);
    assert.equal(instance.state, 'ready');
  });

  it('rejects a batch with the code of an Error frame that answers it, and stays ready', async () => {
    const { child, instance } = await setupReady();
    const first = instance.runBatch(batch('b1', ['r1']));
    const second = instance.runBatch(batch('b2', ['r2']));
    const sentFirst = child.expect('RunBatch');
    const sentSecond = child.expect('RunBatch');
    child.reply(sentFirst, { type: 'Error', code: 'out_of_memory', message: 'CUDA out of memory' });
    await assert.rejects(first, { code: 'out_of_memory' });
    child.reply(sentSecond, { type: 'BatchResult' });
    assert.deepEqual(codes(await second), ['ok']);
    assert.equal(instance.state, 'ready');
    assert.deepEqual(child.kills, []);
  });

  it('rejects every running batch with instance_crashed when the child exits mid-batch', async () => {
    const { child, instance, ends } = await setupReady();
    const running = [instance.runBatch(batch('b1', ['r1'])), instance.runBatch(batch('b2', ['r2']))];
    child.exit(null, 'SIGSEGV');
    assert.deepEqual(await rejectionCodes(running), ['instance_crashed', 'instance_crashed']);
    assert.equal(instance.state, 'crashed');
    assert.equal(ends.length, 1);
    assert.deepEqual(
      { reason: ends[0]?.reason, exitCode: ends[0]?.exitCode, signal: ends[0]?.signal },
      {
        reason: 'exited',
        exitCode: null,
        signal: 'SIGSEGV',
      },
    );
  });

  it('refuses a batch with instance_crashed unless the instance is ready', async () => {
    const { child, instance } = setup();
    void instance.start().catch(() => undefined);
    await assert.rejects(instance.runBatch(batch('b1', ['r1'])), { code: 'instance_crashed' });
    child.expectNothing();
    instance.destroy();
  });

  it('kills the child and rejects running batches with bad_frame when a frame does not match its type', async () => {
    const { child, instance, ends } = await setupReady();
    const running = instance.runBatch(batch('b1', ['r1']));
    child.sendMalformedMessage();
    await assert.rejects(running, { code: 'bad_frame' });
    assert.deepEqual(child.kills, ['SIGKILL']);
    assert.equal(instance.state, 'crashed');
    assert.equal(ends[0]?.error?.code, 'bad_frame');
  });
});

describe('InstanceProcess heartbeats', () => {
  it('times a batch queued behind another from when that one is answered (each runs 1.5 s of a 2 s limit)', async () => {
    const { clock, child, instance } = await setupReady();
    const b1 = track(instance.runBatch(batch('b1', ['r1'])));
    const b2 = track(instance.runBatch(batch('b2', ['r2'])));
    const m1 = child.expect('RunBatch');
    const m2 = child.expect('RunBatch');
    // The host runs b1 from 0 to 1500 ms, then b2 from 1500 ms; its heartbeats say so (busyMs).
    child.heartbeat = { ...child.heartbeat, state: 'busy', busyMs: 0 };
    for (let t = 0; t < 1500; t += 100) {
      child.heartbeat = { ...child.heartbeat, busyMs: t };
      clock.advance(100);
      await settle();
    }
    child.reply(m1, { type: 'BatchResult' });
    await settle();
    assert.equal(b1.error, undefined);
    for (let t = 0; t < 1200; t += 100) {
      child.heartbeat = { ...child.heartbeat, busyMs: t };
      clock.advance(100);
      await settle();
    }
    assert.equal(instance.state, 'ready', `wedged: ${instance.end?.error?.message}`);
    child.reply(m2, { type: 'BatchResult' });
    await settle();
    assert.equal(b2.error, undefined);
  });

  it('still declares wedged a second batch that runs past the limit once the first is answered', async () => {
    const { clock, child, instance } = await setupReady();
    const b1 = track(instance.runBatch(batch('b1', ['r1'])));
    const b2 = track(instance.runBatch(batch('b2', ['r2'])));
    const m1 = child.expect('RunBatch');
    child.expect('RunBatch');
    await advanceSettling(clock, 1_000, 100);
    child.reply(m1, { type: 'BatchResult' });
    await settle();
    assert.equal(b1.error, undefined);
    await advanceSettling(clock, 2_200, 100);
    assert.equal(b2.error?.code, 'instance_wedged');
  });

  it('sends a heartbeat every heartbeatIntervalMs and stays ready while they are answered', async () => {
    const { clock, child, instance } = await setupReady();
    await advanceSettling(clock, 1_000, 50);
    assert.deepEqual(
      child.received('Heartbeat').map((h) => h.seq),
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    );
    assert.equal(instance.state, 'ready');
  });

  it('declares the instance wedged and kills it when heartbeatMissLimit beats in a row go unanswered', async () => {
    const { clock, child, instance, ends } = await setupReady();
    const running = track(instance.runBatch(batch('b1', ['r1'])));
    child.goSilent();
    // Beats at 100, 200 and 300 go unanswered; the beat due at 400 finds heartbeatMissLimit (3) missing.
    await advanceSettling(clock, 399, 50);
    assert.equal(instance.state, 'ready');
    assert.equal(running.isSettled, false);
    clock.advance(1);
    await settle();
    assert.equal(instance.state, 'crashed');
    assert.equal(running.error?.code, 'instance_wedged');
    assert.deepEqual(child.kills, ['SIGKILL']);
    assert.equal(ends[0]?.reason, 'wedged');
    assert.equal(child.received('Heartbeat').length, 3);
  });

  it('does not count beats missed while loading (the load timeout bounds that phase); counting starts at ready', async () => {
    const { clock, child, instance, ends } = setup({}, { shouldAnswerHeartbeats: false });
    const started = track(instance.start());
    child.hello();
    await settle();
    const load = child.expect('LoadRequest');
    // Ten beats go unanswered while the host holds its interpreter lock importing and reading weights.
    await advanceSettling(clock, 1_000, 50);
    assert.equal(ends.length, 0);
    assert.equal(instance.state, 'loading');
    child.reply(load, { type: 'LoadResult' });
    await settle();
    child.reply(child.expect('WarmupRequest'), { type: 'WarmupResult' });
    await settle();
    assert.equal(started.isSettled, true);
    assert.equal(instance.state, 'ready');
    // Once ready, heartbeatMissLimit (3) unanswered beats wedge it as before.
    await advanceSettling(clock, 300, 50);
    assert.equal(instance.state, 'ready');
    await advanceSettling(clock, 100, 50);
    assert.equal(instance.state, 'crashed');
    assert.equal(ends[0]?.reason, 'wedged');
  });

  it('declares the instance wedged when a HeartbeatAck reports state wedged', async () => {
    const { clock, child, instance, ends } = await setupReady();
    child.heartbeat = { ...child.heartbeat, state: 'wedged' };
    clock.advance(100);
    await settle();
    assert.equal(instance.state, 'crashed');
    assert.equal(ends[0]?.reason, 'wedged');
    assert.equal(ends[0]?.error?.code, 'instance_wedged');
    assert.deepEqual(child.kills, ['SIGKILL']);
  });

  it('declares the instance wedged when a HeartbeatAck reports busyMs over batchTimeoutMs, not at it', async () => {
    const { clock, child, instance } = await setupReady();
    child.heartbeat = { ...child.heartbeat, state: 'busy', busyMs: 2_000 };
    clock.advance(100);
    await settle();
    assert.equal(instance.state, 'ready');
    child.heartbeat = { ...child.heartbeat, busyMs: 2_001 };
    clock.advance(100);
    await settle();
    assert.equal(instance.state, 'crashed');
    assert.equal(instance.end?.reason, 'wedged');
    assert.deepEqual(child.kills, ['SIGKILL']);
  });

  it('declares the instance wedged at the first beat after a batch has run longer than batchTimeoutMs', async () => {
    const { clock, child, instance } = await setupReady();
    const running = track(instance.runBatch(batch('b1', ['r1'])));
    // The host answers its beats and reports itself idle: only the supervisor's own clock catches it.
    await advanceSettling(clock, 2_099, 100);
    assert.equal(instance.state, 'ready');
    clock.advance(1);
    await settle();
    assert.equal(running.error?.code, 'instance_wedged');
    assert.deepEqual(child.kills, ['SIGKILL']);
  });

  it('stops sending heartbeats once the instance has ended', async () => {
    const { clock, child, instance } = await setupReady();
    instance.destroy();
    const beats = child.received('Heartbeat').length;
    clock.advance(1_000);
    await settle();
    assert.equal(child.received('Heartbeat').length, beats);
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('InstanceProcess close and destroy', () => {
  it('close() sends Close, drains, and ends closed when the child answers Closed and exits 0', async () => {
    const { child, instance, ends, states } = await setupReady();
    const closed = track(instance.close());
    assert.equal(instance.state, 'draining');
    const close = child.expect('Close');
    child.reply(close, { type: 'Closed' });
    await settle();
    assert.equal(closed.isSettled, false, 'close() waits for the exit');
    child.exit(0);
    await settle();
    assert.equal(closed.isSettled, true);
    assert.equal(closed.error, undefined);
    assert.deepEqual(states.slice(-2), ['draining', 'closed']);
    assert.deepEqual(ends, [{ reason: 'closed', exitCode: 0, signal: null, error: undefined }]);
    assert.deepEqual(child.kills, []);
  });

  it('close() lets a running batch finish before the child exits', async () => {
    const { child, instance } = await setupReady({}, { shouldCloseByItself: false });
    const running = instance.runBatch(batch('b1', ['r1']));
    const sent = child.expect('RunBatch');
    const closed = instance.close();
    child.expect('Close');
    child.reply(sent, { type: 'BatchResult' });
    assert.deepEqual(codes(await running), ['ok']);
    child.send({ type: 'Closed' });
    child.exit(0);
    await closed;
    assert.equal(instance.state, 'closed');
  });

  it('close() kills the child when it has not exited within closeTimeoutMs', async () => {
    const { clock, child, instance, ends } = await setupReady();
    const closed = track(instance.close());
    child.expect('Close');
    await advanceSettling(clock, 499, 100);
    assert.equal(closed.isSettled, false);
    assert.deepEqual(child.kills, []);
    clock.advance(1);
    await settle();
    assert.equal(closed.isSettled, true);
    assert.deepEqual(child.kills, ['SIGKILL']);
    assert.equal(ends[0]?.reason, 'closed');
  });

  it('close() during the load ends the instance closed, not crashed, when the child exits 0', async () => {
    const { child, instance, ends } = setup();
    const started = track(instance.start());
    child.hello();
    await settle();
    const load = child.expect('LoadRequest');
    const closed = instance.close();
    child.expect('Close');
    // The host finishes the load it holds, answers Close, and exits.
    child.reply(load, { type: 'LoadResult' });
    child.send({ type: 'Closed' });
    child.exit(0);
    await closed;
    assert.equal(instance.state, 'closed');
    assert.deepEqual(ends, [{ reason: 'closed', exitCode: 0, signal: null, error: undefined }]);
    assert.equal(started.error?.code, 'shutting_down');
    assert.deepEqual(child.received('WarmupRequest'), [], 'no warmup is asked of a closing instance');
  });

  it('close() during the warmup does not make the instance ready when the warmup it holds answers', async () => {
    const { child, instance, states, ends } = setup();
    const started = track(instance.start());
    child.hello();
    await settle();
    child.reply(child.expect('LoadRequest'), { type: 'LoadResult' });
    await settle();
    const warmup = child.expect('WarmupRequest');
    const closed = instance.close();
    child.expect('Close');
    // The host finishes the warmup it holds, then answers Close and exits.
    child.reply(warmup, { type: 'WarmupResult' });
    await settle();
    assert.notEqual(instance.state, 'ready', 'a closing instance is not offered for work');
    await assert.rejects(instance.runBatch(batch('b1', ['r1'])), { code: 'instance_crashed' });
    child.send({ type: 'Closed' });
    child.exit(0);
    await closed;
    assert.equal(instance.state, 'closed');
    assert.ok(!states.includes('ready'), `states: ${states.join(', ')}`);
    assert.deepEqual(ends, [{ reason: 'closed', exitCode: 0, signal: null, error: undefined }]);
    assert.equal(started.error?.code, 'shutting_down');
  });

  it('close() of an instance that has ended resolves at once and sends nothing', async () => {
    const { child, instance } = await setupReady();
    child.exit(1);
    await settle();
    await instance.close();
    child.expectNothing();
  });

  it('destroy() kills the child now and fails running batches with shutting_down', async () => {
    const { child, instance, ends } = await setupReady();
    const running = [instance.runBatch(batch('b1', ['r1'])), instance.runBatch(batch('b2', ['r2']))];
    instance.destroy();
    assert.deepEqual(await rejectionCodes(running), ['shutting_down', 'shutting_down']);
    assert.deepEqual(child.kills, ['SIGKILL']);
    assert.equal(instance.state, 'closed');
    assert.equal(ends.length, 1);
    assert.equal(ends[0]?.reason, 'closed');
    child.expect('RunBatch');
    child.expect('RunBatch');
    child.expectNothing();
  });

  it('destroy() during the start rejects the start with shutting_down', async () => {
    const { child, instance } = setup();
    const started = instance.start();
    child.hello();
    await settle();
    instance.destroy();
    await assert.rejects(started, { code: 'shutting_down' });
    assert.equal(instance.state, 'closed');
  });
});

function sequenceBatch(batchId: string, items: readonly { sessionId: string; seq: number; state?: SequenceStateIn }[]): SequenceBatchInput {
  return {
    batchId,
    items: items.map((item, i) => ({
      requestId: `${item.sessionId}:${item.seq}`,
      sessionId: item.sessionId,
      seq: item.seq,
      audio: Int16Array.from({ length: 80 * (i + 1) }, (_, k) => k - i),
      state: item.state ?? { kind: 'new' },
      isLast: false,
      options: { speakers: 2 },
    })),
  };
}

const endCodes = (ends: readonly StreamEnd[]) => ends.map((e) => (e.ok ? 'ok' : e.error.code));

/** A sink that records what reaches it. */
function recordingSink() {
  const chunks: StreamChunk[] = [];
  const ends: StreamEnd[] = [];
  const sink: StreamSink = { chunk: (c) => chunks.push(c), end: (e) => ends.push(e) };
  return { sink, chunks, ends };
}

function streamInput(streamId: string, creditChunks = 4): StreamInput {
  return { streamId, requestId: `req-${streamId}`, resource: 'alloy', params: { text: 'hi' }, body: Uint8Array.of(1, 2, 3), creditChunks };
}

describe('InstanceProcess sequence batches', () => {
  it('sends RunSequenceBatch with each item, its audio and its attached state, and maps results with their state bytes', async () => {
    const { child, instance } = await setupReady();
    const finished: { batchSize: number; computeMs: number }[] = [];
    instance.on('sequenceBatchFinished', (e) => finished.push(e));
    const attached = Uint8Array.of(9, 8, 7, 6, 5);
    const input = sequenceBatch('q1', [
      { sessionId: 'a', seq: 0 },
      { sessionId: 'b', seq: 3, state: { kind: 'attached', bytes: attached } },
      { sessionId: 'c', seq: 1, state: { kind: 'resident' } },
    ]);
    const running = instance.runSequenceBatch(input);
    const sent = child.expect('RunSequenceBatch');
    assert.equal(sent.batchId, 'q1');
    assert.deepEqual(
      sent.items.map((item) => [item.sessionId, item.seq, item.stateIn, item.stateBytes, item.isLast, item.options]),
      [
        ['a', 0, 'new', 0, false, { speakers: 2 }],
        ['b', 3, 'attached', 5, false, { speakers: 2 }],
        ['c', 1, 'resident', 0, false, { speakers: 2 }],
      ],
    );
    sent.items.forEach((item, i) => assert.deepEqual(item.audio, input.items[i]!.audio));
    assert.deepEqual(sent.items[1]!.state, attached);
    assert.equal(instance.facts.runningBatches, 1);
    child.reply(sent, {
      type: 'SequenceResult',
      computeMs: 7,
      items: [
        { output: { sum: 1 }, state: Uint8Array.of(1) },
        { output: { sum: 2 }, state: Uint8Array.of(2, 2, 2) },
        { error: { code: 'session_state_missing' } },
      ],
    });
    const outcomes = await running;
    assert.deepEqual(
      outcomes.slice(0, 2).map((o) => (o.ok ? { requestId: o.requestId, output: o.output, state: [...o.state] } : o.error.code)),
      [
        { requestId: 'a:0', output: { sum: 1 }, state: [1] },
        { requestId: 'b:3', output: { sum: 2 }, state: [2, 2, 2] },
      ],
    );
    assert.equal(outcomes[2]?.ok === false && outcomes[2].error.code, 'session_state_missing');
    assert.deepEqual(finished, [{ batchSize: 3, computeMs: 7 }]);
    assert.equal(instance.facts.runningBatches, 0);
  });

  it('rejects a running sequence batch with instance_crashed when the child exits mid-batch', async () => {
    const { child, instance } = await setupReady();
    const running = instance.runSequenceBatch(sequenceBatch('q1', [{ sessionId: 'a', seq: 0 }]));
    child.expect('RunSequenceBatch');
    child.exit(null, 'SIGKILL');
    assert.deepEqual(await rejectionCodes([running]), ['instance_crashed']);
  });

  it('declares the instance wedged at the first beat after a sequence batch has run longer than batchTimeoutMs', async () => {
    const { clock, instance } = await setupReady();
    const running = track(instance.runSequenceBatch(sequenceBatch('q1', [{ sessionId: 'a', seq: 0 }])));
    await advanceSettling(clock, 2_100, 100);
    assert.equal(running.error?.code, 'instance_wedged');
  });

  it('sends EndSessions and settles on SessionsEnded', async () => {
    const { child, instance } = await setupReady();
    instance.endSessions(['a', 'b']);
    const sent = child.expect('EndSessions');
    assert.deepEqual(sent.sessionIds, ['a', 'b']);
    assert.equal(instance.facts.runningBatches, 0, 'not batch work');
    child.reply(sent, { type: 'SessionsEnded' });
    await settle();
    instance.endSessions([]);
    child.expectNothing();
    assert.equal(instance.state, 'ready');
  });
});

describe('InstanceProcess streams', () => {
  it('ends the sink with the error of an Error frame answering its StartStream, and frees the stream', async () => {
    const { child, instance } = await setupReady();
    const { sink, ends } = recordingSink();
    instance.openStream(streamInput('s1'), sink);
    const start = child.expect('StartStream');
    child.reply(start, { type: 'Error', code: 'unsupported_option', message: 'This instance does not handle StartStream messages' });
    await settle();
    assert.deepEqual(
      ends.map((e) => (e.ok ? 'ok' : e.error.code)),
      ['unsupported_option'],
    );
    assert.equal(instance.facts.runningStreams, 0);
  });

  it('sends StartStream, delivers chunks in order, sends StreamCredit for grants, and ends the sink with the usage', async () => {
    const { child, instance } = await setupReady();
    const { sink, chunks, ends } = recordingSink();
    const control = instance.openStream(streamInput('s1', 2), sink);
    const start = child.expect('StartStream');
    assert.deepEqual(
      { streamId: start.streamId, requestId: start.requestId, resource: start.resource, params: start.params, credit: start.creditChunks },
      { streamId: 's1', requestId: 'req-s1', resource: 'alloy', params: { text: 'hi' }, credit: 2 },
    );
    assert.deepEqual([...start.body], [1, 2, 3]);
    assert.equal(instance.facts.runningStreams, 1);
    child.reply(start, { type: 'StreamChunk', meta: { sampleRate: 24000 }, bytes: Uint8Array.of(10) });
    child.reply(start, { type: 'StreamChunk', bytes: Uint8Array.of(11) });
    await settle();
    control.grant(1);
    control.grant(2);
    assert.deepEqual(
      child.received('StreamCredit').map((c) => [c.streamId, c.chunks]),
      [
        ['s1', 1],
        ['s1', 2],
      ],
    );
    child.reply(start, { type: 'StreamChunk', bytes: Uint8Array.of(12) });
    child.reply(start, { type: 'StreamEnd', usage: { chunks: 3 } });
    await settle();
    assert.deepEqual(
      chunks.map((c) => [c.index, [...c.bytes]]),
      [
        [0, [10]],
        [1, [11]],
        [2, [12]],
      ],
    );
    assert.deepEqual(chunks[0]?.meta, { sampleRate: 24000 });
    assert.deepEqual(ends, [{ ok: true, chunks: 3, usage: { chunks: 3 } }]);
    assert.equal(instance.facts.runningStreams, 0);
    control.grant(1);
    assert.equal(child.received('StreamCredit').length, 2, 'no credit for an ended stream');
  });

  it('cancel() sends CancelStream, drops later chunks, and ends the sink once with stream_cancelled when the host confirms', async () => {
    const { child, instance } = await setupReady();
    const { sink, chunks, ends } = recordingSink();
    const control = instance.openStream(streamInput('s1'), sink);
    const start = child.expect('StartStream');
    child.reply(start, { type: 'StreamChunk' });
    await settle();
    control.cancel();
    control.cancel();
    assert.deepEqual(
      child.received('CancelStream').map((c) => c.streamId),
      ['s1'],
    );
    assert.equal(ends.length, 0, 'the sink ends when the host confirms');
    assert.equal(instance.facts.runningStreams, 1);
    child.reply(start, { type: 'StreamChunk' });
    child.reply(start, { type: 'StreamEnd', error: { code: 'stream_cancelled' } });
    await settle();
    assert.equal(chunks.length, 1);
    assert.deepEqual(endCodes(ends), ['stream_cancelled']);
    assert.equal(instance.facts.runningStreams, 0);
  });

  it('ends every open stream with instance_crashed when the child exits mid-stream', async () => {
    const { child, instance } = await setupReady();
    const first = recordingSink();
    const second = recordingSink();
    instance.openStream(streamInput('s1'), first.sink);
    const cancelled = instance.openStream(streamInput('s2'), second.sink);
    child.reply(child.expect('StartStream'), { type: 'StreamChunk' });
    child.expect('StartStream');
    await settle();
    cancelled.cancel();
    child.exit(null, 'SIGKILL');
    await settle();
    assert.deepEqual(endCodes(first.ends), ['instance_crashed']);
    assert.deepEqual(endCodes(second.ends), ['stream_cancelled']);
    assert.equal(first.chunks.length, 1);
  });

  it('ends the sink at once with instance_crashed when the instance is not ready', async () => {
    const { instance } = await setupReady();
    instance.destroy(errors.instanceCrashed({ instanceId: 'm-0-g1', reason: 'test' }));
    const { sink, ends } = recordingSink();
    instance.openStream(streamInput('s1'), sink);
    assert.deepEqual(endCodes(ends), ['instance_crashed']);
  });

  it('ends the stream with bad_frame and cancels it at the host when a chunk index skips', async () => {
    const { child, instance } = await setupReady();
    const { sink, chunks, ends } = recordingSink();
    instance.openStream(streamInput('s1'), sink);
    const start = child.expect('StartStream');
    child.reply(start, { type: 'StreamChunk', index: 0 });
    child.reply(start, { type: 'StreamChunk', index: 2 });
    await settle();
    assert.equal(chunks.length, 1);
    assert.deepEqual(endCodes(ends), ['bad_frame']);
    assert.equal(child.received('CancelStream').length, 1);
    assert.equal(instance.state, 'ready');
  });

  it('does not time a stream waiting for credit by batchTimeoutMs; the host busyMs still wedges it', async () => {
    const { clock, child, instance } = await setupReady();
    const { sink, ends } = recordingSink();
    instance.openStream(streamInput('s1'), sink);
    child.expect('StartStream');
    await advanceSettling(clock, 3_000, 100);
    assert.equal(instance.state, 'ready');
    child.heartbeat = { ...child.heartbeat, state: 'busy', busyMs: 2_001, streams: 1 };
    await advanceSettling(clock, 100, 100);
    assert.equal(instance.state, 'crashed');
    assert.deepEqual(endCodes(ends), ['instance_wedged']);
  });
});

describe('InstanceProcess resources', () => {
  it('keeps the resources of HeartbeatAcks and emits resourcesChanged only when they change', async () => {
    const { clock, child, instance } = await setupReady();
    const changes: string[][] = [];
    instance.on('resourcesChanged', ({ resources }) => changes.push(resources.map((r) => r.name)));
    child.heartbeat = { ...child.heartbeat, resources: [{ name: 'alloy', kind: 'voice', residency: 'device', bytes: 100 }] };
    await advanceSettling(clock, 300, 100);
    assert.deepEqual(changes, [['alloy']]);
    assert.deepEqual(instance.facts.resources, [{ name: 'alloy', kind: 'voice', residency: 'device', bytes: 100 }]);
  });

  it('loadResource sends LoadResource and resolves with the host answer; evictResource removes it', async () => {
    const { child, instance } = await setupReady();
    const changes: string[][] = [];
    instance.on('resourcesChanged', ({ resources }) => changes.push(resources.map((r) => r.name)));
    const loading = instance.loadResource('echo', 'voice', { bytes: 2048 });
    const load = child.expect('LoadResource');
    assert.deepEqual([load.name, load.kind, load.source], ['echo', 'voice', { bytes: 2048 }]);
    child.reply(load, { type: 'ResourceLoaded', residency: 'host', bytes: 2048, loadMs: 3, source: 'disk' });
    assert.deepEqual(await loading, { name: 'echo', kind: 'voice', residency: 'host', bytes: 2048, loadMs: 3, source: 'disk' });
    const evicting = instance.evictResource('echo');
    child.reply(child.expect('EvictResource'), { type: 'ResourceEvicted', bytes: 2048 });
    assert.deepEqual(await evicting, { name: 'echo', bytes: 2048 });
    assert.deepEqual(changes, [['echo'], []]);
    const failing = instance.loadResource('nope', 'voice', {});
    child.reply(child.expect('LoadResource'), { type: 'Error', code: 'resource_not_found' });
    await assert.rejects(failing, { code: 'resource_not_found' });
  });
});
