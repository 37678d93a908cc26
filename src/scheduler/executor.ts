/**
 * The port the scheduler needs to run batches. The supervisor satisfies it structurally;
 * tests use a FakeExecutor. The scheduler never imports the supervisor.
 */
import type { ServiceError } from '../core/errors.js';

export interface Word {
  word: string;
  start: number;
  end: number;
}

export interface Segment {
  start: number;
  end: number;
  text: string;
}

/** What a transcription request returns; times in seconds. */
export interface TranscriptResult {
  text: string;
  language: string;
  durationS: number;
  segments: readonly Segment[] | null;
  words: readonly Word[] | null;
}

export interface TranscriptionRequest {
  /** 16 kHz mono float32. On rejection the caller still owns the buffer. */
  audio: Float32Array;
  language: string | null;
  prompt: string | null;
  wordTimestamps: boolean;
}

export interface BatchInput {
  batchId: string;
  requests: readonly (TranscriptionRequest & { requestId: string })[];
}

export type BatchItemOutcome =
  | { requestId: string; ok: true; result: TranscriptResult }
  | { requestId: string; ok: false; error: ServiceError };

export interface InstanceView {
  instanceId: string;
}

/** 'starting' means instances exist that are not ready yet (spawning, loading, restarting). */
export type ModelAvailability = 'ready' | 'starting' | 'unavailable';

export interface Executor {
  /** Instances of the model that accept batches now. */
  readyInstances(model: string): readonly InstanceView[];
  availability(model: string): ModelAvailability;
  /**
   * Runs one batch on one instance. Resolves with one outcome per request, in order.
   * @throws instance_crashed, instance_wedged when the whole batch is lost with its instance.
   */
  runBatch(instanceId: string, batch: BatchInput): Promise<BatchItemOutcome[]>;
  /** Called whenever an instance becomes ready or leaves the ready set. */
  onInstancesChanged(listener: () => void): () => void;
}
