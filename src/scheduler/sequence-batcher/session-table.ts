/**
 * The sessions of one model: each session's queued and running items, its latest state
 * checkpoint and the instance that holds that state (its slot), plus a bounded memory of expired
 * session ids so that a late item gets session_expired rather than session_not_found.
 */
import type { TimerHandle } from '../../core/clock.js';
import type { ServiceError } from '../../core/errors.js';
import type { SequenceStateIn } from '../../protocol/work.js';
import type { Dispatch } from '../stream-dispatcher.js';

export interface SequenceItem {
  sessionId: string;
  /** The item's position in its session, from 0, without gaps. */
  seq: number;
  /** 16 kHz mono 16-bit PCM. On rejection the caller still owns the buffer. */
  audio: Int16Array;
  /** The session's last item: the instance may drop the session's state after it. */
  isLast: boolean;
  /** Adapter-specific options of the session (JSON). */
  options: Readonly<Record<string, unknown>>;
}

export interface SequenceResult {
  sessionId: string;
  seq: number;
  /** Adapter-specific result of the item (JSON). */
  output: Readonly<Record<string, unknown>>;
}

export type ItemOutcome = { ok: true; result: SequenceResult } | { ok: false; error: ServiceError };

/**
 * One item in the scheduler. It moves queued → running → done, and may go back from running to
 * queued when its instance is lost. It is done exactly once; a running item that is done (its
 * deadline passed) still occupies its session until the instance answers.
 */
export interface SequenceEntry {
  requestId: string;
  item: SequenceItem;
  /** Index in PRIORITIES (0 first). */
  priority: number;
  /** First arrival: orders the session heads and counts the batch's delay. */
  enqueuedMs: number;
  /** When it last entered the queue (its requeue, after a lost run): its queue wait counts from it. */
  queuedSinceMs: number;
  onDispatched: ((dispatch: Dispatch) => void) | undefined;
  attempts: number;
  /** Retried after its run was lost (instance crashed or wedged): it runs in a batch of its own (dynamic-batcher.ts). */
  isolated: boolean;
  state: 'queued' | 'running' | 'done';
  /** Where the running attempt's session state came from. */
  stateKind: SequenceStateIn['kind'] | undefined;
  promise: Promise<SequenceResult>;
  resolve: (result: SequenceResult) => void;
  reject: (error: ServiceError) => void;
  timer: TimerHandle | undefined;
  detach: () => void;
}

export interface Session {
  sessionId: string;
  model: string;
  /** The sequence number the session accepts next. */
  nextSeq: number;
  /** The highest sequence number that finished, and how (replayed to a resubmission). */
  lastFinished: { seq: number; outcome: ItemOutcome } | undefined;
  /** The state after the last item that succeeded; undefined before the first. */
  checkpoint: Uint8Array | undefined;
  /** The instance that holds the state equal to `checkpoint`, if any. */
  instanceId: string | undefined;
  /** In sequence order. */
  queued: SequenceEntry[];
  running: SequenceEntry | undefined;
  lastActivityMs: number;
  /** endSession was called: no new items; forgotten once idle. */
  isEnding: boolean;
  endWaiters: (() => void)[];
}

export function isSessionIdle(session: Session): boolean {
  return session.queued.length === 0 && session.running === undefined;
}

/** Expired ids remembered per model, oldest forgotten first. */
const EXPIRED_MEMORY = 4096;

export class SessionTable {
  #sessions = new Map<string, Session>();
  #expired = new Set<string>();

  get size(): number {
    return this.#sessions.size;
  }

  get(sessionId: string): Session | undefined {
    return this.#sessions.get(sessionId);
  }

  values(): IterableIterator<Session> {
    return this.#sessions.values();
  }

  add(session: Session): void {
    this.#sessions.set(session.sessionId, session);
    this.#expired.delete(session.sessionId);
  }

  delete(sessionId: string, reason: 'ended' | 'expired'): void {
    this.#sessions.delete(sessionId);
    if (reason !== 'expired') return;
    this.#expired.add(sessionId);
    if (this.#expired.size > EXPIRED_MEMORY) this.#expired.delete(this.#expired.values().next().value!);
  }

  wasExpired(sessionId: string): boolean {
    return this.#expired.has(sessionId);
  }

  /** Sessions whose state each instance holds. */
  boundCounts(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const s of this.#sessions.values()) {
      if (s.instanceId !== undefined) counts.set(s.instanceId, (counts.get(s.instanceId) ?? 0) + 1);
    }
    return counts;
  }
}
