import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { FakeExecutor } from '../../test/support/fake-executor.js';
import { createScheduler, type SchedulerOptions } from './index.js';
import { errors } from '../core/error-catalog.js';

const audio = (seconds: number) => new Int16Array(Math.round(seconds * 16000));
const req = (seconds: number) => ({ audio: audio(seconds), language: null, prompt: null, wordTimestamps: false });

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
      models: { m: { maxBatchSize: 4, preferredBatchSizes: [4], maxQueueDelayMs: 10 } },
      ...overrides,
    },
    { executor, clock, log: createLogger({ level: 'silent' }), metrics },
  );
  return { clock, executor, scheduler, metrics };
}

describe('Scheduler', () => {
  it('dispatches a partial batch when maxQueueDelayMs elapses', async () => {
    const { clock, executor, scheduler } = setup();
    const done = [scheduler.submit('m', req(1), { timeoutMs: 10_000 }), scheduler.submit('m', req(1), { timeoutMs: 10_000 })];
    await settle();
    assert.deepEqual(executor.batchSizes(), []);
    clock.advance(9);
    await settle();
    assert.deepEqual(executor.batchSizes(), []);
    clock.advance(1);
    await settle();
    assert.deepEqual(executor.batchSizes(), [2]);
    executor.complete(0);
    const results = await Promise.all(done);
    assert.deepEqual(
      results.map((r) => r.text),
      ['samples=16000', 'samples=16000'],
    );
  });

  it('with dispatchWhenIdle, dispatches at once to an idle instance and batches while it is busy', async () => {
    const { clock, executor, scheduler } = setup({
      models: { m: { maxBatchSize: 4, preferredBatchSizes: [4], maxQueueDelayMs: 10, dispatchWhenIdle: true } },
    });
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    await settle();
    assert.deepEqual(executor.batchSizes(), [1], 'no wait while the instance idles');
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    await settle();
    assert.deepEqual(executor.batchSizes(), [1], 'the instance is busy: the next batch forms');
    executor.complete(0);
    await settle();
    assert.deepEqual(executor.batchSizes(), [1, 2], 'idle again: what queued goes at once');
    executor.complete(1);
    await settle();
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    await settle();
    assert.deepEqual(executor.batchSizes(), [1, 2, 1]);
    assert.equal(clock.nowMs(), 0, 'no timer was needed');
  });

  it('reports each dispatch through onDispatched with its instance and queued time (#20)', async () => {
    const { clock, executor, scheduler } = setup();
    const seen: { instanceId: string; queuedMs: number }[][] = [[], []];
    const first = scheduler.submit('m', req(1), { timeoutMs: 10_000, onDispatched: (d) => seen[0]!.push(d) });
    clock.advance(4);
    const second = scheduler.submit('m', req(1), { timeoutMs: 10_000, onDispatched: (d) => seen[1]!.push(d) });
    await settle();
    assert.deepEqual(seen, [[], []], 'nothing is dispatched while the batch forms');
    clock.advance(6);
    await settle();
    assert.deepEqual(seen, [[{ instanceId: 'i0', queuedMs: 10 }], [{ instanceId: 'i0', queuedMs: 6 }]]);
    executor.complete(0);
    await Promise.all([first, second]);
  });

  it('dispatches a full batch at once without waiting', async () => {
    const { executor, scheduler } = setup();
    for (let i = 0; i < 4; i++) void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    await settle();
    assert.deepEqual(executor.batchSizes(), [4]);
  });

  it('groups requests by length bucket so short clips are not padded to long ones', async () => {
    const { clock, executor, scheduler } = setup();
    void scheduler.submit('m', req(2), { timeoutMs: 60_000 });
    void scheduler.submit('m', req(20), { timeoutMs: 60_000 });
    void scheduler.submit('m', req(3), { timeoutMs: 60_000 });
    clock.advance(10);
    await settle();
    assert.deepEqual(executor.batchSizes(), [2]);
    assert.deepEqual(
      executor.batches[0]!.batch.requests.map((r) => r.audio.length),
      [32000, 48000],
    );
    executor.complete(0);
    await settle();
    assert.deepEqual(executor.batchSizes(), [2, 1]);
  });

  it('lets batches grow while every instance is busy', async () => {
    const { clock, executor, scheduler } = setup();
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    clock.advance(10);
    await settle();
    for (let i = 0; i < 3; i++) void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    clock.advance(50);
    await settle();
    assert.deepEqual(executor.batchSizes(), [1]);
    executor.complete(0);
    await settle();
    assert.deepEqual(executor.batchSizes(), [1, 3]);
  });

  it('routes to the ready instance with the fewest pending requests', async () => {
    const { clock, executor, scheduler } = setup({ maxRunningBatchesPerInstance: 2 }, ['a', 'b']);
    for (let i = 0; i < 4; i++) void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    await settle();
    assert.deepEqual(
      executor.batches.map((b) => [b.instanceId, b.batch.requests.length]),
      [
        ['a', 2],
        ['b', 2],
      ],
    );
    executor.complete(1);
    await settle();
    // a still has room for a second batch, but b has fewer pending requests.
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    clock.advance(10);
    await settle();
    assert.equal(executor.batches[2]!.instanceId, 'b');
  });

  it("holds each model's instances to the model's own batches in flight, or the scheduler's", async () => {
    const clock = new FakeClock();
    const executor = new FakeExecutor({ m: ['a'], w: ['b'] });
    const policy = { maxBatchSize: 1, preferredBatchSizes: [1], maxQueueDelayMs: 0 };
    const scheduler = createScheduler(
      {
        maxQueuedRequests: 100,
        retryAfterMs: 1000,
        lengthBucketsMs: [5000],
        maxRunningBatchesPerInstance: 1,
        models: { m: { ...policy, maxRunningBatchesPerInstance: 0 }, w: { ...policy, maxRunningBatchesPerInstance: 3 } },
      },
      { executor, clock, log: createLogger({ level: 'silent' }), metrics: createMetrics() },
    );
    for (let i = 0; i < 4; i++) {
      void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
      void scheduler.submit('w', req(1), { timeoutMs: 10_000 });
    }
    await settle();
    const running = (instanceId: string) => executor.batches.filter((b) => b.instanceId === instanceId).length;
    assert.deepEqual([running('a'), running('b')], [1, 3]);
  });

  it('spreads a due batch over idle instances instead of queueing it on one', async () => {
    const { clock, executor, scheduler } = setup({}, ['a', 'b']);
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    clock.advance(10);
    await settle();
    assert.deepEqual(executor.batchSizes(), [2, 1]);
    assert.deepEqual(
      executor.batches.map((b) => b.instanceId),
      ['a', 'b'],
    );
  });

  it('serves high priority before normal priority', async () => {
    const { clock, executor, scheduler } = setup({ models: { m: { maxBatchSize: 1, preferredBatchSizes: [1], maxQueueDelayMs: 0 } } });
    void scheduler.submit('m', { ...req(1), prompt: 'first' }, { timeoutMs: 10_000 });
    await settle();
    void scheduler.submit('m', { ...req(1), prompt: 'normal' }, { timeoutMs: 10_000 });
    void scheduler.submit('m', { ...req(1), prompt: 'urgent' }, { timeoutMs: 10_000, priority: 'high' });
    executor.complete(0);
    await settle();
    clock.advance(0);
    await settle();
    assert.equal(executor.batches[1]!.batch.requests[0]!.prompt, 'urgent');
  });

  it('rejects with queue_full when the queue is at its limit', async () => {
    const { scheduler } = setup({ maxQueuedRequests: 2 }, []);
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 }).catch(() => undefined);
    void scheduler.submit('m', req(1), { timeoutMs: 10_000 }).catch(() => undefined);
    await assert.rejects(scheduler.submit('m', req(1), { timeoutMs: 10_000 }), (e: { code: string; retryAfterMs: number }) => {
      assert.equal(e.code, 'queue_full');
      assert.equal(e.retryAfterMs, 1000);
      return true;
    });
  });

  it('rejects an unknown model with model_not_found', async () => {
    const { scheduler } = setup();
    await assert.rejects(scheduler.submit('nope', req(1), { timeoutMs: 1000 }), { code: 'model_not_found' });
  });

  it('rejects with no_ready_instance when the model is unavailable', async () => {
    const { executor, scheduler } = setup({}, []);
    executor.setAvailability('m', 'unavailable');
    await assert.rejects(scheduler.submit('m', req(1), { timeoutMs: 1000 }), { code: 'no_ready_instance' });
  });

  it('expires a queued request at its deadline', async () => {
    const { clock, scheduler } = setup({}, []);
    const p = scheduler.submit('m', req(1), { timeoutMs: 500 });
    clock.advance(500);
    await assert.rejects(p, { code: 'deadline_exceeded' });
    assert.equal(scheduler.stats().queued, 0);
  });

  it('drops queued work of a client that disconnected', async () => {
    const { clock, executor, scheduler } = setup({}, []);
    const controller = new AbortController();
    const p = scheduler.submit('m', req(1), { timeoutMs: 10_000, signal: controller.signal });
    controller.abort();
    await assert.rejects(p, { code: 'client_disconnected' });
    executor.setReady('m', ['i0']);
    clock.advance(100);
    await settle();
    assert.deepEqual(executor.batchSizes(), []);
  });

  it('retries a request once on another instance after its instance crashed', async () => {
    const { clock, executor, scheduler, metrics } = setup({}, ['a', 'b']);
    const p = scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    clock.advance(10);
    await settle();
    executor.batches[0]!.reject(errors.instanceCrashed({ instanceId: 'a', reason: 'exit 137' }));
    executor.setReady('m', ['b']);
    await settle();
    clock.advance(10);
    await settle();
    assert.equal(executor.batches[1]!.instanceId, 'b');
    executor.complete(1);
    assert.equal((await p).text, 'samples=16000');
    const retries = await metrics.retries.get();
    assert.equal(retries.values[0]?.value, 1);
  });

  it("counts a retried request's queue wait from its requeue, not from its first arrival (its first run is not queue time)", async () => {
    const { clock, executor, scheduler, metrics } = setup({}, ['a', 'b']);
    const seen: { instanceId: string; queuedMs: number }[] = [];
    const p = scheduler.submit('m', req(1), { timeoutMs: 60_000, onDispatched: (d) => seen.push(d) });
    clock.advance(10);
    await settle();
    clock.advance(5000); // the batch runs for 5 s, then its instance crashes
    executor.batches[0]!.reject(errors.instanceCrashed({ instanceId: 'a', reason: 'exit 137' }));
    executor.setReady('m', ['b']);
    await settle();
    assert.equal(executor.batches[1]!.instanceId, 'b');
    executor.complete(1);
    await p;
    assert.deepEqual(seen, [
      { instanceId: 'a', queuedMs: 10 },
      { instanceId: 'b', queuedMs: 0 },
    ]);
    const wait = (await metrics.queueWait.get()).values.find((v) => v.metricName === 'voxmux_scheduler_queue_wait_seconds_sum');
    assert.equal(wait?.value, 0.01);
  });

  it('dispatches the work queued behind a retried request waiting for an idle instance once that request is dropped (client gone or deadline passed)', async () => {
    for (const ending of ['abort', 'deadline'] as const) {
      const { clock, executor, scheduler } = setup({ maxRunningBatchesPerInstance: 2 }, ['a', 'b']);
      const controller = new AbortController();
      const retried = scheduler.submit('m', req(1), { timeoutMs: 1000, signal: controller.signal });
      clock.advance(10);
      await settle();
      void scheduler.submit('m', req(1), { timeoutMs: 60_000 });
      clock.advance(10);
      await settle();
      assert.deepEqual(
        executor.batches.map((b) => b.instanceId),
        ['a', 'b'],
      );
      executor.batches[0]!.reject(errors.instanceCrashed({ instanceId: 'a', reason: 'exit 137' }));
      executor.setReady('m', ['b']);
      await settle();
      // The retried request waits for an instance with nothing running; b runs one batch of two.
      const behind = scheduler.submit('m', req(1), { timeoutMs: 60_000 });
      clock.advance(10);
      await settle();
      assert.equal(executor.batches.length, 2);
      if (ending === 'abort') controller.abort();
      else clock.advance(1000 - 20);
      await assert.rejects(retried, { code: ending === 'abort' ? 'client_disconnected' : 'deadline_exceeded' });
      clock.advance(10);
      await settle();
      assert.equal(executor.batches.length, 3, `${ending}: the request behind it is dispatched to b, which has room`);
      assert.equal(executor.batches[2]!.instanceId, 'b');
      executor.complete(2);
      await behind;
      scheduler.destroy();
    }
  });

  it('fails a request whose retry also crashed', async () => {
    const { clock, executor, scheduler } = setup();
    const p = scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    clock.advance(10);
    await settle();
    executor.batches[0]!.reject(errors.instanceCrashed({ instanceId: 'i0', reason: 'exit' }));
    await settle();
    clock.advance(10);
    await settle();
    executor.batches[1]!.reject(errors.instanceCrashed({ instanceId: 'i0', reason: 'exit' }));
    await assert.rejects(p, { code: 'instance_crashed' });
  });

  it('retries the requests of a crashed batch each alone, so one that kills its instance fails alone', async () => {
    const { clock, executor, scheduler } = setup({ maxRunningBatchesPerInstance: 4 }, ['a']);
    const calls = [0, 1].map((i) => scheduler.submit('m', req(1), { timeoutMs: 10_000, requestId: `r${i}` }));
    clock.advance(10);
    await settle();
    assert.deepEqual(executor.batchSizes(), [2]);
    executor.crash('a');
    executor.setReady('m', ['b', 'c']);
    await settle();
    // Both requests of the crashed batch are retried at once, each alone on an idle instance.
    assert.deepEqual(executor.batchSizes(), [2, 1, 1]);
    assert.deepEqual(
      executor.batches
        .slice(1)
        .map((b) => b.instanceId)
        .sort(),
      ['b', 'c'],
    );
    const poisoned = executor.batches.findIndex((b, i) => i > 0 && b.batch.requests[0]!.requestId === 'r0');
    executor.crash(executor.batches[poisoned]!.instanceId);
    executor.complete(3 - poisoned);
    const outcomes = await Promise.allSettled(calls);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['rejected', 'fulfilled'],
    );
    assert.equal((outcomes[0] as PromiseRejectedResult).reason.code, 'instance_crashed');
  });

  it('runs a retried request on an instance with nothing else running, even with several batches in flight per instance', async () => {
    const { executor, scheduler } = setup(
      { maxRunningBatchesPerInstance: 2, models: { m: { maxBatchSize: 2, preferredBatchSizes: [2], maxQueueDelayMs: 10 } } },
      ['a'],
    );
    const poison = scheduler.submit('m', req(1), { timeoutMs: 10_000, requestId: 'poison' });
    const innocent = scheduler.submit('m', req(1), { timeoutMs: 10_000, requestId: 'innocent' });
    const outcomes = Promise.allSettled([poison, innocent]);
    await settle();
    assert.deepEqual(executor.batchSizes(), [2]);
    executor.crash('a');
    executor.setReady('m', ['a1']);
    await settle();
    // Both are retried, one at a time: the second waits for the first's instance to drain.
    assert.deepEqual(executor.batchSizes(), [2, 1]);
    const first = executor.batches[1]!;
    if (first.batch.requests[0]!.requestId === 'poison') {
      executor.crash('a1');
      executor.setReady('m', ['a2']);
    } else {
      executor.complete(1);
    }
    await settle();
    assert.deepEqual(executor.batchSizes(), [2, 1, 1]);
    const second = executor.batches[2]!;
    if (second.batch.requests[0]!.requestId === 'poison') executor.crash(second.instanceId);
    else executor.complete(2);
    const [p, q] = await outcomes;
    assert.equal(p.status, 'rejected');
    assert.equal(q.status, 'fulfilled');
  });

  it('does not put a retried request beside a batch already running on an instance', async () => {
    const { clock, executor, scheduler } = setup(
      { maxRunningBatchesPerInstance: 2, models: { m: { maxBatchSize: 2, preferredBatchSizes: [2], maxQueueDelayMs: 10 } } },
      ['a'],
    );
    const calls = [0, 1].map((i) => scheduler.submit('m', req(1), { timeoutMs: 10_000, requestId: `r${i}` }));
    clock.advance(10);
    await settle();
    executor.setReady('m', ['a', 'b']);
    calls.push(scheduler.submit('m', req(1), { timeoutMs: 10_000, requestId: 'r2' }));
    clock.advance(10);
    await settle();
    assert.deepEqual(executor.batchSizes(), [2, 1]);
    const crashed = executor.batches[0]!.instanceId;
    const other = executor.batches[1]!.instanceId;
    executor.crash(crashed);
    await settle();
    assert.deepEqual(executor.batchSizes(), [2, 1], `the retries wait while ${other} runs a batch`);
    executor.complete(1);
    await settle();
    assert.deepEqual([executor.batchSizes(), executor.batches[2]!.instanceId], [[2, 1, 1], other]);
    executor.complete(2);
    await settle();
    assert.deepEqual(executor.batchSizes(), [2, 1, 1, 1]);
    executor.complete(3);
    assert.equal((await Promise.all(calls)).length, 3);
  });

  it('predicts retried requests as the batches of one they run as', async () => {
    const { clock, executor, scheduler } = setup(
      {
        models: { m: { maxBatchSize: 4, preferredBatchSizes: [4], maxQueueDelayMs: 0 } },
        admissionMarginPercent: 0,
        admissionPriorBatchMs: 1000,
        admissionPriorMsPerAudioSecond: 0,
      },
      [],
    );
    const first = [0, 1, 2, 3].map(() => scheduler.submit('m', req(1), { timeoutMs: 60_000 }).catch(() => undefined));
    executor.setReady('m', ['a']);
    await settle();
    assert.deepEqual(executor.batchSizes(), [4]);
    executor.crash('a');
    executor.setReady('m', ['b']); // the four are retried: one runs alone, three wait, each to run alone
    await settle();
    assert.deepEqual(executor.batchSizes(), [4, 1]);
    // Ahead of a new request: the running batch and three of one (4 s), then its own: past 2.5 s.
    await assert.rejects(scheduler.submit('m', req(1), { timeoutMs: 2500 }), { code: 'deadline_unreachable' });
    for (let i = 1; i <= 4; i++) {
      clock.advance(1000);
      executor.complete(i);
      await settle();
    }
    await Promise.all(first);
  });

  it('close resolves once pending requests finish and refuses new ones', async () => {
    const { clock, executor, scheduler } = setup();
    const p = scheduler.submit('m', req(1), { timeoutMs: 10_000 });
    clock.advance(10);
    await settle();
    let isClosed = false;
    const closing = scheduler.close().then(() => (isClosed = true));
    await assert.rejects(scheduler.submit('m', req(1), { timeoutMs: 1000 }), { code: 'shutting_down' });
    await settle();
    assert.equal(isClosed, false);
    executor.complete(0);
    await p;
    await closing;
    assert.equal(isClosed, true);
  });

  it('close resolves when a running batch ends after every request in it passed its deadline', async () => {
    const { clock, executor, scheduler } = setup();
    const p = scheduler.submit('m', req(1), { timeoutMs: 100 });
    clock.advance(10);
    await settle();
    assert.deepEqual(executor.batchSizes(), [1]);
    let isClosed = false;
    const closing = scheduler.close().then(() => (isClosed = true));
    clock.advance(100);
    await assert.rejects(p, { code: 'deadline_exceeded' });
    await settle();
    assert.equal(isClosed, false, 'the batch still runs');
    executor.complete(0);
    await closing;
    assert.equal(isClosed, true);
  });
});

describe('Scheduler catalog (#18)', () => {
  it("lists a model's catalogue as its executor reports it, and none for another model", () => {
    const { executor, scheduler } = setup({}, ['i0', 'i1']);
    const entry = (name: string) => ({ name, kind: 'voice', language: 'en-US', sampleRate: 22_050, gender: null, description: name });
    assert.deepEqual(scheduler.catalog('m'), []);
    executor.setCatalog('m', 'i0', [entry('a'), entry('b')]);
    executor.setCatalog('m', 'i1', [entry('b'), entry('c')]);
    assert.deepEqual(
      scheduler.catalog('m').map((e) => e.name),
      ['a', 'b', 'c'],
    );
    assert.deepEqual(scheduler.catalog('other'), []);
  });
});
