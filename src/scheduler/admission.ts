/** Admission control (pure): a bounded queue per model; beyond it new requests get queue_full. */
export function canAdmit(queued: number, maxQueuedRequests: number): boolean {
  return queued < maxQueuedRequests;
}
