/** Public surface of the scheduler. */
export { createScheduler, PRIORITIES } from './scheduler.js';
export type { Priority, Scheduler, SchedulerDeps, SchedulerOptions, SchedulerStats, ModelStats, SubmitOptions } from './scheduler.js';
export type {
  BatchInput,
  BatchItemOutcome,
  Executor,
  InstanceView,
  ModelAvailability,
  Segment,
  TranscriptionRequest,
  TranscriptResult,
  Word,
} from './executor.js';
export type { BatchPolicy } from './dynamic-batcher.js';
