/**
 * The port between the load driver and what one request is. The driver decides when requests
 * start and how many run at once; a Workload sends one and measures it. Transcription is the
 * first workload; text-to-speech (time to first audio byte), diarization sessions and voice calls
 * plug in by implementing the same interface, where one "request" may be a whole session.
 */
import type { Clock } from '../../src/core/clock.js';

export interface RequestContext {
  /** Sequence number of the request in its step, from 0: workloads use it to pick inputs. */
  sequence: number;
  /** Aborted on the per-request timeout or when the run is interrupted; `reason` says which. */
  signal: AbortSignal;
  clock: Clock;
}

export interface RequestOutcome {
  /** When the request started and finished, on the Clock's monotonic scale. */
  startMs: number;
  endMs: number;
  /** Time to the first unit of streamed output (first SSE delta, first chunk, first audio byte). */
  ttfbMs?: number;
  /** HTTP status, when a response arrived. */
  status?: number;
  /**
   * Undefined on success. Otherwise a short code: the server's error `code` when it sent one,
   * else `http_<status>`, or a transport code (`timeout`, `ECONNREFUSED`, `bad_response`, ...).
   */
  errorCode?: string;
  /** Seconds of audio the request carried (input for ASR, output for TTS), when known. */
  audioSeconds?: number;
  /** A streamed audio answer's continuity (see playback.ts), for workloads that play their output. */
  playback?: PlaybackOutcome;
  /** Named stages of the request, in milliseconds (a voice call's turn: transcript, llm, first_audio...). */
  stagesMs?: Record<string, number>;
}

export interface PlaybackOutcome {
  /** Times the listener's player ran dry before more audio arrived. */
  stalls: number;
  /** Time spent waiting with nothing to play. */
  stalledMs: number;
}

/** What one request of a workload is, for the report. */
export interface WorkloadInfo {
  /** `transcribe`, `speech`, later `diarize`, `call`. */
  kind: string;
  /** The endpoint requests go to. */
  endpoint: string;
  model: string;
  isStreaming: boolean;
  /** Number of distinct inputs cycled through. */
  inputCount: number;
  /** Mean audio seconds per request, when known. */
  meanAudioSeconds?: number;
  /** Workload-specific settings worth recording (response format, extra fields). */
  settings: Record<string, string>;
}

export interface Workload {
  readonly info: WorkloadInfo;
  /** Sends one request and measures it. Never rejects: failures are outcomes with an errorCode. */
  makeRequest(context: RequestContext): Promise<RequestOutcome>;
  /** Ends what the workload holds across requests (a voice call's open connections) after the run. */
  close?(): Promise<void>;
}

/**
 * Codes the client gives a request, not the server: what went wrong with the transport or the
 * answer's shape, and the driver's aborts. Node and undici system codes (ECONNRESET,
 * UND_ERR_SOCKET) are matched by their form.
 */
const CLIENT_ERROR_CODES: ReadonlySet<string> = new Set([
  'timeout',
  'interrupted',
  'abandoned',
  'aborted',
  'network_error',
  'redirect',
  'bad_response',
  'incomplete_stream',
  'response_too_large',
  'empty_audio',
]);
const SYSTEM_ERROR_CODE = /^(E[A-Z0-9_]+|UND_ERR_[A-Z0-9_]+|ERR_[A-Z0-9_]+)$/;

/**
 * The key under which an outcome is counted in a step's errorsByCode: `<status> <code>` for the
 * code of a server's error envelope, `http_<status>` for an answer without one, and a client's
 * code alone, even after a status (a 200 whose body timed out is `timeout`), as docs/bench.md says.
 */
export function toErrorKey(outcome: Pick<RequestOutcome, 'status' | 'errorCode'>): string {
  const code = outcome.errorCode ?? 'unknown';
  if (outcome.status === undefined || CLIENT_ERROR_CODES.has(code) || SYSTEM_ERROR_CODE.test(code)) return code;
  return code === `http_${outcome.status}` ? code : `${outcome.status} ${code}`;
}

/** Reasons the driver aborts a request with; workloads map them to error codes. */
export const ABORT_REASONS = { timeout: 'timeout', interrupted: 'interrupted', abandoned: 'abandoned' } as const;
export type AbortReason = (typeof ABORT_REASONS)[keyof typeof ABORT_REASONS];

export class RequestAbort extends Error {
  readonly reason: AbortReason;
  constructor(reason: AbortReason) {
    super(
      reason === 'timeout'
        ? 'The request timed out'
        : reason === 'abandoned'
          ? "The request was abandoned after its step's window"
          : 'The run was interrupted',
    );
    this.name = 'RequestAbort';
    this.reason = reason;
  }
}

/** Maps a thrown fetch or body-read error to an error code. */
export function toTransportErrorCode(err: unknown, signal: AbortSignal): string {
  if (signal.aborted) {
    const reason: unknown = signal.reason;
    return reason instanceof RequestAbort ? reason.reason : 'aborted';
  }
  const cause = (err as { cause?: unknown } | undefined)?.cause;
  const causeCode = (cause as { code?: unknown } | undefined)?.code;
  if (typeof causeCode === 'string' && causeCode.length > 0) return causeCode;
  const ownCode = (err as { code?: unknown } | undefined)?.code;
  if (typeof ownCode === 'string' && ownCode.length > 0) return ownCode;
  return 'network_error';
}
