/**
 * Instance placement (pure): which GPU each instance of a model runs on, and its MPS share.
 * Instances go round-robin over the model's GPUs, so load spreads evenly and a GPU's loss takes
 * only its own instances out of rotation.
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
