/** Options and collaborators of the gateway, wired in app/build-server.ts. */
import type { RequestLogLine } from '../api/request-log.js';
import type { Clock } from '../core/clock.js';
import type { ServiceError } from '../core/errors.js';
import type {
  CatalogEntry,
  ResidentResource,
  SequenceItem,
  SequenceResult,
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
import type { DiarizationSessions } from './diarization/session-service.js';
import type { VoiceActivityDetector } from './pieces/voice-activity.js';
import type { RealtimeOptions } from './realtime/realtime-route.js';

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
  /** Encoded speech a call may hold ahead of a client that reads slower than it is made, in bytes. @default 16 MiB (routes/speech.ts) */
  speechBufferBytes?: number;
  /** Longest audio chunk a diarization session accepts, in milliseconds. @default 60000 */
  maxDiarizationChunkMs?: number;
  /** Realtime sessions (GET /v1/realtime) and the LLM admin endpoint; absent: not served. */
  realtime?: RealtimeOptions;
  /**
   * A gateway thread's: the main thread's address, where realtime calls and /admin/llm are passed
   * on (routes/forward.ts). Absent: this gateway serves them itself.
   */
  forwardTo?: string;
}

/** What a model serves: POST /v1/audio/transcriptions, POST /v1/audio/speech or POST /v1/audio/diarization. */
export type ModelTask = 'transcription' | 'speech' | 'diarization';

/** A diarization model's settings. */
export interface DiarizationModelSettings {
  /** Its engine uses the gateway's voice activity: each chunk carries its speech regions (the `speech` option). */
  wantsSpeechRegions: boolean;
  /** Idle time after which a session expires, in milliseconds (the model's sessionIdleTimeoutMs). */
  sessionIdleTimeoutMs: number;
  /**
   * The longest item its engine takes, in milliseconds (its maxItemSeconds); absent: any length. A
   * whole recording longer than this is diarized as a session of items no longer than it.
   */
  maxItemMs?: number;
  /** The most speakers its engine finds; absent: unknown. A larger min_speakers is refused. */
  maxSpeakers?: number;
}

/** A speech model's voice settings. */
export interface SpeechModelSettings {
  /** Voice names clients may use (OpenAI's alloy...) mapped to engine voice ids. */
  voiceAliases: Readonly<Record<string, string>>;
  /**
   * Voice names mapped, in order, onto the voices the model's instances declared, in catalogue
   * order, starting again from the first voice when there are fewer voices than names (vits'
   * defaults: the 13 OpenAI names). A name in voiceAliases takes its voice from there instead.
   * @default []
   */
  catalogVoiceAliases?: readonly string[];
  /** The engine holds each voice as a resource: its streams name their voice, so routing prefers instances holding it. */
  hasVoiceResources: boolean;
}

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
  /** The model also translates speech into English text (POST /v1/audio/translations). @default false */
  translates?: boolean;
  /** Present for speech models. */
  speech?: SpeechModelSettings;
  /** Present for diarization models. */
  diarization?: DiarizationModelSettings;
  /** Transcription models: the diarization model that finds the speakers of diarized_json, if any. */
  diarizationModel?: string;
}

export interface ModelCatalog {
  list(): readonly ModelEntry[];
  /** Canonical model name for a name or alias; undefined when unknown. */
  resolve(name: string): string | undefined;
}

/** A model whose voices GET /v1/audio/voices lists. */
export interface VoiceModel {
  /** Canonical model name. */
  model: string;
  /** The model's adapter, reported as each voice's engine. */
  engine: string;
  /** OpenAI voice name → engine voice id, where the model has such a table. */
  voiceAliases?: Readonly<Record<string, string>>;
  /** Names mapped onto the model's catalogue voices, cycling (SpeechModelSettings.catalogVoiceAliases). @default [] */
  catalogVoiceAliases?: readonly string[];
}

/** What GET /v1/audio/voices reads (wired in app/ from the config, the scheduler and the supervisor). */
export interface VoiceDirectory {
  /** The models to list, in order; a model whose catalogue is empty lists no voice. */
  models(): readonly VoiceModel[];
  /** The model's catalogue: what its instances declared when they loaded. */
  catalog(model: string): readonly CatalogEntry[];
  /** The model's ready instances and the resources each holds now. */
  residency(model: string): readonly { instanceId: string; resources: readonly ResidentResource[] }[];
}

/**
 * A model's lifecycle state: stopped (no instance runs), starting (none ready yet, or every instance
 * in a crash loop), ready (an instance became ready; instances supervised) or stopping.
 */
export type ModelLifecycleState = 'stopped' | 'starting' | 'ready' | 'stopping';

/**
 * Starts and stops models (POST /v1/models/{id}/wake and /sleep). A wake's or a sleep's answer
 * comes from the lifecycle's owner, the main thread (createModelLifecycleControl): in a gateway
 * thread the call goes there, never to the state last pushed to the thread.
 */
export interface ModelLifecycleControl {
  /** The model's state (in a gateway thread, as the main thread last pushed it: up to 250 ms old). */
  state(model: string): ModelLifecycleState;
  /**
   * Wakes a stopped model (idempotent). Resolves with its state right after the call (starting or
   * ready) or, with `isWaiting`, once the wake ends (ready).
   * @throws gpu_budget_exhausted (a refused wake); with `isWaiting` also model_wake_failed,
   *   model_wake_timeout and shutting_down
   */
  wake(model: string, options: { isWaiting: boolean }): Promise<ModelLifecycleState>;
  /**
   * Stops a model (idempotent). Resolves with its state right after the call (stopping, or stopped)
   * or, with `isWaiting`, once stopped (or woken again for work queued for it).
   */
  sleep(model: string, options: { isWaiting: boolean }): Promise<ModelLifecycleState>;
}

/** How a wake ended, as the lifecycle's owner reports it: ready, or the error saying why not. */
export type ModelWakeEnd = { isReady: true } | { isReady: false; error: ServiceError };

/** The lifecycle's owner (the supervisor, wired in app/): what createModelLifecycleControl answers from. */
export interface ModelLifecycleOwner {
  state(model: string): ModelLifecycleState;
  /** Why the model cannot serve (a failed or refused wake); undefined otherwise. */
  whyUnavailable(model: string): ServiceError | undefined;
  /** Wakes a stopped model; resolves (never rejects) once the wake ends. */
  wake(model: string): Promise<ModelWakeEnd>;
  /** Stops a model; resolves once stopped. */
  sleep(model: string): Promise<void>;
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
  /**
   * Sequence work (the scheduler's submitSequenceItem and endSession): diarization sessions.
   * Absent: no model serves diarization.
   */
  sequences?: {
    /** @throws session_not_found, session_expired, sequence_gap, sequence_out_of_order, queue_full, and the instance's errors */
    submit(model: string, item: SequenceItem, options: SubmitOptions): Promise<SequenceResult>;
    end(model: string, sessionId: string): Promise<void>;
  };
  /**
   * Diarization sessions (diarization/session-service.ts): the main thread's service, or a gateway
   * thread's proxy to it. Absent: the gateway builds its own from `sequences`.
   */
  diarizationSessions?: DiarizationSessions;
  models: ModelCatalog;
  /**
   * The voices of the speech models: GET /v1/audio/voices lists them, and the speech route accepts
   * a model's catalogue voices besides its voiceAliases.
   */
  voices: VoiceDirectory;
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
  /** Where finished transcription and speech calls are recorded (requestLog in the config); absent: not recorded. */
  requestLog?: { write(line: RequestLogLine): void };
  /**
   * Gives idle memory back to the system (a garbage collection, then the C heap's free pages);
   * called when the upload pool lets go of its memory after gateway.uploadPoolIdleMs without
   * uploads. `isServing`: calls (a realtime call, a speech stream) are still in progress, so only
   * what costs them no pause is done. Absent: nothing more is given back.
   */
  releaseIdleMemory?: (p: { isServing: boolean }) => void;
  /** The GPU index of an instance; undefined for a CPU instance or one no longer known. */
  instanceGpu?: (instanceId: string) => number | undefined;
  /** Model lifecycle (wake and sleep routes, each model's state in /v1/models); absent: every model shows ready. */
  lifecycle?: ModelLifecycleControl;
}
