/**
 * The dynamic batching decision (pure). Requests are grouped by audio-length bucket so a short
 * clip is never padded to a long one. The oldest request of the highest priority leads; its bucket's
 * requests fill the batch in priority-then-age order.
 *
 * Dispatch when the batch reaches maxBatchSize or the largest preferred size it can reach, or when
 * its oldest request has waited maxQueueDelayMs, or (with dispatchWhenIdle) when an instance has
 * nothing running; otherwise wait until the delay is over.
 *
 * An isolated item (one retried after its batch's instance crashed or wedged) runs alone, at once
 * when it leads: if it is what killed the instance, it cannot take a batch down with it again.
 */
export interface QueuedItem {
  bucket: number;
  priority: number;
  enqueuedMs: number;
  isolated?: boolean;
}

export interface BatchPolicy {
  maxBatchSize: number;
  /** Sorted ascending. */
  preferredBatchSizes: readonly number[];
  maxQueueDelayMs: number;
  /** Waiting for a fuller batch is pointless while an instance idles: dispatch at once then. */
  dispatchWhenIdle?: boolean;
}

export type BatchDecision<T> = { kind: 'dispatch'; items: T[] } | { kind: 'wait'; untilMs: number } | { kind: 'idle' };

/**
 * `queued` must be ordered by priority (0 first), then by arrival. `hasIdleInstance`: an instance
 * of the model is ready and has no batch running.
 */
export function decideBatch<T extends QueuedItem>(
  queued: readonly T[],
  policy: BatchPolicy,
  nowMs: number,
  hasIdleInstance = false,
): BatchDecision<T> {
  const leader = queued[0];
  if (leader === undefined) return { kind: 'idle' };
  if (leader.isolated === true) return { kind: 'dispatch', items: [leader] };
  const sameBucket: T[] = [];
  for (const item of queued) {
    if (item.bucket === leader.bucket && item.isolated !== true) sameBucket.push(item);
    if (sameBucket.length === policy.maxBatchSize) break;
  }
  if (sameBucket.length >= policy.maxBatchSize) return { kind: 'dispatch', items: sameBucket };
  // The batch is due when its oldest member has waited maxQueueDelayMs. That is usually the
  // leader, but a later high-priority leader must not hold back an older request it joins.
  let oldestMs = leader.enqueuedMs;
  for (const item of sameBucket) oldestMs = Math.min(oldestMs, item.enqueuedMs);
  const dueMs = oldestMs + policy.maxQueueDelayMs;
  if (nowMs >= dueMs || (policy.dispatchWhenIdle === true && hasIdleInstance)) return { kind: 'dispatch', items: sameBucket };
  // A preferred size reached early is dispatched at once (Triton's preferred_batch_size).
  const largestPreferred = [...policy.preferredBatchSizes].reverse().find((s) => s <= sameBucket.length);
  if (largestPreferred !== undefined) {
    return { kind: 'dispatch', items: sameBucket.slice(0, largestPreferred) };
  }
  return { kind: 'wait', untilMs: dueMs };
}

/** Index of the first bucket bound the duration fits in; past the last bound, one overflow bucket. */
export function bucketOf(durationMs: number, boundsMs: readonly number[]): number {
  const i = boundsMs.findIndex((bound) => durationMs <= bound);
  return i === -1 ? boundsMs.length : i;
}
