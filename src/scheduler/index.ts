/** Public surface of the scheduler. */
export { createScheduler, PRIORITIES } from './scheduler.js';
export type { Priority, Scheduler, SchedulerDeps, SchedulerOptions, SchedulerStats, ModelStats, SubmitOptions } from './scheduler.js';
export type {
  BatchInput,
  BatchItemOutcome,
  Executor,
  InstanceView,
  ModelAvailability,
  ResidentResource,
  SequenceBatchInput,
  SequenceItemInput,
  SequenceItemOutcome,
  SequenceStateIn,
  Segment,
  StreamChunk,
  StreamControl,
  StreamEnd,
  StreamInput,
  StreamSink,
  TranscriptionRequest,
  TranscriptResult,
  Word,
} from './executor.js';
export type { BatchPolicy } from './dynamic-batcher.js';
