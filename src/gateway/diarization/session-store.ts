/**
 * The diarization sessions the API knows: each session's timeline so far (what its chunks'
 * answers finalized, and the latest provisional segments), the lengths of its chunks (the next
 * chunk's offset is their sum), its last answer (replayed to a retry) and its idle expiry.
 *
 * The scheduler holds the engine state of the same session id (sequence work) and decides where
 * its chunks run; this store holds what the API shows. Both expire after the model's
 * sessionIdleTimeoutMs without chunks; an expired id is remembered (bounded) so that it answers
 * session_expired rather than session_not_found.
 *
 * A session moves open → closing (DELETE, waiting for its running chunk) → gone; or open →
 * expired when idle past its timeout with no chunk running.
 *
 * Expiry costs nothing per session held: the sessions of each idle timeout are kept in the order of
 * their last activity (a touch moves a session to the end), so finding the due ones and the next
 * due time reads only the oldest, past the few with a chunk running. (Scanning every session on
 * each chunk made the gateway's CPU per chunk 37 ms instead of 5 with 5,000 sessions open:
 * bench/results/diarize-gateway-cpu-2026-12-04b/.)
 */
import type { DiarizationChunkResult } from '../../api/diarization.js';
import type { Clock, TimerHandle } from '../../core/clock.js';
import { errors } from '../../core/error-catalog.js';
import type { ServiceError } from '../../core/errors.js';
import type { EngineSegment } from './timeline.js';

export interface SpeakerBounds {
  minSpeakers?: number;
  maxSpeakers?: number;
}

/** A chunk's answer, kept for a retry of its number. */
export type ChunkAnswer = { ok: true; body: DiarizationChunkResult } | { ok: false; error: ServiceError };

export interface DiarizationSession {
  id: string;
  model: string;
  bounds: SpeakerBounds;
  idleTimeoutMs: number;
  /** Samples of each accepted chunk, by sequence number. */
  chunkSamples: number[];
  /** Every segment finalized so far, in the API's order (timeline.ts compareSegments), not the order finalized. */
  finalized: EngineSegment[];
  /** The latest chunk's provisional segments, in the same order. */
  provisional: EngineSegment[];
  speakers: number;
  /** The highest-numbered answered chunk and its answer, replayed to a retry of the same number. */
  lastAnswer: { seq: number; outcome: ChunkAnswer } | undefined;
  /** The highest-numbered chunk that succeeded (the engine state the scheduler keeps is its), and whether it was `is_last`. */
  lastSucceeded: { seq: number; isLast: boolean } | undefined;
  /** The number of the `is_last` chunk while it runs or once it succeeded: no chunk may follow it. */
  lastSeq: number | undefined;
  /** The chunks sent to the scheduler and not answered yet, by sequence number (they run in order). */
  running: Map<number, Promise<DiarizationChunkResult>>;
  lastActivityMs: number;
  isClosing: boolean;
}

/** Expired ids remembered, oldest forgotten first. */
const EXPIRED_MEMORY = 4096;

export interface DiarizationSessionStoreDeps {
  clock: Clock;
  /** A session expired: the scheduler may still hold its engine state. */
  onExpired(session: DiarizationSession): void;
}

export class DiarizationSessionStore {
  #sessions = new Map<string, DiarizationSession>();
  /** The sessions of each idle timeout, oldest activity first. */
  #byTimeout = new Map<number, Map<string, DiarizationSession>>();
  #expired = new Map<string, { model: string; idleTimeoutMs: number }>();
  #reaper: { atMs: number; handle: TimerHandle } | undefined;
  #isClosed = false;
  readonly #deps: DiarizationSessionStoreDeps;

  constructor(deps: DiarizationSessionStoreDeps) {
    this.#deps = deps;
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** @throws session_already_exists */
  create(p: { id: string; model: string; bounds: SpeakerBounds; idleTimeoutMs: number }): DiarizationSession {
    this.#expireDue();
    if (this.#sessions.has(p.id)) throw errors.sessionAlreadyExists({ sessionId: p.id });
    this.#expired.delete(p.id);
    const session: DiarizationSession = {
      ...p,
      chunkSamples: [],
      finalized: [],
      provisional: [],
      speakers: 0,
      lastAnswer: undefined,
      lastSucceeded: undefined,
      lastSeq: undefined,
      running: new Map(),
      lastActivityMs: this.#deps.clock.nowMs(),
      isClosing: false,
    };
    this.#sessions.set(p.id, session);
    this.#queueOf(session).set(session.id, session);
    this.#scheduleReap();
    return session;
  }

  /** @throws session_not_found, session_expired */
  get(id: string): DiarizationSession {
    this.#expireDue();
    const session = this.#sessions.get(id);
    if (session !== undefined && !session.isClosing) return session;
    const expired = this.#expired.get(id);
    if (expired !== undefined)
      throw errors.sessionExpired({ model: expired.model, sessionId: id, sessionIdleTimeoutMs: expired.idleTimeoutMs });
    throw errors.sessionNotFound({ model: session?.model ?? '', sessionId: id });
  }

  /** The session was used now: its idle time starts again. */
  touch(session: DiarizationSession): void {
    session.lastActivityMs = this.#deps.clock.nowMs();
    if (this.#sessions.get(session.id) === session) {
      const queue = this.#queueOf(session);
      queue.delete(session.id);
      queue.set(session.id, session);
    }
    this.#scheduleReap();
  }

  /** The scheduler reported the session expired: the API session goes the same way. */
  markExpired(session: DiarizationSession): void {
    if (this.#sessions.get(session.id) !== session) return;
    this.#expire(session);
  }

  delete(session: DiarizationSession): void {
    if (this.#sessions.get(session.id) === session) this.#forget(session);
  }

  /** Expires due sessions now (the reaper's timer also does). */
  expireDue(): void {
    this.#expireDue();
  }

  close(): void {
    this.#isClosed = true;
    this.#reaper?.handle.cancel();
    this.#reaper = undefined;
  }

  static isIdle(session: DiarizationSession): boolean {
    return session.running.size === 0 && !session.isClosing;
  }

  #queueOf(session: DiarizationSession): Map<string, DiarizationSession> {
    let queue = this.#byTimeout.get(session.idleTimeoutMs);
    if (queue === undefined) this.#byTimeout.set(session.idleTimeoutMs, (queue = new Map()));
    return queue;
  }

  #forget(session: DiarizationSession): void {
    this.#sessions.delete(session.id);
    this.#byTimeout.get(session.idleTimeoutMs)?.delete(session.id);
  }

  #expire(session: DiarizationSession): void {
    this.#forget(session);
    this.#expired.set(session.id, { model: session.model, idleTimeoutMs: session.idleTimeoutMs });
    if (this.#expired.size > EXPIRED_MEMORY) this.#expired.delete(this.#expired.keys().next().value!);
    this.#deps.onExpired(session);
  }

  #expireDue(): void {
    const nowMs = this.#deps.clock.nowMs();
    for (const [idleTimeoutMs, queue] of this.#byTimeout) {
      const due: DiarizationSession[] = [];
      for (const session of queue.values()) {
        if (nowMs - session.lastActivityMs < idleTimeoutMs) break;
        if (DiarizationSessionStore.isIdle(session)) due.push(session);
      }
      for (const session of due) this.#expire(session);
    }
  }

  /** The earliest time an idle session falls due, past the oldest sessions with a chunk running. */
  #nextDueMs(): number | undefined {
    let atMs: number | undefined;
    for (const [idleTimeoutMs, queue] of this.#byTimeout) {
      for (const session of queue.values()) {
        if (!DiarizationSessionStore.isIdle(session)) continue;
        const dueMs = session.lastActivityMs + idleTimeoutMs;
        if (atMs === undefined || dueMs < atMs) atMs = dueMs;
        break;
      }
    }
    return atMs;
  }

  #scheduleReap(): void {
    if (this.#isClosed) return;
    const atMs = this.#nextDueMs();
    if (atMs === undefined) return;
    if (this.#reaper !== undefined && this.#reaper.atMs <= atMs) return;
    this.#reaper?.handle.cancel();
    const handle = this.#deps.clock.setTimeout(() => {
      this.#reaper = undefined;
      this.#expireDue();
      this.#scheduleReap();
    }, atMs - this.#deps.clock.nowMs());
    this.#reaper = { atMs, handle };
  }
}
