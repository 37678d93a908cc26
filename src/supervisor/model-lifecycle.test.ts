import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errors } from '../core/error-catalog.js';
import { createMetrics } from '../telemetry/metrics.js';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { silentLogger } from '../../test/support/test-logger.js';
import { createModelLifecycle, type ModelLifecycleDeps, type WakeEnd } from './model-lifecycle.js';

/** The error code a wake() call ended with, or 'ready'. */
const outcomeOf = (end: WakeEnd) => (end.isReady ? 'ready' : end.error.code);

/** A lifecycle over fake instances: starts and stops resolve when the test says so. */
function setup(policy = { idleStopAfterMs: 60_000, wakeTimeoutMs: 90_000 }, overrides: Partial<ModelLifecycleDeps> = {}) {
  const clock = new FakeClock();
  const metrics = createMetrics();
  const calls: string[] = [];
  let finishStart: ((isReady: boolean) => void) | undefined;
  let isBusy = false;
  let queued = 0;
  let refusal: ReturnType<typeof errors.gpuBudgetExhausted> | undefined;
  const lifecycle = createModelLifecycle(
    { models: { m: policy }, retryAfterMs: 1000 },
    {
      clock,
      log: silentLogger(),
      metrics,
      startInstances: () => {
        calls.push('start');
        return new Promise<boolean>((resolve) => (finishStart = resolve));
      },
      stopInstances: () => {
        calls.push('stop');
        return Promise.resolve();
      },
      isBusy: () => isBusy,
      hasQueuedWork: () => queued > 0,
      wakeRefusal: () => refusal,
      onChanged: () => undefined,
      ...overrides,
    },
  );
  return {
    clock,
    metrics,
    calls,
    lifecycle,
    finishStart: (isReady: boolean) => finishStart?.(isReady),
    setBusy: (b: boolean) => (isBusy = b),
    setQueued: (n: number) => (queued = n),
    refuse: (e: typeof refusal) => (refusal = e),
  };
}

async function booted(t: ReturnType<typeof setup>): Promise<void> {
  t.lifecycle.booting('m');
  t.lifecycle.booted('m', { isAnyReady: true });
  await settle();
}

/** Boots, then stops the model by hand, forgetting those calls. */
async function stopped(t: ReturnType<typeof setup>): Promise<void> {
  await booted(t);
  await t.lifecycle.sleep('m');
  t.calls.length = 0;
}

describe('ModelLifecycle', () => {
  it('stops a model after idleStopAfterMs without requests, not before', async () => {
    const t = setup();
    await booted(t);
    t.clock.advance(59_999);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready');
    t.clock.advance(1);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'stopped');
    assert.deepEqual(t.calls, ['stop']);
  });

  it('restarts the idle time at each request, and counts running work as activity', async () => {
    const t = setup();
    await booted(t);
    t.clock.advance(50_000);
    t.lifecycle.demand('m');
    t.clock.advance(50_000);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready');
    t.setBusy(true);
    t.clock.advance(10_000);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready', 'busy at the check: not idle');
    t.setBusy(false);
    t.clock.advance(59_999);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready');
    t.clock.advance(1);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'stopped');
  });

  it('never stops a model whose idleStopAfterMs is 0', async () => {
    const t = setup({ idleStopAfterMs: 0, wakeTimeoutMs: 90_000 });
    await booted(t);
    t.clock.advance(10 * 86_400_000);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready');
  });

  it('wakes a stopped model on demand, once, and is ready when an instance is', async () => {
    const t = setup();
    await booted(t);
    await t.lifecycle.sleep('m');
    assert.equal(t.lifecycle.state('m'), 'stopped');
    t.lifecycle.demand('m');
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.state('m'), 'starting');
    assert.equal(t.lifecycle.isWaking('m'), true);
    assert.equal(t.lifecycle.isOnDemand('m'), true);
    const waited = t.lifecycle.wake('m');
    t.clock.advance(3000);
    t.finishStart(true);
    assert.equal(outcomeOf(await waited), 'ready');
    assert.deepEqual(t.calls, ['stop', 'start']);
    const text = await t.metrics.registry.getSingleMetricAsString('voxmux_model_wake_seconds');
    assert.match(text, /voxmux_model_wake_seconds_sum\{model="m"\} 3/);
    assert.match(await t.metrics.registry.getSingleMetricAsString('voxmux_model_held_requests_total'), /\{model="m"\} 2/);
  });

  it('fails a wake that is not ready within wakeTimeoutMs with model_wake_timeout, and the next demand wakes again', async () => {
    const t = setup({ idleStopAfterMs: 0, wakeTimeoutMs: 5000 });
    await stopped(t);
    const waited = t.lifecycle.wake('m');
    t.clock.advance(4999);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'starting');
    t.clock.advance(1);
    assert.equal(outcomeOf(await waited), 'model_wake_timeout');
    await settle();
    assert.equal(t.lifecycle.state('m'), 'stopped');
    assert.equal(t.lifecycle.failure('m')?.code, 'model_wake_timeout');
    assert.equal(t.lifecycle.failure('m')?.retryAfterMs, 1000);
    t.finishStart(true); // the abandoned wake's late result is ignored
    await settle();
    assert.equal(t.lifecycle.state('m'), 'stopped');
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.state('m'), 'starting');
    assert.equal(t.lifecycle.failure('m'), undefined);
    assert.deepEqual(t.calls, ['start', 'stop', 'start']);
  });

  it('fails a wake whose instances cannot start with model_wake_failed at once', async () => {
    const t = setup();
    await stopped(t);
    const waited = t.lifecycle.wake('m');
    t.finishStart(false);
    assert.equal(outcomeOf(await waited), 'model_wake_failed');
    await settle();
    assert.equal(t.lifecycle.state('m'), 'stopped');
    assert.equal(t.lifecycle.failure('m')?.code, 'model_wake_failed');
    assert.match(await t.metrics.registry.getSingleMetricAsString('voxmux_model_wakes_total'), /model="m",outcome="failed"\} 1/);
  });

  it('wakes again right after a stop when a request arrived while stopping', async () => {
    let finishStop: (() => void) | undefined;
    const t = setup(undefined, {
      stopInstances: () => new Promise<void>((resolve) => (finishStop = resolve)),
    });
    await booted(t);
    const slept = t.lifecycle.sleep('m');
    assert.equal(t.lifecycle.state('m'), 'stopping');
    assert.equal(t.lifecycle.isWaking('m'), false);
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.isWaking('m'), true);
    finishStop?.();
    await settle();
    assert.equal(t.lifecycle.state('m'), 'starting');
    t.finishStart(true);
    await slept;
    assert.equal(t.lifecycle.state('m'), 'ready');
  });

  it('counts queued work as activity: no idle stop while work waits for the model', async () => {
    const t = setup();
    await booted(t);
    t.setQueued(1); // a request retried after its instance ended, waiting for the restart
    t.clock.advance(60_000);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready');
    t.setQueued(0);
    t.clock.advance(59_999);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready');
    t.clock.advance(1);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'stopped');
  });

  it('holds work queued when a sleep arrives: the model wakes again once stopped', async () => {
    const t = setup();
    await booted(t);
    t.setQueued(2);
    const slept = t.lifecycle.sleep('m');
    assert.equal(t.lifecycle.state('m'), 'stopping');
    assert.equal(t.lifecycle.isWaking('m'), true, 'the queued work is held, not failed');
    await settle();
    assert.equal(t.lifecycle.state('m'), 'starting');
    t.finishStart(true);
    await slept;
    assert.equal(t.lifecycle.state('m'), 'ready');
    assert.deepEqual(t.calls, ['stop', 'start']);
  });

  it('ends the wake() calls made during the boot with model_wake_failed when no instance could start, and times no start', async () => {
    const t = setup();
    assert.equal(t.lifecycle.booting('m'), true);
    const waited = t.lifecycle.wake('m');
    t.clock.advance(4000);
    t.lifecycle.booted('m', { isAnyReady: false });
    assert.equal(outcomeOf(await waited), 'model_wake_failed');
    assert.equal(t.lifecycle.state('m'), 'starting', 'no instance is up: its instances are restarted');
    await t.lifecycle.sleep('m');
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.readyAtMs('m'), undefined, 'a boot that started nothing predicts nothing');
  });

  it('keeps a model whose boot started no instance starting while they are restarted, and ready from the first that is', async () => {
    const t = setup();
    t.lifecycle.booting('m');
    t.lifecycle.instanceReady('m'); // during the boot, booted() decides (and times the boot)
    assert.equal(t.lifecycle.state('m'), 'starting');
    t.lifecycle.booted('m', { isAnyReady: false });
    assert.equal(t.lifecycle.state('m'), 'starting');
    assert.equal(t.lifecycle.isOnDemand('m'), false, 'a model failing its boot keeps the server unready');
    assert.equal(t.lifecycle.failure('m'), undefined, 'its calls get no_ready_instance, not a wake failure');
    assert.match(await t.metrics.registry.getSingleMetricAsString('voxmux_model_state'), /model="m",state="starting"\} 1/);
    assert.equal(outcomeOf(await t.lifecycle.wake('m')), 'model_wake_failed', 'a wake answers at once, as at the boot end');
    t.lifecycle.demand('m');
    assert.deepEqual(t.calls, [], 'a request wakes nothing: the instances are restarted already');
    await t.clock.advance(30_000);
    t.lifecycle.instanceReady('m'); // a restart became ready
    assert.equal(t.lifecycle.state('m'), 'ready');
    assert.match(await t.metrics.registry.getSingleMetricAsString('voxmux_model_state'), /model="m",state="ready"\} 1/);
    assert.equal(outcomeOf(await t.lifecycle.wake('m')), 'ready');
    await t.lifecycle.sleep('m');
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.readyAtMs('m'), undefined, 'the restarts are not timed as a start');
  });

  it('stops a model whose boot started no instance after idleStopAfterMs, as a ready one', async () => {
    const t = setup();
    t.lifecycle.booting('m');
    t.lifecycle.booted('m', { isAnyReady: false });
    t.clock.advance(59_999);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'starting');
    t.clock.advance(1);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'stopped');
    assert.deepEqual(t.calls, ['stop']);
    t.lifecycle.instanceReady('m'); // late: the stop ended its instances
    assert.equal(t.lifecycle.state('m'), 'stopped');
  });

  it('makes a ready model starting while every instance is in a crash loop, and ready from the first that is ready again', async () => {
    const t = setup();
    t.lifecycle.booting('m');
    await t.clock.advance(4000);
    t.lifecycle.booted('m', { isAnyReady: true }); // the boot took 4 s
    t.lifecycle.instancesCrashLooping('m');
    assert.equal(t.lifecycle.state('m'), 'starting', 'nothing can serve: its instances are restarted');
    assert.match(await t.metrics.registry.getSingleMetricAsString('voxmux_model_state'), /model="m",state="starting"\} 1/);
    assert.equal(t.lifecycle.isOnDemand('m'), false, 'the model keeps the server unready, as when it read ready');
    assert.equal(t.lifecycle.failure('m'), undefined, 'its calls get no_ready_instance, not a wake failure');
    assert.equal(t.lifecycle.readyAtMs('m'), undefined, 'a crash loop predicts no ready time');
    assert.equal(outcomeOf(await t.lifecycle.wake('m')), 'model_wake_failed', 'a wake answers at once, as after a failed boot');
    t.lifecycle.demand('m');
    assert.deepEqual(t.calls, [], 'a request wakes nothing: the instances are restarted already');
    t.lifecycle.instancesCrashLooping('m'); // another failed restart: nothing changes
    assert.equal(t.lifecycle.state('m'), 'starting');
    t.lifecycle.instanceReady('m'); // a restart became ready
    assert.equal(t.lifecycle.state('m'), 'ready');
    assert.match(await t.metrics.registry.getSingleMetricAsString('voxmux_model_state'), /model="m",state="ready"\} 1/);
    assert.equal(outcomeOf(await t.lifecycle.wake('m')), 'ready');
    await t.lifecycle.sleep('m');
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.readyAtMs('m'), t.clock.nowMs() + 4000, 'the boot is still the last start timed, not the restarts');
  });

  it('keeps a model woken by demand, then in a crash loop, from counting as on demand or holding requests', async () => {
    const t = setup();
    await stopped(t);
    t.lifecycle.demand('m');
    t.finishStart(true);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready');
    const held = async () => (await t.metrics.modelHeldRequests.get()).values.find((v) => v.labels.model === 'm')?.value;
    const heldBefore = await held();
    t.lifecycle.instancesCrashLooping('m');
    assert.equal(t.lifecycle.state('m'), 'starting');
    assert.equal(t.lifecycle.isOnDemand('m'), false, '/health/ready would answer 200 with nothing up');
    assert.equal(t.lifecycle.readyAtMs('m'), undefined, "the last wake's length says nothing of a crash loop");
    t.lifecycle.demand('m');
    assert.equal(await held(), heldBefore, 'its calls are not held: they get no_ready_instance');
    assert.equal(outcomeOf(await t.lifecycle.wake('m')), 'model_wake_failed');
    assert.deepEqual(t.calls, ['start']);
  });

  it('stops a ready model whose instances are all in a crash loop after idleStopAfterMs, as a ready one', async () => {
    const t = setup();
    await booted(t);
    t.clock.advance(30_000);
    await settle();
    t.lifecycle.instancesCrashLooping('m');
    t.clock.advance(29_999);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'starting');
    t.clock.advance(1);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'stopped');
    assert.deepEqual(t.calls, ['stop']);
    t.lifecycle.instanceReady('m'); // late: the stop ended its instances
    assert.equal(t.lifecycle.state('m'), 'stopped');
    t.lifecycle.demand('m');
    assert.deepEqual(t.calls, ['stop', 'start'], 'the next request wakes it as usual');
  });

  it('ignores a crash loop of every instance unless the model is ready: a wake or a stop decides then', async () => {
    const t = setup();
    t.lifecycle.booting('m');
    t.lifecycle.instancesCrashLooping('m'); // during the boot: booted() decides
    t.lifecycle.booted('m', { isAnyReady: true });
    assert.equal(t.lifecycle.state('m'), 'ready');
    await t.lifecycle.sleep('m');
    t.lifecycle.instancesCrashLooping('m');
    assert.equal(t.lifecycle.state('m'), 'stopped');
    t.lifecycle.demand('m');
    t.lifecycle.instancesCrashLooping('m'); // during a wake: its timeout or failure decides
    assert.equal(t.lifecycle.state('m'), 'starting');
    t.finishStart(true);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready');
  });

  it('leaves a model put to sleep before the boot stopped: booting() declines it', async () => {
    const t = setup();
    await t.lifecycle.sleep('m');
    assert.equal(t.lifecycle.booting('m'), false);
    t.lifecycle.booted('m', { isAnyReady: true });
    assert.equal(t.lifecycle.state('m'), 'stopped');
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.state('m'), 'starting');
    assert.equal(t.lifecycle.booting('m'), false, 'woken by demand: the wake starts its instances');
  });

  it('refuses a wake while the budget refuses wakes, leaving the model stopped with that reason', async () => {
    const t = setup();
    await stopped(t);
    t.refuse(errors.gpuBudgetExhausted({ model: 'm', guard: 'monthly GPU budget', retryAfterMs: 60_000 }));
    assert.equal(outcomeOf(await t.lifecycle.wake('m')), 'gpu_budget_exhausted');
    assert.equal(t.lifecycle.state('m'), 'stopped');
    assert.equal(t.lifecycle.failure('m')?.code, 'gpu_budget_exhausted');
    assert.deepEqual(t.calls, []);
    t.refuse(undefined);
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.state('m'), 'starting');
  });

  it("predicts a wake ready at its start plus the last start's length: the boot's, then the last wake's", async () => {
    const t = setup();
    t.lifecycle.booting('m');
    assert.equal(t.lifecycle.readyAtMs('m'), undefined, 'no start timed yet');
    await t.clock.advance(4000);
    t.lifecycle.booted('m', { isAnyReady: true });
    assert.equal(t.lifecycle.readyAtMs('m'), undefined, 'ready: nothing to predict');
    await t.lifecycle.sleep('m');
    await t.clock.advance(1000);
    const wakeAt = t.clock.nowMs();
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.readyAtMs('m'), wakeAt + 4000, 'the boot took 4 s');
    await t.clock.advance(7000);
    t.finishStart(true);
    await settle();
    assert.equal(t.lifecycle.state('m'), 'ready');
    await t.lifecycle.sleep('m');
    const nextAt = t.clock.nowMs();
    t.lifecycle.demand('m');
    assert.equal(t.lifecycle.readyAtMs('m'), nextAt + 7000, 'the last wake took 7 s');
  });
  it('cancels the wake timeout when a sleep ends the wake, and ends the wake() calls waiting for it', async () => {
    const t = setup();
    await stopped(t);
    assert.equal(t.clock.pendingTimers, 0);
    const waited = t.lifecycle.wake('m');
    await t.lifecycle.sleep('m');
    assert.equal(outcomeOf(await waited), 'model_wake_failed');
    assert.equal(t.lifecycle.state('m'), 'stopped');
    assert.equal(t.clock.pendingTimers, 0, 'the abandoned wake still holds its wakeTimeoutMs timer');
  });

  it('ends the wake() calls with shutting_down when the lifecycle closes during a wake (wake?wait=true answers)', async () => {
    const t = setup();
    await stopped(t);
    let result: string | undefined;
    void t.lifecycle.wake('m').then((end) => (result = outcomeOf(end)));
    t.lifecycle.close();
    t.finishStart(true); // the start ends after the close: its result is ignored
    t.clock.advance(90_000); // and so is the wake's timeout
    await settle();
    assert.equal(result, 'shutting_down', 'the wake waiter is still pending after close()');
    assert.equal(t.clock.pendingTimers, 0);
  });
});
