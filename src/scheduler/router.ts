/** Least-connections routing (pure): the ready instance with the fewest pending requests. */
export interface RouteCandidate {
  instanceId: string;
  runningBatches: number;
  runningRequests: number;
}

export function selectInstance(candidates: readonly RouteCandidate[], maxRunningBatchesPerInstance: number): RouteCandidate | undefined {
  let best: RouteCandidate | undefined;
  for (const c of candidates) {
    if (c.runningBatches >= maxRunningBatchesPerInstance) continue;
    if (best === undefined || c.runningRequests < best.runningRequests) best = c;
  }
  return best;
}
