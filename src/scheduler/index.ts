/** Public surface of the scheduler. */
export {
  createScheduler,
  DEFAULT_MAX_STREAMS_PER_INSTANCE,
  DEFAULT_SESSION_IDLE_TIMEOUT_MS,
  DEFAULT_STREAM_CREDIT_CHUNKS,
  PRIORITIES,
} from './scheduler.js';
export type {
  ModelPolicy,
  ModelStats,
  Priority,
  Scheduler,
  SchedulerDeps,
  SchedulerOptions,
  SchedulerStats,
  StreamOptions,
  SubmitOptions,
} from './scheduler.js';
export { SEQUENCE_NOT_TAKEN_CODES } from './sequence-batcher/sequence-batcher.js';
export type { SequenceItem, SequenceResult } from './sequence-batcher/sequence-batcher.js';
export { StreamCallImpl } from './stream-call.js';
export { SEEK_FRAMES_PER_SECOND } from '../protocol/work.js';
export type { StreamCall, StreamSummary } from './stream-call.js';
export type { Dispatch, StreamOpenInput } from './stream-dispatcher.js';
export type { Executor } from './executor.js';
export type {
  BatchInput,
  BatchItemOutcome,
  CatalogEntry,
  InstanceView,
  ModelAvailability,
  ResidentResource,
  SequenceBatchInput,
  SequenceItemInput,
  SequenceItemOutcome,
  SequenceStateIn,
  Segment,
  SegmentDecoding,
  StreamChunk,
  StreamControl,
  StreamEnd,
  StreamInput,
  StreamSink,
  TranscriptionRequest,
  TranscriptionTask,
  TranscriptResult,
  Word,
} from '../protocol/work.js';
export type { BatchPolicy } from './dynamic-batcher.js';
