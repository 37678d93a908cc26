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
  /** GPUs the model asks for; empty means every GPU of the node. */
  gpus: readonly number[];
  /** CUDA_MPS_ACTIVE_THREAD_PERCENTAGE by an instance's index on its GPU (cycled); empty: unset. */
  mpsActiveThreadPercentages: readonly number[];
}

export interface Placement {
  /** Undefined on a node without GPUs: the instance is not pinned. */
  gpu: number | undefined;
  mpsActiveThreadPercentage: number | undefined;
}

export function placeInstances(request: PlacementRequest, nodeGpus: readonly number[]): Placement[] {
  const gpus = request.gpus.length > 0 ? request.gpus : nodeGpus;
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
 * An instance's intra-op CPU threads (OMP_NUM_THREADS and the BLAS libraries' like it), or undefined
 * to leave the libraries' default of one thread per core. `configured` > 0 is taken as it is. By
 * default the instances pinned to GPUs share the node's cores evenly (at least one thread each):
 * PyTorch otherwise starts a pool of one thread per core in every process, and nine such processes
 * on 16 cores spin against each other in the small CPU-side steps between GPU launches. Instances
 * of a node without GPUs keep the default (one CPU engine may use every core).
 */
export function cpuThreadsFor(configured: number, isPinned: boolean, pinnedInstances: number, cpuCount: number): number | undefined {
  if (configured > 0) return configured;
  if (!isPinned || pinnedInstances <= 0) return undefined;
  return Math.max(1, Math.floor(cpuCount / pinnedInstances));
}
