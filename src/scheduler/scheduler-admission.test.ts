/** The scheduler's admission by predicted completion (issue 16), with a FakeExecutor and a FakeClock. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { FakeExecutor } from '../../test/support/fake-executor.js';
import { createScheduler, type SchedulerOptions } from './index.js';
import type { ServiceError } from '../core/errors.js';

const req = (seconds: number) => ({
  audio: new Int16Array(Math.round(seconds * 16000)),
  language: null,
  prompt: null,
  wordTimestamps: false,
});

function setup(overrides: Partial<SchedulerOptions> = {}, instances = ['i0']) {
  const clock = new FakeClock();
  const executor = new FakeExecutor({ m: instances });
  const metrics = createMetrics();
  const scheduler = createScheduler(
    {
      maxQueuedRequests: 100,
      retryAfterMs: 1000,
      lengthBucketsMs: [5000, 15000, 30000],
      maxRunningBatchesPerInstance: 1,
      models: { m: { maxBatchSize: 1, preferredBatchSizes: [], maxQueueDelayMs: 0 } },
      admissionMarginPercent: 0,
      admissionPriorBatchMs: 1000,
      admissionPriorMsPerAudioSecond: 0,
      ...overrides,
    },
    { executor, clock, log: createLogger({ level: 'silent' }), metrics },
  );
  return { clock, executor, scheduler, metrics };
}

/** Submits and records how the request ended, without leaving a rejection unhandled. */
function submit(scheduler: ReturnType<typeof setup>['scheduler'], timeoutMs: number, priority: 'high' | 'normal' = 'normal') {
  const ended: { error?: ServiceError; ok?: boolean } = {};
  const done = scheduler.submit('m', req(1), { timeoutMs, priority }).then(
    () => void (ended.ok = true),
    (error: ServiceError) => void (ended.error = error),
  );
  return { ended, done };
}

/** Runs the executor's batches one after another, each taking `serviceMs` of fake time. */
async function serve(clock: FakeClock, executor: FakeExecutor, count: number, serviceMs: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await settle();
    clock.advance(serviceMs);
    executor.complete(executor.batches.length - 1);
    await settle();
  }
}

describe('Scheduler admission by predicted completion', () => {
  it('refuses at once with deadline_unreachable and the predicted drain time when the prior says the queue is too long', async () => {
    const { scheduler, metrics } = setup();
    const first = submit(scheduler, 2500); // runs at once: admitted whatever the prediction
    const second = submit(scheduler, 2500); // 1000 ms ahead + 1000 ms own ≤ 2500
    const third = submit(scheduler, 2500); // 2000 ms ahead + 1000 ms own > 2500
    await settle();
    assert.equal(first.ended.error, undefined);
    assert.equal(second.ended.error, undefined);
    assert.equal(third.ended.error?.code, 'deadline_unreachable');
    assert.equal(third.ended.error?.kind, 'resource_exhausted');
    assert.equal(third.ended.error?.retryAfterMs, 2000);
    assert.equal(scheduler.stats().queued, 1);
    const rejected = (await metrics.admissionRejected.get()).values.find((v) => v.labels.priority === 'normal');
    assert.equal(rejected?.value, 1);
  });

  it('skips the prediction for queueLimitOnly requests (earlier pieces of a call), which then count for the next one', async () => {
    const { scheduler } = setup();
    const outcomes: string[] = [];
    const track = (p: Promise<unknown>) =>
      p.then(
        () => outcomes.push('ok'),
        (e: ServiceError) => outcomes.push(e.code),
      );
    for (let i = 0; i < 3; i++) void track(scheduler.submit('m', req(1), { timeoutMs: 1500, admission: 'queueLimitOnly' }));
    const last = scheduler.submit('m', req(1), { timeoutMs: 1500 });
    await assert.rejects(last, { code: 'deadline_unreachable' });
    await settle();
    assert.equal(scheduler.stats().pending, 3);
    assert.deepEqual(outcomes, []);
  });

  it('admits by queue length only with admissionByPrediction false (the comparison baseline)', async () => {
    const { scheduler, metrics } = setup({ admissionByPrediction: false, maxQueuedRequests: 3 });
    const calls = Array.from({ length: 5 }, () => submit(scheduler, 2500));
    await settle();
    // One running and three queued, although the prior predicts the third queued one past its
    // deadline; the fifth finds the queue full.
    assert.deepEqual(
      calls.map((c) => c.ended.error?.code),
      [undefined, undefined, undefined, undefined, 'queue_full'],
    );
    assert.equal(
      (await metrics.admissionRejected.get()).values.reduce((sum, v) => sum + v.value, 0),
      0,
    );
  });

  it('learns the service time from completed batches and admits by it', async () => {
    const { clock, executor, scheduler, metrics } = setup();
    const first = submit(scheduler, 1000);
    await serve(clock, executor, 1, 200);
    await first.done;
    // Measured 200 ms per batch: five requests (one running, four queued) end by 1000 ms, within
    // a 1100 ms deadline; a sixth would end at 1200 ms.
    const admitted = Array.from({ length: 5 }, () => submit(scheduler, 1100));
    await settle();
    assert.ok(admitted.every((a) => a.ended.error === undefined));
    const sixth = submit(scheduler, 1100);
    await settle();
    assert.equal(sixth.ended.error?.code, 'deadline_unreachable');
    await serve(clock, executor, 5, 200);
    await Promise.all(admitted.map((a) => a.done));
    assert.ok(admitted.every((a) => a.ended.ok === true));
    // The first request was predicted by the prior (1 s) and took 0.2 s; the five after it exactly as predicted.
    const errorHistogram = (await metrics.admissionPredictionError.get()).values;
    const count = errorHistogram.find((v) => v.metricName?.endsWith('_count'))?.value;
    const sum = errorHistogram.find((v) => v.metricName?.endsWith('_sum'))?.value ?? NaN;
    assert.equal(count, 6);
    assert.ok(Math.abs(sum - -0.8) < 1e-9, String(sum));
  });

  it('judges a high-priority request by the high-priority work ahead of it only', async () => {
    const { clock, executor, scheduler } = setup();
    const first = submit(scheduler, 1000);
    await serve(clock, executor, 1, 200);
    await first.done;
    const normals = Array.from({ length: 6 }, () => submit(scheduler, 1000));
    await settle();
    assert.equal(normals.filter((n) => n.ended.error?.code === 'deadline_unreachable').length, 1);
    // The queue is full for normal work; high-priority work sees only the running batch.
    const highs = Array.from({ length: 4 }, () => submit(scheduler, 1000, 'high'));
    const lastHigh = submit(scheduler, 1000, 'high');
    await settle();
    assert.ok(highs.every((h) => h.ended.error === undefined));
    assert.equal(lastHigh.ended.error?.code, 'deadline_unreachable');
    assert.equal(submit(scheduler, 5000).ended.error, undefined); // a long deadline still fits behind everything
    scheduler.destroy();
    clock.advance(10_000);
    await settle();
  });

  it('counts the batches each instance runs: a second instance halves the predicted wait', async () => {
    const { clock, executor, scheduler } = setup({}, ['i0', 'i1']);
    const first = [submit(scheduler, 1000), submit(scheduler, 1000)];
    await settle();
    clock.advance(200);
    executor.complete(0);
    executor.complete(1);
    await settle();
    await Promise.all(first.map((f) => f.done));
    // 200 ms per batch on 2 instances: 2 running + 8 queued finish by 1000 ms; an 11th does not.
    const burst = Array.from({ length: 11 }, () => submit(scheduler, 1000));
    await settle();
    assert.equal(burst.filter((b) => b.ended.error?.code === 'deadline_unreachable').length, 1);
    assert.equal(burst[10]!.ended.error?.code, 'deadline_unreachable');
    scheduler.destroy();
  });

  it('does not take an instance whose batch runs past its prediction for an idle one: a request too short for its own service time is refused', async () => {
    const { clock, executor, scheduler } = setup();
    const first = submit(scheduler, 60_000); // runs at once; predicted (prior) to take 1000 ms
    await settle();
    clock.advance(3000); // still running, 2 s past its prediction
    const second = submit(scheduler, 500); // would wait for the running batch, then take 1000 ms itself
    await settle();
    assert.equal(second.ended.error?.code, 'deadline_unreachable');
    executor.complete(0);
    await first.done;
    const third = submit(scheduler, 500); // the instance is idle now: admitted whatever the prediction
    await settle();
    assert.equal(third.ended.error, undefined);
    scheduler.destroy();
    clock.advance(1000);
    await settle();
  });
});
