/**
 * Sequence work: ordered items of sessions, batched across sessions, each session sticking to
 * the instance that holds its state. The decisions are pure (sequence-check, sequence-plan,
 * idle-reaper); this file applies them: queues, timers, executor calls, metrics.
 *
 * State and ownership: the scheduler keeps each session's latest checkpoint (the state of its
 * last successful item) and which instance holds that same state. An item runs with `resident`
 * state on that instance; anywhere else with the checkpoint `attached` (or `new` before the first
 * checkpoint). A run whose outcome is not recorded (lost with its instance, over the state limit,
 * past its deadline) unbinds the session, so the next item starts again from the checkpoint:
 * nothing is lost and nothing is applied twice.
 */
import { randomUUID } from 'node:crypto';
import type { Clock, TimerHandle } from '../../core/clock.js';
import { errors } from '../../core/error-catalog.js';
import { ServiceError } from '../../core/errors.js';
import { MAX_STATE_BYTES } from '../../protocol/work.js';
import type { Logger } from '../../telemetry/logger.js';
import type { Metrics } from '../../telemetry/metrics.js';
import { canAdmit } from '../admission.js';
import type { BatchPolicy } from '../dynamic-batcher.js';
import { unavailableError, type Executor } from '../executor.js';
import type { SequenceItemOutcome, SequenceStateIn } from '../../protocol/work.js';
import type { InstanceLoad } from '../router.js';
import type { Dispatch } from '../stream-dispatcher.js';
import { isExpired, nextExpiryMs } from './idle-reaper.js';
import { checkSequenceNumber } from './sequence-check.js';
import { planSequenceDispatch, type SequenceCandidate, type SequenceHead } from './sequence-plan.js';
import {
  isSessionIdle,
  SessionTable,
  type ItemOutcome,
  type SequenceEntry,
  type SequenceItem,
  type SequenceResult,
  type Session,
} from './session-table.js';

export type { SequenceItem, SequenceResult } from './session-table.js';

export interface SequencePolicy extends BatchPolicy {
  /** Idle time after which a session is dropped, in milliseconds. */
  sessionIdleTimeoutMs: number;
  /** Batches sent to one instance before it answers (batch and sequence work together). */
  maxRunningBatchesPerInstance: number;
}

export interface SequenceBatcherOptions {
  maxQueuedRequests: number;
  retryAfterMs: number;
  models: Readonly<Record<string, SequencePolicy>>;
}

export interface SequenceBatcherDeps {
  executor: Executor;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** Running work per instance, shared with batch work. */
  loads: Map<string, InstanceLoad>;
  /**
   * A sequence batch left the model's queue for an instance: its items count as running now. Also
   * when the batcher's own delay timer dispatched it, which no caller of pump sees.
   */
  onBatchDispatched: (model: string) => void;
  /** A sequence batch ended on an instance of the model: capacity is free. */
  onBatchSettled: (model: string) => void;
  /** An item finished or a session was forgotten; the scheduler checks whether it has drained. */
  onFinished: () => void;
}

export interface SequenceSubmitOptions {
  /** Index in PRIORITIES (0 first). */
  priority: number;
  signal?: AbortSignal;
  timeoutMs: number;
  requestId?: string;
  /** Called on each dispatch of the item (again on a retry), as the batch scheduler's. */
  onDispatched?: (dispatch: Dispatch) => void;
}

export interface SequenceBatcher {
  submit(model: string, item: SequenceItem, options: SequenceSubmitOptions): Promise<SequenceResult>;
  endSession(model: string, sessionId: string): Promise<void>;
  pump(model: string): void;
  queued(model: string): number;
  running(model: string): number;
  sessions(model: string): number;
  /** Items queued or running, plus sessions still ending. */
  pending(): number;
  close(): void;
  destroy(): void;
}

/** A lost run is retried; this bounds retries when instances keep failing. */
const MAX_ATTEMPTS = 3;
/**
 * The codes with which an item is refused at submit, or dropped from the queue before it ran (no
 * instance can take the model's work), without using its sequence number: the client may send
 * that number again. With any other code the failure is the number's answer, replayed to a
 * resubmission.
 */
export const SEQUENCE_NOT_TAKEN_CODES: ReadonlySet<string> = new Set([
  'queue_full',
  'shutting_down',
  'model_not_found',
  'no_ready_instance',
  'model_wake_failed',
  'model_wake_timeout',
  'gpu_budget_exhausted',
  'sequence_gap',
  'sequence_out_of_order',
]);
const LOST_RUN_CODES = new Set(['instance_crashed', 'instance_wedged']);

interface ModelState {
  policy: SequencePolicy;
  sessions: SessionTable;
  queued: number;
  running: number;
  wake: { atMs: number; handle: TimerHandle } | undefined;
  reaper: TimerHandle | undefined;
}

interface Head extends SequenceHead {
  session: Session;
}

export function createSequenceBatcher(options: SequenceBatcherOptions, deps: SequenceBatcherDeps): SequenceBatcher {
  const { executor, clock, log, metrics, loads } = deps;
  const models = new Map<string, ModelState>(
    Object.entries(options.models).map(([model, policy]) => [
      model,
      { policy, sessions: new SessionTable(), queued: 0, running: 0, wake: undefined, reaper: undefined },
    ]),
  );
  let isClosing = false;
  let isDestroyed = false;

  for (const model of models.keys()) {
    updateGauges(model);
    metrics.sessionsExpired.inc({ model }, 0);
    metrics.sequenceItems.inc({ model, outcome: 'ok' }, 0);
  }

  function updateGauges(model: string): void {
    metrics.sessionsActive.set({ model }, models.get(model)?.sessions.size ?? 0);
  }

  function touch(session: Session): void {
    session.lastActivityMs = clock.nowMs();
    const state = models.get(session.model)!;
    if (isSessionIdle(session)) {
      if (session.isEnding) forget(session, 'ended');
      else if (state.reaper === undefined) scheduleReap(session.model);
    }
  }

  /** Drops a session and tells the instance holding its state (best effort). */
  function forget(session: Session, reason: 'ended' | 'expired'): void {
    const state = models.get(session.model)!;
    if (state.sessions.get(session.sessionId) !== session) return;
    state.sessions.delete(session.sessionId, reason);
    if (session.instanceId !== undefined) executor.endSessions(session.instanceId, [session.sessionId]);
    for (const w of session.endWaiters.splice(0)) w();
    updateGauges(session.model);
    log.debug({ model: session.model, sessionId: session.sessionId, reason }, 'session forgotten');
    deps.onFinished();
  }

  function scheduleReap(model: string): void {
    const state = models.get(model)!;
    if (state.reaper !== undefined || isDestroyed) return;
    const sessions = [...state.sessions.values()].map((s) => ({ lastActivityMs: s.lastActivityMs, isIdle: isSessionIdle(s) }));
    const atMs = nextExpiryMs(sessions, state.policy.sessionIdleTimeoutMs);
    if (atMs === undefined) return;
    state.reaper = clock.setTimeout(() => {
      state.reaper = undefined;
      const nowMs = clock.nowMs();
      for (const s of [...state.sessions.values()]) {
        if (!isExpired({ lastActivityMs: s.lastActivityMs, isIdle: isSessionIdle(s) }, nowMs, state.policy.sessionIdleTimeoutMs)) continue;
        metrics.sessionsExpired.inc({ model });
        forget(s, 'expired');
      }
      scheduleReap(model);
    }, atMs - clock.nowMs());
  }

  /**
   * The item's outcome. An item dropped from the queue before it ran, with a code of
   * SEQUENCE_NOT_TAKEN_CODES (`isTaken` false), gives its number back: the session accepts it again.
   */
  function finish(session: Session, entry: SequenceEntry, outcome: ItemOutcome, p: { isTaken: boolean } = { isTaken: true }): void {
    if (entry.state === 'done') return;
    const state = models.get(session.model)!;
    if (entry.state === 'queued') {
      const i = session.queued.indexOf(entry);
      if (i !== -1) session.queued.splice(i, 1);
      state.queued -= 1;
    }
    entry.state = 'done';
    entry.timer?.cancel();
    entry.detach();
    if (!p.isTaken) session.nextSeq = Math.min(session.nextSeq, entry.item.seq);
    else if (session.lastFinished === undefined || entry.item.seq > session.lastFinished.seq) {
      session.lastFinished = { seq: entry.item.seq, outcome };
    }
    metrics.sequenceItems.inc({ model: session.model, outcome: outcome.ok ? 'ok' : outcome.error.code });
    if (outcome.ok) entry.resolve(outcome.result);
    else entry.reject(outcome.error);
    touch(session);
    deps.onFinished();
  }

  /** The instance holds a state of the session that is not its checkpoint: it drops it, and the next item brings the checkpoint. */
  function release(session: Session, instanceId: string): void {
    session.instanceId = undefined;
    executor.endSessions(instanceId, [session.sessionId]);
  }

  function requeue(session: Session, entry: SequenceEntry): void {
    // Work given again: a model stopping for a sleep wakes for it once stopped, instead of failing it.
    executor.demand?.(session.model);
    session.queued.unshift(entry);
    entry.state = 'queued';
    entry.queuedSinceMs = clock.nowMs();
    models.get(session.model)!.queued += 1;
  }

  function scheduleWake(model: string, atMs: number): void {
    const state = models.get(model)!;
    if (state.wake !== undefined && state.wake.atMs <= atMs) return;
    state.wake?.handle.cancel();
    const handle = clock.setTimeout(() => {
      state.wake = undefined;
      pump(model);
    }, atMs - clock.nowMs());
    state.wake = { atMs, handle };
  }

  function pump(model: string): void {
    const state = models.get(model);
    if (state === undefined || state.queued === 0) return;
    if (executor.availability(model) === 'unavailable') {
      // No instance will come back soon (none configured, or a crash loop): fail fast.
      for (const session of [...state.sessions.values()]) {
        for (const entry of [...session.queued]) {
          finish(session, entry, { ok: false, error: unavailableError(executor, model, options.retryAfterMs) }, { isTaken: false });
        }
      }
      return;
    }
    const heads: Head[] = [];
    for (const session of state.sessions.values()) {
      const entry = session.queued[0];
      if (entry === undefined || session.running !== undefined) continue;
      heads.push({
        session,
        bucket: 0,
        priority: entry.priority,
        enqueuedMs: entry.enqueuedMs,
        isolated: entry.isolated,
        boundInstanceId: session.instanceId,
      });
    }
    heads.sort((a, b) => a.priority - b.priority || a.enqueuedMs - b.enqueuedMs);
    const bound = state.sessions.boundCounts();
    const candidates: SequenceCandidate[] = executor.readyInstances(model).map(({ instanceId }) => ({
      instanceId,
      boundSessions: bound.get(instanceId) ?? 0,
      ...(loads.get(instanceId) ?? { runningBatches: 0, runningRequests: 0 }),
    }));
    const plan = planSequenceDispatch(heads, candidates, {
      policy: state.policy,
      nowMs: clock.nowMs(),
      maxRunningBatchesPerInstance: state.policy.maxRunningBatchesPerInstance,
    });
    for (const { instanceId, items } of plan.dispatches) {
      dispatch(
        model,
        instanceId,
        items.map((h) => h.session),
      );
    }
    if (plan.wakeAtMs !== undefined) scheduleWake(model, plan.wakeAtMs);
  }

  function dispatch(model: string, instanceId: string, sessions: Session[]): void {
    const state = models.get(model)!;
    const entries = sessions.map((session) => {
      const entry = session.queued.shift()!;
      state.queued -= 1;
      session.running = entry;
      entry.state = 'running';
      entry.attempts += 1;
      const stateIn: SequenceStateIn =
        session.instanceId === instanceId
          ? { kind: 'resident' }
          : session.checkpoint === undefined
            ? { kind: 'new' }
            : { kind: 'attached', bytes: session.checkpoint };
      entry.stateKind = stateIn.kind;
      const queuedMs = clock.nowMs() - entry.queuedSinceMs;
      metrics.queueWait.observe({ model }, queuedMs / 1000);
      entry.onDispatched?.({ instanceId, queuedMs });
      return { session, entry, stateIn };
    });
    state.running += entries.length;
    const load = loads.get(instanceId) ?? { runningBatches: 0, runningRequests: 0 };
    load.runningBatches += 1;
    load.runningRequests += entries.length;
    loads.set(instanceId, load);
    metrics.batchSize.observe({ model }, entries.length);
    const batchId = randomUUID();
    log.debug({ model, instanceId, batchSize: entries.length, batchId }, 'sequence batch dispatched');
    deps.onBatchDispatched(model);
    const settle = (outcomes: SequenceItemOutcome[] | undefined, failure: ServiceError | undefined) => {
      load.runningBatches -= 1;
      load.runningRequests -= entries.length;
      state.running -= entries.length;
      entries.forEach(({ session, entry }, i) => {
        session.running = undefined;
        const outcome = outcomes?.[i];
        settleItem({ session, entry, instanceId, failure, outcome: outcome?.requestId === entry.requestId ? outcome : undefined });
        // Also when the item was already done (no finish above): the session may be idle now.
        touch(session);
      });
      deps.onBatchSettled(model);
    };
    executor
      .runSequenceBatch(instanceId, {
        batchId,
        items: entries.map(({ entry, stateIn }) => ({ requestId: entry.requestId, ...entry.item, state: stateIn })),
      })
      .then(
        (outcomes) => settle(outcomes, undefined),
        (err: unknown) => settle(undefined, err instanceof ServiceError ? err : errors.internal({ cause: err })),
      );
  }

  function settleItem(p: {
    session: Session;
    entry: SequenceEntry;
    instanceId: string;
    outcome: SequenceItemOutcome | undefined;
    failure: ServiceError | undefined;
  }): void {
    const { session, entry, instanceId, outcome } = p;
    const model = session.model;
    const canRetry = entry.state === 'running' && entry.attempts < MAX_ATTEMPTS && !isDestroyed;
    if (outcome === undefined) {
      // The run is lost (or its answer does not match): its state is unknown, never recorded.
      session.instanceId = undefined;
      const error = p.failure ?? errors.internal({ cause: new Error('Sequence batch result does not match its items') });
      if (LOST_RUN_CODES.has(error.code) && canRetry) {
        metrics.retries.inc({ model });
        log.warn({ requestId: entry.requestId, sessionId: session.sessionId, model, instanceId, code: error.code }, 'request retried');
        entry.isolated = true;
        requeue(session, entry);
        return;
      }
      finish(session, entry, { ok: false, error });
      return;
    }
    if (!outcome.ok) {
      if (outcome.error.code === 'session_state_missing' && entry.stateKind === 'resident' && canRetry) {
        // The instance lost the session's state (restarted under the same id, or evicted it).
        session.instanceId = undefined;
        metrics.retries.inc({ model });
        log.warn(
          { requestId: entry.requestId, sessionId: session.sessionId, model, instanceId, code: outcome.error.code },
          'request retried',
        );
        requeue(session, entry);
        return;
      }
      // The item failed without changing the session's state.
      finish(session, entry, { ok: false, error: outcome.error });
      return;
    }
    if (outcome.state.byteLength > MAX_STATE_BYTES) {
      release(session, instanceId);
      finish(session, entry, {
        ok: false,
        error: errors.sessionStateTooLarge({
          sessionId: session.sessionId,
          stateBytes: outcome.state.byteLength,
          maxStateBytes: MAX_STATE_BYTES,
        }),
      });
      return;
    }
    if (entry.state === 'done') {
      // The caller was already told this item failed (its deadline passed): it must not count.
      release(session, instanceId);
      return;
    }
    session.checkpoint = outcome.state;
    // After the last item the instance may drop the state: a later item brings the checkpoint.
    session.instanceId = entry.item.isLast ? undefined : instanceId;
    finish(session, entry, { ok: true, result: { sessionId: session.sessionId, seq: entry.item.seq, output: outcome.output } });
  }

  return {
    submit(model, item, submitOptions) {
      const state = models.get(model);
      const requestId = submitOptions.requestId ?? randomUUID();
      if (state === undefined) return Promise.reject(errors.modelNotFound({ model }));
      let session = state.sessions.get(item.sessionId);
      const reject = (error: ServiceError) => {
        metrics.sequenceItems.inc({ model, outcome: error.code });
        // A refused item is the session's activity all the same: its client is there (and the
        // gateway counts it), so the session does not expire under a client that retries.
        if (session !== undefined) session.lastActivityMs = clock.nowMs();
        return Promise.reject(error);
      };
      const check = checkSequenceNumber(session, item.seq);
      switch (check.kind) {
        case 'cached':
          return check.outcome.ok ? Promise.resolve(check.outcome.result) : Promise.reject(check.outcome.error);
        case 'pending':
          return check.entry.promise;
        case 'unknown':
        case 'ending':
          return reject(
            check.kind === 'unknown' && state.sessions.wasExpired(item.sessionId)
              ? errors.sessionExpired({ model, sessionId: item.sessionId, sessionIdleTimeoutMs: state.policy.sessionIdleTimeoutMs })
              : errors.sessionNotFound({ model, sessionId: item.sessionId }),
          );
        case 'gap':
          return reject(errors.sequenceGap({ sessionId: item.sessionId, expectedSeq: check.expectedSeq, seq: item.seq }));
        case 'out_of_order':
          return reject(errors.sequenceOutOfOrder({ sessionId: item.sessionId, lastCompletedSeq: check.lastCompletedSeq, seq: item.seq }));
        case 'create':
        case 'accept':
          break;
        default:
          return check satisfies never;
      }
      if (isClosing) return reject(errors.shuttingDown());
      if (submitOptions.signal?.aborted === true) return reject(errors.clientDisconnected({ requestId }));
      if (!canAdmit(state.queued, options.maxQueuedRequests)) {
        return reject(errors.queueFull({ model, queued: state.queued, retryAfterMs: options.retryAfterMs }));
      }
      if (executor.availability(model) === 'unavailable') {
        return reject(unavailableError(executor, model, options.retryAfterMs));
      }
      if (session === undefined) {
        session = {
          sessionId: item.sessionId,
          model,
          nextSeq: 0,
          lastFinished: undefined,
          checkpoint: undefined,
          instanceId: undefined,
          queued: [],
          running: undefined,
          lastActivityMs: clock.nowMs(),
          isEnding: false,
          endWaiters: [],
        };
        state.sessions.add(session);
        updateGauges(model);
      }
      const owner = session;
      owner.nextSeq = item.seq + 1;
      owner.lastActivityMs = clock.nowMs();
      let settleEntry!: Pick<SequenceEntry, 'resolve' | 'reject'>;
      const promise = new Promise<SequenceResult>((resolve, rejectEntry) => {
        settleEntry = { resolve, reject: rejectEntry };
      });
      const entry: SequenceEntry = {
        requestId,
        item,
        priority: submitOptions.priority,
        enqueuedMs: clock.nowMs(),
        queuedSinceMs: clock.nowMs(),
        onDispatched: submitOptions.onDispatched,
        attempts: 0,
        isolated: false,
        state: 'queued',
        stateKind: undefined,
        promise,
        ...settleEntry,
        timer: undefined,
        detach: () => undefined,
      };
      entry.timer = clock.setTimeout(
        () => finish(owner, entry, { ok: false, error: errors.deadlineExceeded({ requestId, timeoutMs: submitOptions.timeoutMs }) }),
        submitOptions.timeoutMs,
      );
      const signal = submitOptions.signal;
      if (signal !== undefined) {
        // A running item is not recalled: its result still moves the session's state forward.
        const onAbort = () => {
          if (entry.state === 'queued') finish(owner, entry, { ok: false, error: errors.clientDisconnected({ requestId }) });
        };
        signal.addEventListener('abort', onAbort, { once: true });
        entry.detach = () => signal.removeEventListener('abort', onAbort);
      }
      owner.queued.push(entry);
      state.queued += 1;
      pump(model);
      return promise;
    },

    endSession(model, sessionId) {
      const state = models.get(model);
      if (state === undefined) return Promise.reject(errors.modelNotFound({ model }));
      const session = state.sessions.get(sessionId);
      if (session === undefined) return Promise.resolve();
      session.isEnding = true;
      const ended = new Promise<void>((resolve) => session.endWaiters.push(resolve));
      if (isSessionIdle(session)) forget(session, 'ended');
      return ended;
    },

    pump,
    queued: (model) => models.get(model)?.queued ?? 0,
    running: (model) => models.get(model)?.running ?? 0,
    sessions: (model) => models.get(model)?.sessions.size ?? 0,
    pending() {
      let total = 0;
      for (const state of models.values()) {
        total += state.queued + state.running;
        for (const s of state.sessions.values()) if (s.isEnding) total += 1;
      }
      return total;
    },
    close() {
      isClosing = true;
    },
    destroy() {
      isClosing = true;
      isDestroyed = true;
      for (const state of models.values()) {
        for (const session of [...state.sessions.values()]) {
          for (const entry of [...session.queued]) finish(session, entry, { ok: false, error: errors.shuttingDown() });
        }
        state.wake?.handle.cancel();
        state.wake = undefined;
        state.reaper?.cancel();
        state.reaper = undefined;
      }
    },
  };
}
