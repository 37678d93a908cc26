/** Options and collaborators of the gateway, wired in app/build-server.ts. */
import type { Clock } from '../core/clock.js';
import type {
  StreamCall,
  StreamOpenInput,
  StreamOptions,
  TranscriptionRequest,
  TranscriptResult,
  SubmitOptions,
} from '../scheduler/index.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { AudioDecoder } from './audio/index.js';
import type { VoiceActivityDetector } from './pieces/voice-activity.js';

export interface GatewayOptions {
  maxBodyBytes: number;
  requestTimeoutMs: number;
  /** Longest deadline a call may ask for with the voxmux-deadline-ms header, in milliseconds. @default 600000 */
  maxRequestTimeoutMs?: number;
  /** Memory kept for reuse by uploaded files (see upload-pool.ts); 0 turns the pool off. */
  uploadPoolBytes: number;
  /** How long the pool keeps its memory with no upload taking any, in milliseconds (then it frees all of it). */
  uploadPoolIdleMs: number;
  /** Longest time from a call's arrival until its whole body is received, in milliseconds: body_timeout (408) after it. */
  bodyTimeoutMs: number;
  apiKeys: readonly string[];
  /** Audio longer than this is cut into pieces, in milliseconds (0: never). */
  splitAboveMs: number;
  /** Length a piece aims at, in milliseconds. */
  pieceTargetMs: number;
  /** Longest piece, in milliseconds: the scheduler's largest length bucket. */
  maxPieceMs: number;
  /** ffmpeg binary that encodes speech as mp3, opus, aac and flac. @default 'ffmpeg' */
  ffmpegPath?: string;
}

/** What a model serves: POST /v1/audio/transcriptions or POST /v1/audio/speech. */
export type ModelTask = 'transcription' | 'speech';

/** A speech model's voice settings. */
export interface SpeechModelSettings {
  /** Voice names clients may use (OpenAI's alloy...) mapped to engine voice ids. */
  voiceAliases: Readonly<Record<string, string>>;
  /** The engine holds each voice as a resource: its streams name their voice, so routing prefers instances holding it. */
  hasVoiceResources: boolean;
}

/**
 * One voice a model's instances declared (the protocol's CatalogEntry: name, kind, language,
 * sample rate, gender, description).
 */
export interface VoiceCatalogEntry {
  name: string;
  kind: string;
  language: string;
  sampleRate: number;
  gender: string | null;
  description: string;
}

/**
 * The voices of a model (its canonical name): the union over its instances that loaded; empty
 * when none has, or when its engine declares none.
 */
export type VoiceCatalog = (model: string) => readonly VoiceCatalogEntry[];

export interface ModelEntry {
  id: string;
  created: number;
  ownedBy: string;
  /**
   * The languages the model recognises (ISO-639-1 codes). A call that asks for another gets 400
   * unsupported_option; one that asks for none gets the model's only language, marked as assumed
   * in verbose_json. Absent where the adapter does not declare them (the engine decides).
   */
  languages?: readonly string[];
  /** @default 'transcription' */
  task?: ModelTask;
  /** Present for speech models. */
  speech?: SpeechModelSettings;
}

export interface ModelCatalog {
  list(): readonly ModelEntry[];
  /** Canonical model name for a name or alias; undefined when unknown. */
  resolve(name: string): string | undefined;
}

export interface ReadinessSnapshot {
  isReady: boolean;
  body: Record<string, unknown>;
}

export interface GatewayDeps {
  transcribe(model: string, request: TranscriptionRequest, options: SubmitOptions): Promise<TranscriptResult>;
  /**
   * Opens a speech synthesis stream (the scheduler's openStream).
   * @throws through the call: model_not_found, queue_full, no_ready_instance, deadline_exceeded,
   *   client_disconnected, shutting_down, and the instance's errors
   */
  openStream(model: string, input: StreamOpenInput, options: StreamOptions): StreamCall;
  /** The voices of each speech model, beyond its aliases. */
  voices: VoiceCatalog;
  models: ModelCatalog;
  readiness(): ReadinessSnapshot;
  metricsText(): Promise<string>;
  metricsContentType: string;
  decoder: AudioDecoder;
  /** Finds the pauses of recordings longer than splitAboveMs. */
  voiceActivity: VoiceActivityDetector;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /**
   * Whether the server is draining (it closes once pending requests finish): every call but
   * /health/live and /metrics then gets 503 shutting_down with Retry-After while the listener is
   * still open. @default never
   */
  isDraining?: () => boolean;
}
