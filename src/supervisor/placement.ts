/**
 * Instance placement (pure): which GPU each instance of a model runs on, its MPS share, and its
 * share of the node's CPU threads. Instances go round-robin over the model's GPUs, so load spreads
 * evenly and a GPU's loss takes only its own instances out of rotation.
 */
export interface PlacementRequest {
  /** Total instances, used when instancesPerGpu is 0 or there are no GPUs. */
  instances: number;
  /** Instances on each GPU; 0 means `instances` in all. */
  instancesPerGpu: number;
  /** GPUs the model asks for; empty means every GPU of the node. Ignored on a node without GPUs. */
  gpus: readonly number[];
  /** CUDA_MPS_ACTIVE_THREAD_PERCENTAGE by an instance's index on its GPU (cycled); empty: unset. */
  mpsActiveThreadPercentages: readonly number[];
}

export interface Placement {
  /** Undefined on a node without GPUs: the instance is not pinned. */
  gpu: number | undefined;
  mpsActiveThreadPercentage: number | undefined;
}

/**
 * One placement per instance: the model's instance count is the length of this list, and every
 * other count (readiness, the ready line, autoscaling) reads the supervisor's slots made from it.
 * A node without GPUs runs `instances` unpinned, whatever the model's gpus and instancesPerGpu say
 * (checkPlacement accepts them there, so that one config serves GPU and CPU nodes): pinning them
 * would set CUDA_VISIBLE_DEVICES to a GPU the node does not have, and the budget would count it held.
 */
export function placeInstances(request: PlacementRequest, nodeGpus: readonly number[]): Placement[] {
  const gpus = nodeGpus.length === 0 ? [] : request.gpus.length > 0 ? request.gpus : nodeGpus;
  const count = request.instancesPerGpu > 0 && gpus.length > 0 ? request.instancesPerGpu * gpus.length : request.instances;
  const out: Placement[] = [];
  for (let i = 0; i < count; i++) {
    const gpu = gpus.length > 0 ? gpus[i % gpus.length] : undefined;
    const local = gpus.length > 0 ? Math.floor(i / gpus.length) : i;
    const shares = request.mpsActiveThreadPercentages;
    out.push({ gpu, mpsActiveThreadPercentage: shares.length > 0 ? shares[local % shares.length] : undefined });
  }
  return out;
}

/** Problems with a model's GPU list against the node's GPUs, for startup errors. */
export function checkPlacement(model: string, request: PlacementRequest, nodeGpus: readonly number[]): string[] {
  if (nodeGpus.length === 0) return [];
  return request.gpus
    .filter((g) => !nodeGpus.includes(g))
    .map((g) => `models.${model}.gpus: GPU ${g} is not one of this node's GPUs (${nodeGpus.join(', ')})`);
}

/**
 * Adapters whose host work between GPU launches is many small tensor operations on the CPU, which
 * more intra-op threads only slow: their GPU-pinned instances get at most this many threads by
 * default. Sortformer's cache updates per session chunk took about 0.5 ms with 1 thread against 2.9 ms
 * with 16 (one instance) and up to 50 ms with 8 each (two instances), and 5,000 real-time sessions on
 * two instances went from p95 17.3 s to 0.44 s (bench/results/diarize-h100-2026-12-05/).
 */
export const GPU_INSTANCE_THREAD_CAPS: Readonly<Record<string, number>> = { sortformer: 1 };

/**
 * An instance's intra-op CPU threads (OMP_NUM_THREADS and the BLAS libraries' like it), or undefined
 * to leave the libraries' default of one thread per core. `configured` > 0 is taken as it is. By
 * default the instances pinned to GPUs share the node's cores evenly (at least one thread each, at
 * most the adapter's `cap`, GPU_INSTANCE_THREAD_CAPS): PyTorch otherwise starts a pool of one thread
 * per core in every process, and nine such processes on 16 cores spin against each other in the
 * small CPU-side steps between GPU launches. Instances of a node without GPUs keep the default (one
 * CPU engine may use every core).
 */
export function cpuThreadsFor(
  configured: number,
  isPinned: boolean,
  pinnedInstances: number,
  cpuCount: number,
  cap = Number.POSITIVE_INFINITY,
): number | undefined {
  if (configured > 0) return configured;
  if (!isPinned || pinnedInstances <= 0) return undefined;
  return Math.max(1, Math.min(cap, Math.floor(cpuCount / pinnedInstances)));
}
