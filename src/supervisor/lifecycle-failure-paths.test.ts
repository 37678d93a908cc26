/**
 * The model lifecycle (idle stop, sleep, wake) composed with the real supervisor and scheduler,
 * over scripted model hosts and a fake clock (docs/operations.md, "Idle stop and wake on demand"):
 * its failure paths and races.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { advanceSettling, FakeClock, settle } from '../../test/support/fake-clock.js';
import { ScriptedSpawn } from '../../test/support/scripted-child.js';
import { supervisorOptions, testModel } from '../../test/support/supervisor-fixture.js';
import { silentLogger } from '../../test/support/test-logger.js';
import type { ServiceError } from '../core/errors.js';
import { createScheduler } from '../scheduler/index.js';
import { createMetrics } from '../telemetry/metrics.js';
import { createSupervisor, type SupervisedModel, type SupervisorOptions } from './supervisor.js';

const OPTIONS: Partial<SupervisorOptions> = {
  loadLockPath: '',
  handshakeTimeoutMs: 1_000,
  loadTimeoutMs: 5_000,
  warmupTimeoutMs: 5_000,
  heartbeatIntervalMs: 600_000,
  heartbeatMissLimit: 3,
  batchTimeoutMs: 600_000,
  closeTimeoutMs: 1_000,
  restartInitialBackoffMs: 100,
  restartMaxBackoffMs: 1_000,
  crashLoopWindowMs: 60_000,
  crashLoopMaxFailures: 4,
};

function setup(
  model: Partial<SupervisedModel>,
  childOptions: ConstructorParameters<typeof ScriptedSpawn>[0] = { shouldStartByItself: true, shouldCloseByItself: true },
) {
  const clock = new FakeClock();
  const spawner = new ScriptedSpawn(childOptions);
  const metrics = createMetrics();
  const log = silentLogger();
  const supervisor = createSupervisor(supervisorOptions({ m: testModel({ command: ['fake-host'], ...model }) }, OPTIONS), {
    spawn: spawner.spawn,
    clock,
    log,
    metrics,
    baseEnv: {},
  });
  const scheduler = createScheduler(
    {
      maxQueuedRequests: 100,
      retryAfterMs: 1000,
      lengthBucketsMs: [5000, 15000, 30000],
      maxRunningBatchesPerInstance: 1,
      models: { m: { maxBatchSize: 1, preferredBatchSizes: [1], maxQueueDelayMs: 0 } },
    },
    { executor: supervisor, clock, log, metrics },
  );
  return { clock, spawner, supervisor, scheduler, metrics };
}

function submit(scheduler: ReturnType<typeof setup>['scheduler']) {
  const seen: { ok?: boolean; error?: ServiceError } = {};
  scheduler
    .submit('m', { audio: new Int16Array(16_000), language: null, prompt: null, wordTimestamps: false }, { timeoutMs: 600_000 })
    .then(
      () => void (seen.ok = true),
      (error: ServiceError) => void (seen.error = error),
    );
  return seen;
}

describe('Model lifecycle failure paths', () => {
  it('does not stop a model for idleness while a retried request waits for its instance to restart', async () => {
    // "the scheduler retries each request once on another instance" (operations.md, Instances), and the
    // idle stop happens once no request has arrived for idleStopAfterMs "and none is running" — here the
    // request never stopped being in flight: it ran, its instance crashed, and it waits for the restart.
    const t = setup({ instances: 1, idleStopAfterMs: 60_000 });
    await t.supervisor.start();
    await settle();
    const first = t.spawner.last();
    const request = submit(t.scheduler);
    await settle();
    first.expect('RunBatch');
    t.clock.advance(59_950); // a long batch
    await settle();
    first.exit(null, 'SIGSEGV'); // the instance dies under it: the request is queued for its retry
    await settle();
    assert.equal(request.error?.code, undefined, 'the request is retried, not failed');
    t.clock.advance(50); // 60 s after the request: the idle timer's check, 50 ms before the restart is due
    await settle();
    t.clock.advance(100); // the restart's backoff
    await settle();
    await settle();
    const second = t.spawner.children[1];
    if (second !== undefined && !second.hasExited) {
      const retried = second.received('RunBatch');
      if (retried.length > 0) second.reply(retried[0]!, { type: 'BatchResult' });
      await settle();
    }
    assert.equal(
      request.error?.code,
      undefined,
      `the retried request failed with ${request.error?.code}: the model went ${t.supervisor.modelState('m')} under it`,
    );
    assert.equal(request.ok, true);
    t.scheduler.destroy();
    t.supervisor.destroy();
  });
  it('holds a request queued when a sleep arrives, and serves it once the model wakes again, as one arriving while it stops', async () => {
    // "stopping: instances are closing (idle stop, a sleep, or a failed wake); running work finishes
    // first" and "A request arriving while a model is stopping wakes it again as soon as it has stopped".
    // The hosts answer Close by hand: a host finishes its batches before it replies Closed (docs/protocol.md).
    const t = setup({ instances: 1 }, { shouldStartByItself: true });
    await t.supervisor.start();
    await settle();
    const first = t.spawner.last();
    const running = submit(t.scheduler);
    const queued = submit(t.scheduler); // one batch at a time: this one waits behind the first
    await settle();
    const sent = first.expect('RunBatch');
    const slept = t.supervisor.sleep('m');
    await settle();
    const arrivedWhileStopping = submit(t.scheduler);
    await settle();
    assert.equal(queued.error?.code, undefined, `the request queued before the sleep failed with ${queued.error?.code}`);
    assert.equal(arrivedWhileStopping.error?.code, undefined);
    first.reply(sent, { type: 'BatchResult' });
    await settle();
    first.reply(first.expect('Close'), { type: 'Closed' });
    first.exit(0);
    await settle();
    await slept; // stopped, then woken again for the held requests
    assert.equal(t.supervisor.modelState('m'), 'ready');
    const second = t.spawner.last();
    assert.notEqual(second, first);
    for (let i = 0; i < 2; i++) {
      second.reply(second.expect('RunBatch'), { type: 'BatchResult' });
      await settle();
    }
    assert.deepEqual([running.ok, queued.ok, arrivedWhileStopping.ok], [true, true, true]);
    t.scheduler.destroy();
    t.supervisor.destroy();
  });
  it('holds a request retried after its instance crashed during a sleep with nothing queued, and serves it once the model wakes again', async () => {
    // "the scheduler retries each request once on another instance" (operations.md, Instances), and a
    // sleep holds "work queued for the model ... for a wake once stopped". Here nothing was queued when
    // the sleep came: the request was running, and is queued again only once its instance crashes in
    // its close. It must be held as the queued work is, not failed with no_ready_instance.
    const t = setup({ instances: 1 }, { shouldStartByItself: true });
    await t.supervisor.start();
    await settle();
    const first = t.spawner.last();
    const request = submit(t.scheduler);
    await settle();
    first.expect('RunBatch');
    const slept = t.supervisor.sleep('m'); // nothing queued: no wake is planned
    await settle();
    assert.equal(t.supervisor.modelState('m'), 'stopping');
    first.exit(null, 'SIGSEGV'); // dies under its running batch before it could close
    await settle();
    assert.equal(request.error?.code, undefined, `the retried request failed with ${request.error?.code}`);
    await slept; // stopped, then woken again for the retried request
    await settle();
    assert.equal(t.supervisor.modelState('m'), 'ready');
    const second = t.spawner.last();
    assert.notEqual(second, first);
    second.reply(second.expect('RunBatch'), { type: 'BatchResult' });
    await settle();
    assert.equal(request.ok, true);
    t.scheduler.destroy();
    t.supervisor.destroy();
  });
  it("predicts a wake by the boot's time to its first ready instance, not by its slowest instance's failure", async () => {
    // "a waking model is predicted ready at its wake's start plus the last start's length": a wake ends,
    // and its held requests run, once the first instance is ready; the boot's length is timed to its
    // last instance instead, here one that never says Hello and fails at handshakeTimeoutMs (1 s).
    const clock = new FakeClock();
    const spawner = new ScriptedSpawn((_request, index) =>
      index === 0 ? { shouldCloseByItself: true } : index === 1 ? {} : { shouldStartByItself: true, shouldCloseByItself: true },
    );
    const supervisor = createSupervisor(supervisorOptions({ m: testModel({ command: ['fake-host'], instances: 2 }) }, OPTIONS), {
      spawn: spawner.spawn,
      clock,
      log: silentLogger(),
      metrics: createMetrics(),
      baseEnv: {},
    });
    const started = supervisor.start();
    await settle();
    clock.advance(200);
    await spawner.children[0]!.walkToReady(); // the model serves 200 ms after its boot began
    assert.equal(supervisor.availability('m'), 'ready');
    clock.advance(800); // the second instance fails its start at 1 s
    await settle();
    await started;
    await supervisor.sleep('m');
    assert.equal(supervisor.modelState('m'), 'stopped');
    supervisor.demand('m');
    const predictedMs = (supervisor.readyAtMs('m') ?? Number.NaN) - clock.nowMs();
    assert.equal(predictedMs, 200, `a wake is predicted to take ${predictedMs} ms`);
    supervisor.destroy();
  });
  it('does not answer a wake that waits on the boot "ready" when no instance could start at boot', async () => {
    // README: POST /v1/models/{id}/wake "?wait=true: answer once ready"; a wake whose instances all fail
    // answers 503 model_wake_failed (operations.md). At boot the same wait resolves 'ready' with none up.
    const t = setup({ instances: 1 }, {}); // children never say Hello: each start fails at handshakeTimeoutMs
    const started = t.supervisor.start();
    await settle();
    let woke: string | undefined;
    void t.supervisor.wake('m').then((end) => (woke = end.isReady ? 'ready' : end.error.code));
    t.clock.advance(1_000); // the boot's only instance fails its start
    await settle();
    await started;
    await settle();
    assert.equal(t.supervisor.readyInstances('m').length, 0);
    assert.equal(woke, 'model_wake_failed', 'wake?wait=true would answer 200 {"state":"ready"} with no instance ready');
    t.scheduler.destroy();
    t.supervisor.destroy();
  });
  it('reads starting, not ready, while its instances crash-loop from boot, and ready once one is', async () => {
    // operations.md: a model is starting "at boot, until one is ready", and ready once "an instance
    // became ready"; it read ready as soon as the boot ended, with none up. Here the first four never
    // say Hello (each start fails at handshakeTimeoutMs, the fourth flags a crash loop); the fifth starts.
    const t = setup({ instances: 1 }, (_request, index) => (index < 4 ? {} : { shouldStartByItself: true, shouldCloseByItself: true }));
    const statesOn = async () => (await t.metrics.modelState.get()).values.filter((v) => v.value === 1).map((v) => String(v.labels.state));
    const started = t.supervisor.start();
    await settle();
    t.clock.advance(1_000); // the boot's only instance fails its start
    await settle();
    await started;
    assert.equal(t.supervisor.readyInstances('m').length, 0);
    assert.equal(t.supervisor.modelState('m'), 'starting', 'GET /v1/models and /health/ready would read ready with no instance up');
    assert.deepEqual(await statesOn(), ['starting']);
    let woke: string | undefined;
    void t.supervisor.wake('m').then((end) => (woke = end.isReady ? 'ready' : end.error.code));
    await settle();
    assert.equal(woke, 'model_wake_failed', 'wake?wait=true answers at once: the boot started no instance');
    await advanceSettling(t.clock, 3_700, 100); // three more starts fail, after 100, 200 and 400 ms of backoff
    assert.equal(t.supervisor.stats().instances[0]!.isCrashLoop, true);
    assert.equal(t.supervisor.modelState('m'), 'starting');
    assert.equal(t.supervisor.availability('m'), 'unavailable', 'calls get no_ready_instance at once, as before');
    await advanceSettling(t.clock, 1_000, 100); // the fifth start, at restartMaxBackoffMs
    assert.equal(t.supervisor.readyInstances('m').length, 1);
    assert.equal(t.supervisor.modelState('m'), 'ready');
    assert.deepEqual(await statesOn(), ['ready']);
    assert.equal((await t.supervisor.wake('m')).isReady, true);
    t.scheduler.destroy();
    t.supervisor.destroy();
  });
  it('reads starting, not ready, while every instance of a ready model is in a crash loop, and ready once one is again', async () => {
    // operations.md: `ready` means "an instance became ready; instances run", and with "every instance
    // of a model in a crash loop, calls get 503 no_ready_instance at once": the model read ready while
    // nothing could serve. Both instances start, then die, and their restarts never say Hello (each
    // fails at handshakeTimeoutMs); slot 0 is in a crash loop 3.7 s after its death, slot 1 at 4.2 s.
    let isHealthy = true;
    const t = setup({ instances: 2 }, () => (isHealthy ? { shouldStartByItself: true, shouldCloseByItself: true } : {}));
    const statesOn = async () => (await t.metrics.modelState.get()).values.filter((v) => v.value === 1).map((v) => String(v.labels.state));
    await t.supervisor.start();
    await settle();
    assert.equal(t.supervisor.modelState('m'), 'ready');
    const seen: string[] = [];
    t.supervisor.onInstancesChanged(() => {
      if (seen.at(-1) !== t.supervisor.modelState('m')) seen.push(t.supervisor.modelState('m'));
    });
    isHealthy = false;
    const [first, second] = t.spawner.children;
    first!.exit(null, 'SIGSEGV');
    await settle();
    await advanceSettling(t.clock, 500, 100);
    second!.exit(null, 'SIGSEGV');
    await settle();
    await advanceSettling(t.clock, 3_200, 100); // slot 0's fourth failure: a crash loop, slot 1 still restarting
    assert.deepEqual(
      t.supervisor.stats().instances.map((i) => i.isCrashLoop),
      [true, false],
    );
    assert.equal(t.supervisor.modelState('m'), 'ready', 'one instance in a crash loop leaves the model ready');
    await advanceSettling(t.clock, 500, 100); // slot 1's fourth failure
    assert.deepEqual(
      t.supervisor.stats().instances.map((i) => i.isCrashLoop),
      [true, true],
    );
    assert.equal(t.supervisor.availability('m'), 'unavailable', 'calls get no_ready_instance at once, as before');
    assert.equal(t.supervisor.modelState('m'), 'starting', 'GET /v1/models and /health/ready would read ready with nothing up');
    assert.deepEqual(await statesOn(), ['starting']);
    assert.equal(t.supervisor.isOnDemand('m'), false, 'the model keeps /health/ready at 503, as before');
    let woke: string | undefined;
    void t.supervisor.wake('m').then((end) => (woke = end.isReady ? 'ready' : end.error.code));
    await settle();
    assert.equal(woke, 'model_wake_failed', 'wake?wait=true answers at once, as after a boot that started none');
    isHealthy = true;
    await advanceSettling(t.clock, 600, 100); // slot 0's next start, at restartMaxBackoffMs
    assert.equal(t.supervisor.readyInstances('m').length, 1);
    assert.equal(t.supervisor.modelState('m'), 'ready');
    assert.deepEqual(await statesOn(), ['ready']);
    assert.equal((await t.supervisor.wake('m')).isReady, true);
    assert.deepEqual(seen, ['ready', 'starting', 'ready'], 'the state changes only when all are in a crash loop, and back');
    t.scheduler.destroy();
    t.supervisor.destroy();
  });
  /** Slot 0's first instance crashes on its load; its restart (after 100 ms of backoff) starts by itself. */
  async function crashFirstLoadThenRestart(t: ReturnType<typeof setup>): Promise<void> {
    const first = t.spawner.children[0]!;
    first.hello();
    await settle();
    first.expect('LoadRequest');
    first.exit(1);
    await settle();
    await advanceSettling(t.clock, 100, 50);
  }

  it('ends a wake ready when an instance that failed its first start is restarted and ready before the others fail', async () => {
    // A wake ends at "the first instance ready". Here slot 0 crashes on its load and its restart (after
    // 100 ms of backoff) is ready at once, while slot 1 never says Hello and fails at handshakeTimeoutMs
    // (1 s): the wake failed at 1 s and the stop killed the ready instance.
    const t = setup({ instances: 2 }, (_request, index) => (index === 2 ? { shouldStartByItself: true, shouldCloseByItself: true } : {}));
    await t.supervisor.sleep('m');
    await t.supervisor.start();
    let woke: string | undefined;
    void t.supervisor.wake('m').then((end) => (woke = end.isReady ? 'ready' : end.error.code));
    await settle();
    await crashFirstLoadThenRestart(t);
    assert.equal(t.supervisor.readyInstances('m').length, 1);
    assert.equal(woke, 'ready', 'the wake waits on although an instance is ready');
    assert.equal(t.supervisor.modelState('m'), 'ready');
    await advanceSettling(t.clock, 1_000, 100); // slot 1 fails its start: restarted, the model stays ready
    assert.equal(t.supervisor.modelState('m'), 'ready');
    assert.equal(t.supervisor.readyInstances('m').length, 1);
    t.scheduler.destroy();
    t.supervisor.destroy();
  });
  it('reads ready after a boot whose first ready instance is a restart, not starting as when none could start', async () => {
    // The same race at boot: the boot ended with "no instance could start" once its launches had failed,
    // and the model read starting (and /health/ready 503) with a restarted instance ready and serving.
    const t = setup({ instances: 2 }, (_request, index) => (index === 2 ? { shouldStartByItself: true, shouldCloseByItself: true } : {}));
    const started = t.supervisor.start();
    await settle();
    await crashFirstLoadThenRestart(t);
    assert.equal(t.supervisor.readyInstances('m').length, 1);
    await advanceSettling(t.clock, 1_000, 100); // slot 1 fails its start
    await started;
    assert.equal(t.supervisor.modelState('m'), 'ready', 'the model reads starting with an instance ready');
    assert.equal(t.supervisor.isOnDemand('m'), false);
    assert.equal((await t.supervisor.wake('m')).isReady, true);
    t.scheduler.destroy();
    t.supervisor.destroy();
  });
  it('leaves a model put to sleep before start() stopped, and wakes it on the next request', async () => {
    // main.ts listens before it starts the instances: a sleep can arrive first, and the boot must not undo it.
    const t = setup({ instances: 1 });
    await t.supervisor.sleep('m');
    await t.supervisor.start();
    await settle();
    assert.equal(t.supervisor.modelState('m'), 'stopped');
    assert.equal(t.spawner.children.length, 0, 'no instance started');
    const request = submit(t.scheduler);
    await settle();
    assert.equal(t.supervisor.modelState('m'), 'ready');
    const child = t.spawner.last();
    child.reply(child.expect('RunBatch'), { type: 'BatchResult' });
    await settle();
    assert.equal(request.ok, true);
    t.scheduler.destroy();
    t.supervisor.destroy();
  });
});
