/** Least-connections routing (pure): the ready instance with the fewest pending requests. */
import type { ResidentResource, ResourceResidency } from '../protocol/work.js';

/** What an instance runs now (batch and sequence work together), kept by the scheduler. */
export interface InstanceLoad {
  runningBatches: number;
  runningRequests: number;
}

export interface RouteCandidate extends InstanceLoad {
  instanceId: string;
}

export function selectInstance(candidates: readonly RouteCandidate[], maxRunningBatchesPerInstance: number): RouteCandidate | undefined {
  let best: RouteCandidate | undefined;
  for (const c of candidates) {
    if (c.runningBatches >= maxRunningBatchesPerInstance) continue;
    if (best === undefined || c.runningRequests < best.runningRequests) best = c;
  }
  return best;
}

export interface StreamRouteCandidate {
  instanceId: string;
  runningStreams: number;
  resources: readonly ResidentResource[];
}

const RESIDENCY_RANK: Readonly<Record<ResourceResidency, number>> = { device: 0, host: 1 };

/**
 * Stream routing (pure). An instance where the stream's resource is resident is preferred (held
 * on the device before held on the host), the fewest running streams among those; otherwise the
 * instance with the fewest running streams. Instances at maxStreamsPerInstance are skipped;
 * undefined when every instance is full (the stream waits).
 */
export function selectStreamInstance(
  candidates: readonly StreamRouteCandidate[],
  options: { resource: string | undefined; maxStreamsPerInstance: number },
): StreamRouteCandidate | undefined {
  let best: StreamRouteCandidate | undefined;
  let bestRank = Infinity;
  for (const c of candidates) {
    if (c.runningStreams >= options.maxStreamsPerInstance) continue;
    const held = options.resource === undefined ? undefined : c.resources.find((r) => r.name === options.resource);
    // Ranks: 0 resident on the device, 1 resident on the host, 2 not resident.
    const rank = held === undefined ? 2 : RESIDENCY_RANK[held.residency];
    if (best === undefined || rank < bestRank || (rank === bestRank && c.runningStreams < best.runningStreams)) {
      best = c;
      bestRank = rank;
    }
  }
  return best;
}
