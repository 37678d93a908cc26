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

/**
 * What routing a stream to an instance that does not hold its resource on the device costs, in
 * running streams: a copy from host memory (milliseconds for a voice) weighs like two more streams
 * ahead of it, a load from disk (and an eviction) like eight. A holder that is busier than that
 * loses the stream to a less busy instance, so one popular voice does not pile onto one instance.
 */
const MISS_COST_STREAMS: Readonly<Record<ResourceResidency | 'none', number>> = { device: 0, host: 2, none: 8 };

/**
 * Stream routing (pure): the instance with the lowest cost, its running streams plus what bringing
 * the stream's resource onto its device costs (MISS_COST_STREAMS); on equal cost the one holding the
 * resource closer (device, then host, then not at all), then the one with the fewest resources on
 * its device (so that new voices spread over the instances' budgets), then the first. Without a
 * resource, the fewest running streams. Instances at maxStreamsPerInstance are skipped; undefined
 * when every instance is full (the stream waits).
 */
export function selectStreamInstance(
  candidates: readonly StreamRouteCandidate[],
  options: { resource: string | undefined; maxStreamsPerInstance: number },
): StreamRouteCandidate | undefined {
  let best: StreamRouteCandidate | undefined;
  let bestKey: readonly number[] = [];
  for (const c of candidates) {
    if (c.runningStreams >= options.maxStreamsPerInstance) continue;
    const held = options.resource === undefined ? undefined : c.resources.find((r) => r.name === options.resource);
    const miss = options.resource === undefined ? 0 : MISS_COST_STREAMS[held === undefined ? 'none' : held.residency];
    const onDevice = options.resource === undefined ? 0 : c.resources.filter((r) => r.residency === 'device').length;
    const key = [c.runningStreams + miss, miss, onDevice];
    if (best === undefined || isLess(key, bestKey)) {
      best = c;
      bestKey = key;
    }
  }
  return best;
}

/** Lexicographic a < b over keys of equal length. */
function isLess(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < a.length; i += 1) {
    if (a[i]! !== b[i]!) return a[i]! < b[i]!;
  }
  return false;
}
