/**
 * The vocabulary of inference that several layers share: a transcription request, a batch, its
 * outcomes, and how available a model's instances are. Types only.
 */
import type { ServiceError } from './errors.js';

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
  /** 16 kHz mono 16-bit PCM. On rejection the caller still owns the buffer. */
  audio: Int16Array;
  language: string | null;
  prompt: string | null;
  wordTimestamps: boolean;
}

export interface BatchInput {
  batchId: string;
  requests: readonly (TranscriptionRequest & { requestId: string })[];
}

export type BatchItemOutcome =
  { requestId: string; ok: true; result: TranscriptResult } | { requestId: string; ok: false; error: ServiceError };

export interface InstanceView {
  instanceId: string;
}

/** 'starting' means instances exist that are not ready yet (spawning, loading, restarting). */
export type ModelAvailability = 'ready' | 'starting' | 'unavailable';
