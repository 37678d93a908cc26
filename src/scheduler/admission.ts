/**
 * Admission control (pure). Two limits guard a model's queue:
 * - a bound on its length (maxQueuedRequests): beyond it, queue_full;
 * - a prediction of when a new request would finish: a request the queue ahead of it cannot let
 *   finish within its deadline (less a margin) is refused at once with deadline_unreachable,
 *   instead of being accepted and failed with deadline_exceeded later.
 *
 * The prediction replays the batcher on the work ahead: the requests queued ahead of the new one
 * (those of its priority or higher: lower priorities never hold it back) are grouped into
 * batches of one length bucket and at most maxBatchSize, in the order of their first request;
 * each batch goes to the ready instance that frees up first, and takes the learnt service time
 * (service-time.ts). The new request finishes with the batch it joins.
 */
import { batchMs, type ServiceTimeModel } from './service-time.js';

export function canAdmit(queued: number, maxQueuedRequests: number): boolean {
  return queued < maxQueuedRequests;
}

/** A request, as far as the prediction needs it. */
export interface AdmissionItem {
  bucket: number;
  audioS: number;
  /** A retried request: it runs in a batch of its own (dynamic-batcher.ts). */
  isolated?: boolean;
}

export interface AdmissionSnapshot {
  /** The requests queued ahead of the new one (its priority or higher), in queue order. */
  ahead: readonly AdmissionItem[];
  /** The new request, and its time left to its deadline in milliseconds. */
  request: AdmissionItem & { timeoutMs: number };
  /**
   * When each ready instance of the model finishes the batch work it runs now (absolute
   * milliseconds; nowMs or earlier for an idle one). At least one entry.
   */
  instanceFreeAtMs: readonly number[];
  /**
   * Whether a ready instance runs no batch now. An instance whose batch runs past its predicted
   * end reads free now in instanceFreeAtMs, but is not idle: a request there waits for it.
   * Absent: an instance free by instanceFreeAtMs counts as idle.
   */
  hasIdleInstance?: boolean;
  service: ServiceTimeModel;
  maxBatchSize: number;
  /** A batch short of maxBatchSize waits this long for more requests, in milliseconds... */
  maxQueueDelayMs: number;
  /** ... unless an instance is idle and the model dispatches to idle instances at once. @default false */
  dispatchWhenIdle?: boolean;
  /** Share of the deadline kept in reserve for what the prediction cannot see, in percent. */
  marginPercent: number;
}

export type AdmissionDecision =
  | { kind: 'admit'; predictedDoneMs: number }
  /** `drainMs`: when the work ahead of the request is predicted to be done, from nowMs. */
  | { kind: 'reject'; predictedDoneMs: number; drainMs: number };

interface PlannedBatch {
  bucket: number;
  size: number;
  audioS: number;
  /** Whether the new request is in it. */
  hasRequest: boolean;
}

/**
 * Admits or refuses one batch request. A request with nothing queued ahead of it and an idle
 * instance is always admitted: it would run at once, so no later retry could do better, and a
 * service time longer than its deadline is then the deadline's problem (deadline_exceeded).
 */
export function decideAdmission(snapshot: AdmissionSnapshot, nowMs: number): AdmissionDecision {
  const freeAt = snapshot.instanceFreeAtMs.length > 0 ? snapshot.instanceFreeAtMs.map((t) => Math.max(t, nowMs)) : [nowMs];
  const withRequest = planBatches([...snapshot.ahead, snapshot.request], snapshot.maxBatchSize, snapshot.ahead.length);
  const ownIndex = withRequest.findIndex((b) => b.hasRequest);
  const predictedDoneMs = replay(withRequest.slice(0, ownIndex + 1), [...freeAt], snapshot, nowMs).lastDoneMs;
  const canRunAtOnce = snapshot.ahead.length === 0 && (snapshot.hasIdleInstance ?? freeAt.some((t) => t <= nowMs));
  const budgetMs = (snapshot.request.timeoutMs * (100 - snapshot.marginPercent)) / 100;
  if (canRunAtOnce || predictedDoneMs - nowMs <= budgetMs) return { kind: 'admit', predictedDoneMs };
  const drainDoneMs = replay(planBatches(snapshot.ahead, snapshot.maxBatchSize, -1), [...freeAt], snapshot, nowMs).allDoneMs;
  return { kind: 'reject', predictedDoneMs, drainMs: Math.max(0, drainDoneMs - nowMs) };
}

/** Groups requests into batches of one bucket, ordered by their first request; an isolated one is a batch alone. */
function planBatches(items: readonly AdmissionItem[], maxBatchSize: number, requestIndex: number): PlannedBatch[] {
  const batches: PlannedBatch[] = [];
  const open = new Map<number, PlannedBatch>();
  items.forEach((item, i) => {
    if (item.isolated === true) {
      batches.push({ bucket: item.bucket, size: 1, audioS: item.audioS, hasRequest: i === requestIndex });
      return;
    }
    let batch = open.get(item.bucket);
    if (batch === undefined || batch.size >= maxBatchSize) {
      batch = { bucket: item.bucket, size: 0, audioS: 0, hasRequest: false };
      batches.push(batch);
      open.set(item.bucket, batch);
    }
    batch.size += 1;
    batch.audioS += item.audioS;
    if (i === requestIndex) batch.hasRequest = true;
  });
  return batches;
}

/** Runs batches in order on the instance that frees up first; returns when the last and all end. */
function replay(
  batches: readonly PlannedBatch[],
  freeAt: number[],
  snapshot: AdmissionSnapshot,
  nowMs: number,
): { lastDoneMs: number; allDoneMs: number } {
  let lastDoneMs = nowMs;
  for (const batch of batches) {
    let i = 0;
    for (let j = 1; j < freeAt.length; j++) if (freeAt[j]! < freeAt[i]!) i = j;
    // A batch short of maxBatchSize that meets an idle instance still waits for more requests,
    // unless the model dispatches to an idle instance at once.
    const shouldWaitForMore = batch.size < snapshot.maxBatchSize && snapshot.dispatchWhenIdle !== true;
    const startMs = Math.max(freeAt[i]!, shouldWaitForMore ? nowMs + snapshot.maxQueueDelayMs : nowMs);
    lastDoneMs = startMs + batchMs(snapshot.service, batch.audioS);
    freeAt[i] = lastDoneMs;
  }
  return { lastDoneMs, allDoneMs: Math.max(nowMs, ...freeAt) };
}
