/**
 * The diarization session service over the real scheduler and a fake executor: the gateway's
 * sessions and the scheduler's agree on which sequence numbers were taken, on a closed id, and
 * on when a session is idle.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, settle } from '../../../test/support/fake-clock.js';
import { FakeExecutor } from '../../../test/support/fake-executor.js';
import { createScheduler, type SequenceItemOutcome } from '../../scheduler/index.js';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics } from '../../telemetry/metrics.js';
import { DiarizationSessionService } from './session-service.js';

/** A diarizer's answer for each item: one provisional turn over the chunk. */
function diarOutcomes(
  items: readonly { requestId: string; seq: number; options: Record<string, unknown>; audio: Int16Array }[],
): SequenceItemOutcome[] {
  return items.map((i) => {
    const start = i.options.chunkOffsetS as number;
    return {
      requestId: i.requestId,
      ok: true,
      output: { finalized: [], provisional: [{ start, end: start + i.audio.length / 16000, speaker: 0 }], speakers: 1 },
      state: new Uint8Array([i.seq]),
    };
  });
}

function setup(p: { maxQueuedRequests?: number } = {}) {
  const clock = new FakeClock();
  const executor = new FakeExecutor({ diar: ['a'] });
  const metrics = createMetrics();
  const log = createLogger({ level: 'silent' });
  const scheduler = createScheduler(
    {
      maxQueuedRequests: p.maxQueuedRequests ?? 1000,
      retryAfterMs: 1000,
      lengthBucketsMs: [5000],
      maxRunningBatchesPerInstance: 1,
      models: { diar: { maxBatchSize: 8, preferredBatchSizes: [], maxQueueDelayMs: 0, sessionIdleTimeoutMs: 60_000 } },
    },
    { executor, clock, log, metrics },
  );
  const sequences = { submit: scheduler.submitSequenceItem.bind(scheduler), end: scheduler.endSession.bind(scheduler) };
  const service = new DiarizationSessionService({ sequences, clock, metrics, log, maxChunkMs: 5000 });
  const completeAll = () => {
    for (const b of executor.runningSequenceBatches()) executor.completeSequence(b, diarOutcomes(b.batch.items as never));
  };
  const create = (id: string) => service.create({ id, model: 'diar', bounds: {}, idleTimeoutMs: 60_000 });
  const chunk = (id: string, seq: number, timeoutMs = 1_000_000) =>
    service.chunk({ id, seq, isLast: false, samples: new Int16Array(16000) }, { timeoutMs, priority: 'normal' }).then(
      (r) => r.seq,
      (e: { code: string }) => e.code,
    );
  return { clock, executor, service, completeAll, create, chunk };
}

describe('DiarizationSessionService with the scheduler', () => {
  it('gives back the number of a chunk dropped from the queue when no instance can run the model: sent again, it runs', async () => {
    const { executor, completeAll, create, chunk } = setup();
    await create('s');
    const c0 = chunk('s', 0);
    await settle();
    completeAll();
    assert.equal(await c0, 0);
    executor.setReady('diar', []); // the instance restarts: chunk 1 waits in the queue
    const c1 = chunk('s', 1);
    await settle();
    executor.setAvailability('diar', 'unavailable'); // then a crash loop: queued work fails at once
    assert.equal(await c1, 'no_ready_instance');
    executor.setAvailability('diar', 'ready');
    executor.setReady('diar', ['a']);
    const retry = chunk('s', 1);
    await settle();
    assert.equal(executor.runningSequenceBatches().length, 1, 'the resent chunk runs');
    completeAll();
    assert.equal(await retry, 1);
    const next = chunk('s', 2);
    await settle();
    completeAll();
    assert.equal(await next, 2);
  });

  it("keeps a closing session's id taken until the scheduler's session has ended", async () => {
    const { clock, service, completeAll, create, chunk } = setup();
    await create('call');
    const c0 = chunk('call', 0, 100);
    await settle();
    clock.advance(100); // the chunk's deadline passes while it runs
    assert.equal(await c0, 'deadline_exceeded');
    const closed = service.close('call', { timeoutMs: 1_000_000 }); // waits for the run to answer
    await settle();
    await assert.rejects(create('call'), { code: 'session_already_exists' });
    completeAll();
    await closed;
    await create('call');
    const first = chunk('call', 0);
    await settle();
    completeAll();
    assert.equal(await first, 0, "the new session's chunk 0 runs");
  });

  it('counts a refused chunk as activity on both sides: the retry after Retry-After finds the session', async () => {
    const { clock, completeAll, create, chunk } = setup({ maxQueuedRequests: 1 });
    await create('s');
    const c0 = chunk('s', 0);
    await settle();
    completeAll();
    await c0;
    clock.advance(59_000);
    // Another session fills the one-place queue: its chunk 0 runs, its chunk 1 waits.
    await create('other');
    const o0 = chunk('other', 0);
    await settle();
    const o1 = chunk('other', 1);
    await settle();
    assert.equal(await chunk('s', 1), 'queue_full');
    clock.advance(1_500); // past the 60 s since chunk 0, not since the refusal
    completeAll();
    await settle();
    completeAll();
    await Promise.all([o0, o1]);
    const retry = chunk('s', 1);
    await settle();
    completeAll();
    assert.equal(await retry, 1);
  });

  it("answers a chunk's retry with its own kept answer when it failed before the chunk ahead of it answered", async () => {
    const { clock, completeAll, create, chunk } = setup();
    await create('s');
    const c0 = chunk('s', 0);
    await settle();
    const c1 = chunk('s', 1, 100); // waits behind chunk 0; its deadline passes there
    await settle();
    clock.advance(100);
    assert.equal(await c1, 'deadline_exceeded');
    completeAll();
    assert.equal(await c0, 0);
    assert.equal(await chunk('s', 1), 'deadline_exceeded', 'the same answer, as the scheduler keeps it (not out of order)');
    const c2 = chunk('s', 2);
    await settle();
    completeAll();
    assert.equal(await c2, 2, 'the session goes on after the failed chunk');
  });
});
