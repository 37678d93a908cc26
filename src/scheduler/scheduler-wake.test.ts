/**
 * The scheduler with a model that stops when idle (#20): every kind of work reports its demand
 * before availability is read, so work for a stopped model is held while it wakes (admission does
 * not refuse it), and held work gets the executor's reason when the wake fails.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errors } from '../core/error-catalog.js';
import type { ServiceError } from '../core/errors.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { FakeExecutor } from '../../test/support/fake-executor.js';
import { createScheduler } from './index.js';

/** A FakeExecutor whose model starts stopped: a demand makes it start; a failed wake has a reason. */
class WakingExecutor extends FakeExecutor {
  demands: string[] = [];
  reason: ServiceError | undefined;
  /** When the wake is predicted to end; undefined: no prediction. */
  readyAt: number | undefined;

  readyAtMs(): number | undefined {
    return this.readyAt;
  }

  demand(model: string): void {
    this.demands.push(model);
    this.reason = undefined;
    if (this.availability(model) === 'unavailable') this.setAvailability(model, 'starting');
  }

  whyUnavailable(): ServiceError | undefined {
    return this.reason;
  }
}

const req = () => ({ audio: new Int16Array(16000), language: null, prompt: null, wordTimestamps: false });

function setup() {
  const clock = new FakeClock();
  const executor = new WakingExecutor({ m: [] });
  executor.setAvailability('m', 'unavailable');
  const scheduler = createScheduler(
    {
      maxQueuedRequests: 100,
      retryAfterMs: 1000,
      lengthBucketsMs: [5000, 15000, 30000],
      maxRunningBatchesPerInstance: 1,
      models: { m: { maxBatchSize: 4, preferredBatchSizes: [], maxQueueDelayMs: 0 } },
      admissionMarginPercent: 20,
      admissionPriorBatchMs: 1000,
      admissionPriorMsPerAudioSecond: 500,
    },
    { executor, clock, log: createLogger({ level: 'silent' }), metrics: createMetrics() },
  );
  return { clock, executor, scheduler };
}

function submit(scheduler: ReturnType<typeof setup>['scheduler'], timeoutMs = 100_000) {
  const ended: { error?: ServiceError; ok?: boolean } = {};
  const done = scheduler.submit('m', req(), { timeoutMs }).then(
    () => void (ended.ok = true),
    (error: ServiceError) => void (ended.error = error),
  );
  return { ended, done };
}

describe('Scheduler with a model woken on demand', () => {
  it('holds the requests for a stopped model while it starts, and runs them all once it is ready', async () => {
    const { executor, scheduler } = setup();
    const calls = Array.from({ length: 20 }, () => submit(scheduler));
    await settle();
    assert.equal(executor.demands.length, 20);
    assert.ok(
      calls.every((c) => c.ended.error === undefined && c.ended.ok === undefined),
      'none refused',
    );
    assert.equal(scheduler.stats().queued, 20);
    executor.setAvailability('m', 'ready');
    executor.setReady('m', ['i0']);
    for (let i = 0; i < 5; i++) {
      await settle();
      executor.complete(executor.batches.length - 1);
    }
    await Promise.all(calls.map((c) => c.done));
    assert.ok(calls.every((c) => c.ended.ok === true));
    assert.deepEqual(executor.batchSizes(), [4, 4, 4, 4, 4]);
  });

  it("fails the held requests with the executor's reason when the wake fails, and the next request demands a wake again", async () => {
    const { executor, scheduler } = setup();
    const held = [submit(scheduler), submit(scheduler)];
    await settle();
    executor.reason = errors.modelWakeFailed({ model: 'm', reason: 'no instance could start', retryAfterMs: 1000 });
    executor.setAvailability('m', 'unavailable');
    await Promise.all(held.map((c) => c.done));
    assert.deepEqual(
      held.map((c) => c.ended.error?.code),
      ['model_wake_failed', 'model_wake_failed'],
    );
    const next = submit(scheduler);
    await settle();
    assert.equal(executor.demands.length, 3);
    assert.equal(next.ended.error, undefined, 'held again, not refused');
    assert.equal(scheduler.stats().queued, 1);
    scheduler.destroy();
  });

  it('refuses at once a request whose deadline the wake left would pass, with a Retry-After for the wake, and holds the others', async () => {
    const { clock, executor, scheduler } = setup();
    // The model's last start took 30 s; this wake began now.
    executor.readyAt = clock.nowMs() + 30_000;
    const short = submit(scheduler, 10_000);
    const long = submit(scheduler, 100_000);
    await settle();
    assert.equal(short.ended.error?.code, 'deadline_unreachable');
    // The drain is the wake left (30 s) and the request's own batch after it.
    const retryAfterMs = short.ended.error!.retryAfterMs!;
    assert.ok(retryAfterMs >= 30_000 && retryAfterMs <= 33_000, `Retry-After ${retryAfterMs} ms`);
    assert.equal(long.ended.error, undefined, 'a deadline past the wake is held');
    assert.equal(scheduler.stats().queued, 1);
    // Without a prediction (no start timed yet) every request is held, as before.
    executor.readyAt = undefined;
    const unknown = submit(scheduler, 10_000);
    await settle();
    assert.equal(unknown.ended.error, undefined);
    scheduler.destroy();
  });

  it('reports the demand of speech streams and session items too, so they wake the model', async () => {
    const { executor, scheduler } = setup();
    const call = scheduler.openStream('m', { resource: null, params: { text: 'hi' }, body: new Uint8Array() }, { timeoutMs: 10_000 });
    const item = scheduler.submitSequenceItem(
      'm',
      { sessionId: 's', seq: 0, audio: new Int16Array(4), isLast: false, options: {} },
      { timeoutMs: 10_000 },
    );
    await settle();
    assert.deepEqual(executor.demands, ['m', 'm']);
    assert.equal(scheduler.stats().streamsQueued, 1);
    scheduler.destroy();
    await assert.rejects(call.done, (e: ServiceError) => e.code === 'shutting_down');
    await assert.rejects(item, (e: ServiceError) => e.code === 'shutting_down');
  });

  it('reports the demand of work retried after its instance crashed, so a model stopping for a sleep wakes for it', async () => {
    // The work ran when the sleep came (nothing was queued, so no wake was planned: the model reads
    // unavailable), and its instance crashed before it could close: the retried request, session item
    // and stream are work given again, held for the wake rather than failed with no_ready_instance.
    const { executor, scheduler } = setup();
    executor.setAvailability('m', 'ready');
    executor.setReady('m', ['i0', 'i1']); // one batch each: the request on one, the session item on the other
    const request = submit(scheduler);
    const call = scheduler.openStream('m', { resource: null, params: { text: 'hi' }, body: new Uint8Array() }, { timeoutMs: 100_000 });
    const item = scheduler.submitSequenceItem(
      'm',
      { sessionId: 's', seq: 0, audio: new Int16Array(4), isLast: false, options: {} },
      { timeoutMs: 100_000 },
    );
    const itemEnded: { error?: ServiceError } = {};
    item.catch((error: ServiceError) => void (itemEnded.error = error));
    const callEnded: { error?: ServiceError } = {};
    call.done.catch((error: ServiceError) => void (callEnded.error = error));
    await settle();
    assert.deepEqual([executor.batches.length, executor.streams.length, executor.sequenceBatches.length], [1, 1, 1]);
    executor.demands.length = 0;
    executor.setAvailability('m', 'unavailable'); // the sleep: stopping, no wake planned
    executor.setReady('m', []); // both instances close: none takes the retried work
    executor.crash('i0');
    executor.crash('i1');
    await settle();
    assert.deepEqual(
      [request.ended.error?.code, callEnded.error?.code, itemEnded.error?.code],
      [undefined, undefined, undefined],
      'the retried work is held, not failed',
    );
    assert.deepEqual(executor.demands, ['m', 'm', 'm']);
    assert.deepEqual([scheduler.stats().queued, scheduler.stats().streamsQueued], [2, 1]);
    scheduler.destroy();
    await Promise.all([request.done, call.done.catch(() => undefined), item.catch(() => undefined)]);
  });
});
