import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { advanceSettling, FakeClock, settle } from '../../test/support/fake-clock.js';
import { ScriptedChild, type ScriptedChildOptions } from '../../test/support/scripted-child.js';
import { silentLogger } from '../../test/support/test-logger.js';
import type { ServiceError } from '../core/errors.js';
import type { BatchInput, BatchItemOutcome } from '../protocol/work.js';
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
