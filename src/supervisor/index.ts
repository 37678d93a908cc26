/** Public surface of the supervisor. */
export { createSupervisor } from './supervisor.js';
export type {
  Supervisor,
  SupervisorDeps,
  SupervisorOptions,
  SupervisorStats,
  InstanceSnapshot,
  GpuSnapshot,
  SupervisedModel,
} from './supervisor.js';
export type { ResourceLoad } from './instance-process.js';
export type { ModelState, WakeEnd } from './model-lifecycle.js';
export type { InstanceBoot } from './boot-report.js';
export { spawnInstance, runCommand } from './spawn.js';
export type { SpawnInstance, SpawnRequest, InstanceChild, CommandResult } from './spawn.js';
export type { InstanceState } from './instance-state.js';
export { decideRestart } from './restart-policy.js';
export { createMpsController } from './mps.js';
export type { MpsController, MpsOptions } from './mps.js';
export { detectGpus } from './gpu-detect.js';
export { placeInstances, checkPlacement } from './placement.js';
export type { Placement, PlacementRequest } from './placement.js';
