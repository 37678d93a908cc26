/**
 * Diarization sessions as the API sees them, apart from HTTP: opening one, running a chunk (a
 * retried sequence number is answered again without running, a gap or an old number is refused, a
 * chunk too long is refused, none of which uses the number), the timeline so far, closing. It keeps
 * the session store (session-store.ts) and submits chunks as sequence work.
 *
 * The main thread owns the one service; the routes reach it through GatewayDeps.diarizationSessions,
 * which in a gateway thread is a proxy to the main thread's: a session's chunks may then arrive
 * through any thread and still meet one store.
 */
import type { DiarizationChunkResult, DiarizationSessionCreated, DiarizationSessionTimeline } from '../../api/diarization.js';
import type { Clock } from '../../core/clock.js';
import { errors } from '../../core/error-catalog.js';
import type { ServiceError } from '../../core/errors.js';
import { SEQUENCE_NOT_TAKEN_CODES, type SubmitOptions } from '../../scheduler/index.js';
import type { Logger } from '../../telemetry/logger.js';
import type { Metrics } from '../../telemetry/metrics.js';
import type { GatewayDeps } from '../gateway-types.js';
import { SAMPLE_RATE_HZ } from './diarize-recording.js';
import { DiarizationSessionStore, type ChunkAnswer, type DiarizationSession, type SpeakerBounds } from './session-store.js';
import { compareSegments, sortSegments, toEngineOutput, toSpeakerSegments, type EngineOutput } from './timeline.js';

/** A chunk for a session: its samples (absent: a retry that sent no file) and, for engines that use them, its speech regions. */
export interface SessionChunk {
  id: string;
  seq: number;
  isLast: boolean;
  samples?: Int16Array;
  speech?: unknown;
  /** The longest item the session model's engine takes, in milliseconds, when it has a limit. */
  maxItemMs?: number;
}

/** What the session routes need; the main thread's service or a gateway thread's proxy to it. */
export interface DiarizationSessions {
  /** @throws session_already_exists */
  create(p: { id: string; model: string; bounds: SpeakerBounds; idleTimeoutMs: number }): Promise<DiarizationSessionCreated>;
  /** The session's model. @throws session_not_found, session_expired */
  modelOf(id: string): Promise<string>;
  /**
   * Runs the session's next chunk, or answers a retried number again.
   * @throws session_not_found, session_expired, sequence_gap, sequence_out_of_order, chunk_too_long, and the scheduler's errors
   */
  chunk(chunk: SessionChunk, options: Omit<SubmitOptions, 'signal'>): Promise<DiarizationChunkResult>;
  /** @throws session_not_found, session_expired */
  timeline(id: string): Promise<DiarizationSessionTimeline>;
  /**
   * Closes the session once its running chunk is answered, after the engine's final step when no
   * chunk was `is_last`; the final timeline.
   * @throws session_not_found, session_expired
   */
  close(id: string, options: Omit<SubmitOptions, 'signal'>): Promise<DiarizationSessionTimeline>;
}

export interface DiarizationSessionServiceDeps {
  sequences: NonNullable<GatewayDeps['sequences']>;
  clock: Clock;
  metrics: Metrics;
  log: Logger;
  /** Longest chunk, in milliseconds. */
  maxChunkMs: number;
}

export class DiarizationSessionService implements DiarizationSessions {
  readonly #store: DiarizationSessionStore;
  readonly #deps: DiarizationSessionServiceDeps;

  constructor(deps: DiarizationSessionServiceDeps) {
    this.#deps = deps;
    this.#store = new DiarizationSessionStore({
      clock: deps.clock,
      onExpired: (session) => {
        deps.metrics.diarizationSessionsExpired.inc({ model: session.model });
        void deps.sequences.end(session.model, session.id);
        deps.log.debug({ model: session.model, sessionId: session.id }, 'diarization session expired');
      },
    });
  }

  get size(): number {
    return this.#store.size;
  }

  async create(p: { id: string; model: string; bounds: SpeakerBounds; idleTimeoutMs: number }): Promise<DiarizationSessionCreated> {
    const session = this.#store.create(p);
    return {
      id: p.id,
      object: 'diarization.session',
      model: p.model,
      expires_at: this.#expiresAt(session),
      idle_timeout: session.idleTimeoutMs / 1000,
    };
  }

  async modelOf(id: string): Promise<string> {
    return this.#store.get(id).model;
  }

  async chunk(chunk: SessionChunk, options: Omit<SubmitOptions, 'signal'>): Promise<DiarizationChunkResult> {
    const { id, seq, samples } = chunk;
    // Looked up now: the session may have expired or closed while the upload arrived.
    const session = this.#store.get(id);
    const replayed = this.#replay(session, seq);
    if (replayed !== undefined) return replayed;
    if (session.lastSeq !== undefined && seq > session.lastSeq) {
      throw errors.invalidParameter({
        param: 'seq',
        expected: `at most ${session.lastSeq} (chunk ${session.lastSeq} was is_last)`,
        got: seq,
      });
    }
    const nextSeq = session.chunkSamples.length;
    if (seq > nextSeq) throw errors.sequenceGap({ sessionId: id, expectedSeq: nextSeq, seq });
    if (seq < nextSeq) throw errors.sequenceOutOfOrder({ sessionId: id, lastCompletedSeq: session.lastAnswer?.seq ?? -1, seq });
    if (samples === undefined) throw errors.missingParameter({ param: 'file' });
    const chunkMs = (samples.length / SAMPLE_RATE_HZ) * 1000;
    // The engine would fail a longer chunk (invalid_audio) and use up its number.
    const maxChunkMs = Math.min(this.#deps.maxChunkMs, chunk.maxItemMs ?? Infinity);
    if (chunkMs > maxChunkMs) throw errors.chunkTooLong({ durationMs: chunkMs, maxChunkMs });
    const chunkOffsetS = session.chunkSamples.reduce((a, b) => a + b, 0) / SAMPLE_RATE_HZ;
    session.chunkSamples.push(samples.length);
    if (chunk.isLast) session.lastSeq = seq;
    const answer = this.#run(session, {
      seq,
      audio: samples,
      isLast: chunk.isLast,
      itemOptions: { ...session.bounds, chunkOffsetS, ...(chunk.speech === undefined ? {} : { speech: chunk.speech }) },
      // NOTE: no abort signal: a chunk whose client left still runs, and its answer is kept for the
      // client's retry; a cancelled chunk would leave its number unusable in the scheduler.
      submitOptions: options,
    });
    session.running.set(seq, answer);
    this.#store.touch(session);
    return answer;
  }

  async timeline(id: string): Promise<DiarizationSessionTimeline> {
    return timelineOf(this.#store.get(id), 'open');
  }

  async close(id: string, options: Omit<SubmitOptions, 'signal'>): Promise<DiarizationSessionTimeline> {
    const session = this.#store.get(id);
    session.isClosing = true;
    await Promise.all([...session.running.values()].map((answer) => answer.catch(() => undefined)));
    await this.#runFinalStep(session, options);
    // The id stays taken until the scheduler's session has ended (its last run answered): a
    // session created again under it meanwhile would be answered from the old one.
    await this.#deps.sequences.end(session.model, session.id);
    this.#store.delete(session);
    return timelineOf(session, 'closed');
  }

  /** Stops the expiry timer (the server closes). */
  shutdown(): void {
    this.#store.close();
  }

  #expiresAt(session: DiarizationSession): number {
    return Math.round((this.#deps.clock.wallMs() + session.idleTimeoutMs) / 1000);
  }

  /**
   * The engine's last step for a session closed without an `is_last` chunk: an empty `is_last` item
   * after the last number, placed where the last successful chunk's audio ended (the audio the engine
   * has had). A streaming engine still holds audio it has not stepped (Sortformer's step waits for a
   * whole chunk and its look-ahead: up to 15 s): without this step that audio would never reach the
   * timeline. If the step fails, the timeline is what the chunks gave.
   */
  async #runFinalStep(session: DiarizationSession, options: Omit<SubmitOptions, 'signal'>): Promise<void> {
    const last = session.lastSucceeded;
    if (last === undefined || last.isLast) return;
    const endSamples = session.chunkSamples.slice(0, last.seq + 1).reduce((a, b) => a + b, 0);
    try {
      const result = await this.#deps.sequences.submit(
        session.model,
        {
          sessionId: session.id,
          seq: session.chunkSamples.length,
          audio: new Int16Array(0),
          isLast: true,
          options: { ...session.bounds, chunkOffsetS: endSamples / SAMPLE_RATE_HZ },
        },
        options,
      );
      applyOutput(session, toEngineOutput(result.output, session.model));
    } catch (err) {
      const error = err as ServiceError;
      this.#deps.log.warn({ model: session.model, sessionId: session.id, code: error.code, err }, 'diarization final step failed');
    }
  }

  /** The answer to a number already sent: the last answered one again, or the one still running. */
  #replay(session: DiarizationSession, seq: number): Promise<DiarizationChunkResult> | undefined {
    if (session.lastAnswer?.seq === seq) {
      const { outcome } = session.lastAnswer;
      return outcome.ok ? Promise.resolve(outcome.body) : Promise.reject(outcome.error);
    }
    return session.running.get(seq);
  }

  async #run(
    session: DiarizationSession,
    p: {
      seq: number;
      audio: Int16Array;
      isLast: boolean;
      itemOptions: Record<string, unknown>;
      submitOptions: Omit<SubmitOptions, 'signal'>;
    },
  ): Promise<DiarizationChunkResult> {
    try {
      const result = await this.#deps.sequences.submit(
        session.model,
        { sessionId: session.id, seq: p.seq, audio: p.audio, isLast: p.isLast, options: p.itemOptions },
        p.submitOptions,
      );
      const output = toEngineOutput(result.output, session.model);
      applyOutput(session, output);
      if (session.lastSucceeded === undefined || p.seq > session.lastSucceeded.seq) {
        session.lastSucceeded = { seq: p.seq, isLast: p.isLast };
      }
      const body: DiarizationChunkResult = {
        id: session.id,
        seq: p.seq,
        duration: durationS(session),
        speakers: session.speakers,
        finalized: toSpeakerSegments(session.finalized),
        provisional: toSpeakerSegments(session.provisional),
        expires_at: this.#expiresAt(session),
      };
      keepAnswer(session, p.seq, { ok: true, body });
      return body;
    } catch (err) {
      const error = err as ServiceError;
      // The engine never had the is_last chunk: the session may still end with a later one.
      if (session.lastSeq === p.seq) session.lastSeq = undefined;
      if (error.code === 'session_expired' || error.code === 'session_not_found') {
        this.#store.markExpired(session);
      } else if (SEQUENCE_NOT_TAKEN_CODES.has(error.code)) {
        // The scheduler never took it, nor (their turn) any later number: they may be sent again.
        session.chunkSamples.length = Math.min(session.chunkSamples.length, p.seq);
      } else {
        keepAnswer(session, p.seq, { ok: false, error });
      }
      throw err;
    } finally {
      session.running.delete(p.seq);
      this.#store.touch(session);
    }
  }
}

/**
 * An engine's answer into the session's timeline: its final segments added among the earlier ones
 * in the API's order (compareSegments), its provisional ones in place of the last.
 */
function applyOutput(session: DiarizationSession, output: EngineOutput): void {
  // NOTE: sorted whole each time: the list is in order up to the few new segments at its end,
  // which V8's TimSort places in about one pass over it.
  session.finalized.push(...output.finalized);
  session.finalized.sort(compareSegments);
  session.provisional = sortSegments(output.provisional);
  session.speakers = output.speakers;
}

/**
 * Keeps the answer of the highest number answered, as the scheduler does: a chunk that failed (its
 * deadline passed while it waited) before the chunk ahead of it answered keeps its own answer for
 * its retry.
 */
function keepAnswer(session: DiarizationSession, seq: number, outcome: ChunkAnswer): void {
  if (session.lastAnswer === undefined || seq > session.lastAnswer.seq) session.lastAnswer = { seq, outcome };
}

function durationS(session: DiarizationSession): number {
  return Math.round((session.chunkSamples.reduce((a, b) => a + b, 0) / SAMPLE_RATE_HZ) * 1000) / 1000;
}

/**
 * The timeline: an open session's final segments, then its provisional ones (each in the API's
 * order), so that the final ones are the first `finalized`. A closed session's provisional segments
 * are final too (no later chunk will change them), so all are in one order.
 */
function timelineOf(session: DiarizationSession, status: 'open' | 'closed'): DiarizationSessionTimeline {
  const segments =
    status === 'closed' ? sortSegments([...session.finalized, ...session.provisional]) : [...session.finalized, ...session.provisional];
  return {
    id: session.id,
    object: 'diarization.session',
    status,
    chunks: session.chunkSamples.length,
    duration: durationS(session),
    speakers: session.speakers,
    segments: toSpeakerSegments(segments),
    finalized: status === 'closed' ? segments.length : session.finalized.length,
  };
}
