/** Operations policies: pure decisions from snapshots of the running components. */
export { estimateCapacity } from './capacity.js';
export type { CapacityPolicy, LoadSample, ModelCapacity, ModelLoadSample } from './capacity.js';
