/**
 * The messages between the main thread (which owns the scheduler and the instances) and its
 * gateway threads (which serve HTTP on the same port): the one place their shapes are declared.
 *
 * A gateway thread turns each call into a request message with a `callId` of its own; the main
 * thread runs it through the same functions its own gateway uses and answers `settled` once, with
 * `dispatched` and, for speech streams, `streamChunk` messages before that. Audio crosses as a
 * transferred ArrayBuffer (no copy): the thread copies the request's samples into memory of its
 * own transfer pool, the main thread hands that memory back with a successful result.
 */
import type { PlainServiceError } from '../../core/errors.js';
import type { RequestLogLine } from '../../api/request-log.js';
import type { DiarizationSessions, ModelLifecycleState, ReadinessSnapshot } from '../../gateway/index.js';
import type { CatalogEntry, Dispatch, Priority, ResidentResource, StreamChunk } from '../../scheduler/index.js';
import type { Config } from '../../config/schema.js';

/** What a gateway thread starts with (its workerData). */
export interface GatewayThreadData {
  /** Marks the worker as a gateway thread for the entry point that starts it. */
  role: typeof GATEWAY_THREAD_ROLE;
  /** 1, 2, ...: the thread's name in logs and metrics is `gateway-<index>`. */
  index: number;
  config: Config;
  /** The catalogue's creation time (seconds), the same as the main thread's. */
  modelsCreatedS: number;
  /** The listening socket's file descriptor: a duplicate of the main thread's, the thread's own to close. */
  fd: number;
  /** Where the calls a thread passes on to the main thread go (realtime, /admin/llm). */
  ownerUrl: string;
  /** The main thread's state when the thread was started, so that its first answers (readiness) are right. */
  state: OwnerState;
}

export const GATEWAY_THREAD_ROLE = 'voxmux-gateway-thread';

/** SubmitOptions without the functions (the signal becomes a `cancel` message, onDispatched `dispatched` messages). */
export interface PlainSubmitOptions {
  priority?: Priority;
  timeoutMs: number;
  requestId?: string;
  admission?: 'predict' | 'queueLimitOnly';
}

/** 16 kHz 16-bit samples in transferred memory (its first `samples` values). */
export interface PlainAudio {
  memory: ArrayBuffer;
  samples: number;
}

export type ThreadRequest =
  | {
      type: 'transcribe';
      callId: number;
      model: string;
      audio: PlainAudio;
      request: {
        language: string | null;
        prompt: string | null;
        wordTimestamps: boolean;
        task?: 'transcribe' | 'translate';
        temperature?: number;
        piece?: boolean;
      };
      options: PlainSubmitOptions;
    }
  | {
      type: 'sequenceSubmit';
      callId: number;
      model: string;
      audio: PlainAudio;
      item: { sessionId: string; seq: number; isLast: boolean; options: Readonly<Record<string, unknown>> };
      options: PlainSubmitOptions;
    }
  | { type: 'sequenceEnd'; callId: number; model: string; sessionId: string }
  | {
      type: 'openStream';
      callId: number;
      model: string;
      input: { requestId?: string; resource: string | null; params: Readonly<Record<string, unknown>>; body: Uint8Array };
      options: { priority?: Priority; timeoutMs: number };
    }
  | { type: 'sessionCreate'; callId: number; params: Parameters<DiarizationSessions['create']>[0] }
  | { type: 'sessionModel' | 'sessionTimeline'; callId: number; id: string }
  | { type: 'sessionClose'; callId: number; id: string; options: PlainSubmitOptions }
  | {
      type: 'sessionChunk';
      callId: number;
      chunk: { id: string; seq: number; isLast: boolean; speech?: unknown };
      audio?: PlainAudio;
      options: PlainSubmitOptions;
    }
  | { type: 'wake' | 'sleep'; callId: number; model: string; isWaiting: boolean }
  | { type: 'metricsText'; callId: number };

/** The request types, checked complete by the compiler: what serve-thread.ts runs. */
const REQUEST_TYPES: Readonly<Record<ThreadRequest['type'], true>> = {
  transcribe: true,
  sequenceSubmit: true,
  sequenceEnd: true,
  sessionCreate: true,
  sessionModel: true,
  sessionTimeline: true,
  sessionClose: true,
  sessionChunk: true,
  openStream: true,
  wake: true,
  sleep: true,
  metricsText: true,
};

export function isThreadRequest(message: ThreadMessage): message is ThreadRequest {
  return Object.hasOwn(REQUEST_TYPES, message.type);
}

/** Thread → main thread. */
export type ThreadMessage =
  | ThreadRequest
  /** The thread's caller took a stream chunk: the main thread may send one more. */
  | { type: 'streamTake'; callId: number }
  /** The caller went away (its signal aborted) or cancelled the stream. */
  | { type: 'cancel'; callId: number }
  | { type: 'requestLog'; line: RequestLogLine }
  /** The answer to `collectMetrics`: the thread's registry as prom-client JSON. */
  | { type: 'metrics'; collectId: number; metrics: unknown[] }
  /**
   * The thread is about to listen on its descriptor: from here on the descriptor is its server's,
   * closed with it. A thread that ends before this leaves it to the main thread to close.
   */
  | { type: 'adopting' }
  /** The thread listens on the shared port. */
  | { type: 'listening' }
  /** The thread's server closed (after `close`). */
  | { type: 'closed' };

/** What the main thread tells every gateway thread of its state, pushed at an interval and on each change of draining. */
export interface OwnerState {
  readiness: ReadinessSnapshot;
  models: Readonly<Record<string, { state: ModelLifecycleState }>>;
  catalogs: Readonly<Record<string, readonly CatalogEntry[]>>;
  residency: Readonly<Record<string, readonly { instanceId: string; resources: readonly ResidentResource[] }[]>>;
  /** GPU index by instance id (CPU instances are absent). */
  instanceGpus: Readonly<Record<string, number>>;
  isDraining: boolean;
}

/** Main thread → thread. */
export type OwnerMessage =
  | { type: 'settled'; callId: number; ok: true; value: unknown; memory?: ArrayBuffer }
  | { type: 'settled'; callId: number; ok: false; error: PlainServiceError }
  | { type: 'dispatched'; callId: number; dispatch: Dispatch }
  | { type: 'streamChunk'; callId: number; chunk: StreamChunk }
  | { type: 'state'; state: OwnerState }
  | { type: 'collectMetrics'; collectId: number }
  /** Drain: answer 503 to new calls, finish the running ones, close the server, then post `closed`. */
  | { type: 'close' };

/** Stream chunks the main thread sends ahead of the thread's caller taking them. */
export const STREAM_CHUNKS_AHEAD = 2;

/** A copy of `bytes` in memory of its own, to transfer (a view's whole ArrayBuffer would otherwise be cloned). */
export function ownBytes(bytes: Uint8Array): Uint8Array {
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return copy;
}
