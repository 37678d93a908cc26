import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bucketOf, decideBatch, type BatchDecision, type BatchPolicy, type QueuedItem } from './dynamic-batcher.js';

interface Item extends QueuedItem {
  id: string;
}

const NORMAL = 1;
const HIGH = 0;

/** A queued item; `queue` must list items by priority, then arrival, as the scheduler keeps them. */
const item = (id: string, enqueuedMs: number, options: { bucket?: number; priority?: number; isolated?: boolean } = {}): Item => ({
  id,
  enqueuedMs,
  bucket: options.bucket ?? 0,
  priority: options.priority ?? NORMAL,
  ...(options.isolated === undefined ? {} : { isolated: options.isolated }),
});

const policy = (overrides: Partial<BatchPolicy> = {}): BatchPolicy => ({
  maxBatchSize: 4,
  preferredBatchSizes: [4],
  maxQueueDelayMs: 10,
  ...overrides,
});

const ids = (decision: BatchDecision<Item>): string[] => {
  assert.equal(decision.kind, 'dispatch', JSON.stringify(decision));
  return decision.kind === 'dispatch' ? decision.items.map((i) => i.id) : [];
};

describe('decideBatch', () => {
  it('is idle when nothing is queued', () => {
    assert.deepEqual(decideBatch([], policy(), 0), { kind: 'idle' });
  });

  it('dispatches at once while an instance idles when dispatchWhenIdle is set, and only then', () => {
    const queue = [item('a', 100), item('b', 101)];
    assert.deepEqual(ids(decideBatch(queue, policy({ dispatchWhenIdle: true }), 101, true)), ['a', 'b']);
    assert.deepEqual(decideBatch(queue, policy({ dispatchWhenIdle: true }), 101, false), { kind: 'wait', untilMs: 110 });
    assert.deepEqual(decideBatch(queue, policy(), 101, true), { kind: 'wait', untilMs: 110 });
  });

  it('waits until the leader has waited maxQueueDelayMs, then dispatches the partial batch', () => {
    const queue = [item('a', 100), item('b', 103)];
    assert.deepEqual(decideBatch(queue, policy(), 100), { kind: 'wait', untilMs: 110 });
    assert.deepEqual(decideBatch(queue, policy(), 109), { kind: 'wait', untilMs: 110 });
    assert.deepEqual(ids(decideBatch(queue, policy(), 110)), ['a', 'b']);
    assert.deepEqual(ids(decideBatch(queue, policy(), 500)), ['a', 'b']);
  });

  it('dispatches at once when maxBatchSize is reached, taking no more than maxBatchSize', () => {
    const queue = ['a', 'b', 'c', 'd', 'e'].map((id, i) => item(id, i));
    assert.deepEqual(ids(decideBatch(queue, policy({ preferredBatchSizes: [] }), 4)), ['a', 'b', 'c', 'd']);
  });

  it('dispatches the largest preferred size reached before the delay, leaving the rest queued', () => {
    const p = policy({ maxBatchSize: 8, preferredBatchSizes: [2, 4] });
    const queue = (n: number) => Array.from({ length: n }, (_, i) => item(`r${i}`, i));
    assert.deepEqual(decideBatch(queue(1), p, 1), { kind: 'wait', untilMs: 10 });
    assert.deepEqual(ids(decideBatch(queue(2), p, 2)), ['r0', 'r1']);
    assert.deepEqual(ids(decideBatch(queue(3), p, 3)), ['r0', 'r1']);
    assert.deepEqual(ids(decideBatch(queue(5), p, 5)), ['r0', 'r1', 'r2', 'r3']);
    assert.deepEqual(ids(decideBatch(queue(7), p, 7)), ['r0', 'r1', 'r2', 'r3']);
    assert.equal(ids(decideBatch(queue(9), p, 9)).length, 8);
  });

  it('dispatches every request of the bucket up to maxBatchSize when the delay has passed, preferred size or not', () => {
    const p = policy({ maxBatchSize: 8, preferredBatchSizes: [2, 4] });
    const queue = ['a', 'b', 'c'].map((id, i) => item(id, i));
    assert.deepEqual(ids(decideBatch(queue, p, 10)), ['a', 'b', 'c']);
  });

  it("batches only the leader's bucket, in queue order, and waits on the leader", () => {
    const queue = [
      item('short1', 0, { bucket: 0 }),
      item('long1', 1, { bucket: 2 }),
      item('short2', 2, { bucket: 0 }),
      item('long2', 3, { bucket: 2 }),
    ];
    assert.deepEqual(decideBatch(queue, policy(), 5), { kind: 'wait', untilMs: 10 });
    assert.deepEqual(ids(decideBatch(queue, policy(), 10)), ['short1', 'short2']);
    assert.deepEqual(ids(decideBatch(queue.slice(0, 2), policy(), 10)), ['short1']);
  });

  it("fills a batch from the leader's bucket even when other buckets' requests sit between them", () => {
    const queue = [item('a', 0), item('x', 0, { bucket: 1 }), item('y', 0, { bucket: 1 }), item('b', 1), item('c', 1), item('d', 2)];
    assert.deepEqual(ids(decideBatch(queue, policy(), 2)), ['a', 'b', 'c', 'd']);
  });

  it('dispatches at once with maxQueueDelayMs 0', () => {
    const p = policy({ maxQueueDelayMs: 0 });
    assert.deepEqual(ids(decideBatch([item('a', 50)], p, 50)), ['a']);
    assert.deepEqual(ids(decideBatch([item('a', 50), item('b', 50)], p, 50)), ['a', 'b']);
  });

  it('lets a high-priority leader take the lower-priority requests of its bucket behind it', () => {
    const queue = [item('urgent', 5, { priority: HIGH }), item('normal', 0)];
    assert.deepEqual(ids(decideBatch(queue, policy({ maxBatchSize: 2, preferredBatchSizes: [2] }), 5)), ['urgent', 'normal']);
  });

  it('does not let a later high-priority leader delay an older request of its bucket past maxQueueDelayMs', () => {
    // 'normal' arrived at 0; 'urgent' arrived at 9 and leads. The batch is due at 10, not 19.
    const queue = [item('urgent', 9, { priority: HIGH }), item('normal', 0)];
    assert.deepEqual(decideBatch(queue, policy(), 9), { kind: 'wait', untilMs: 10 });
    assert.deepEqual(ids(decideBatch(queue, policy(), 10)), ['urgent', 'normal']);
  });

  it('dispatches an isolated leader alone and at once, and leaves isolated items out of other batches', () => {
    const queue = [item('retried', 0, { isolated: true }), item('a', 5), item('b', 6)];
    assert.deepEqual(ids(decideBatch(queue, policy(), 5)), ['retried']);
    const behind = [item('a', 5), item('retried', 0, { isolated: true }), item('b', 6), item('c', 7), item('d', 8)];
    assert.deepEqual(ids(decideBatch(behind, policy(), 8)), ['a', 'b', 'c', 'd']);
    assert.deepEqual(ids(decideBatch(behind.slice(1), policy(), 8)), ['retried']);
  });
});

describe('bucketOf', () => {
  const bounds = [5_000, 15_000, 30_000];

  it('returns the index of the first bound the duration fits in, bounds inclusive', () => {
    assert.equal(bucketOf(0, bounds), 0);
    assert.equal(bucketOf(4_999, bounds), 0);
    assert.equal(bucketOf(5_000, bounds), 0);
    assert.equal(bucketOf(5_001, bounds), 1);
    assert.equal(bucketOf(15_000, bounds), 1);
    assert.equal(bucketOf(29_999.5, bounds), 2);
    assert.equal(bucketOf(30_000, bounds), 2);
  });

  it('puts everything past the last bound in one overflow bucket', () => {
    assert.equal(bucketOf(30_001, bounds), 3);
    assert.equal(bucketOf(3_600_000, bounds), 3);
  });

  it('puts everything in bucket 0 when there are no bounds', () => {
    assert.equal(bucketOf(0, []), 0);
    assert.equal(bucketOf(1_000_000, []), 0);
  });
});
