/**
 * The scheduler: per-model priority queues, dynamic batching by length bucket, least-pending
 * routing, admission control, deadlines, cancellation and one retry after an instance failure.
 * Batch work is handled here; sequence work (sessions) by the sequence batcher and streams by
 * the stream dispatcher, which share the instances' running load with it.
 *
 * A request moves queued → running → done. It is done exactly once: resolved, rejected, expired
 * or cancelled; a result arriving for a done request is dropped.
 */
import { randomUUID } from 'node:crypto';
import type { Clock, TimerHandle } from '../core/clock.js';
import { errors } from '../core/error-catalog.js';
import { ServiceError } from '../core/errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { canAdmit, decideAdmission, type AdmissionDecision } from './admission.js';
import { bucketOf, decideBatch, type BatchPolicy } from './dynamic-batcher.js';
import { unavailableError, type Executor } from './executor.js';
import type { BatchItemOutcome, CatalogEntry, TranscriptionRequest, TranscriptResult } from '../protocol/work.js';
import { selectInstance, type InstanceLoad, type RouteCandidate } from './router.js';
import { createSequenceBatcher, type SequenceItem, type SequenceResult } from './sequence-batcher/sequence-batcher.js';
import type { StreamCall } from './stream-call.js';
import { createStreamDispatcher, type Dispatch, type StreamOpenInput } from './stream-dispatcher.js';
import {
  batchMs,
  EMPTY_SERVICE_TIME,
  observeBatch,
  serviceTimeModel,
  type ServiceTimeEstimate,
  type ServiceTimeModel,
} from './service-time.js';

export const PRIORITIES = ['high', 'normal'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** A model's scheduling policy: its batching, and the limits of its sessions and streams. */
export interface ModelPolicy extends BatchPolicy {
  /** Batches sent to one instance of the model before it answers; 0 or absent: the scheduler's. */
  maxRunningBatchesPerInstance?: number;
  /**
   * A session with nothing queued or running is dropped after this long without items, in
   * milliseconds. @default 600000
   */
  sessionIdleTimeoutMs?: number;
  /** Most streams one instance runs at once. @default 4 */
  maxStreamsPerInstance?: number;
  /** Chunks an instance may send ahead of a stream's reader. @default 8 */
  streamCreditChunks?: number;
}

export const DEFAULT_SESSION_IDLE_TIMEOUT_MS = 600_000;
export const DEFAULT_MAX_STREAMS_PER_INSTANCE = 4;
export const DEFAULT_STREAM_CREDIT_CHUNKS = 8;

export interface SchedulerOptions {
  maxQueuedRequests: number;
  retryAfterMs: number;
  lengthBucketsMs: readonly number[];
  maxRunningBatchesPerInstance: number;
  models: Readonly<Record<string, ModelPolicy>>;
  /** Share of a deadline kept in reserve by admission, in percent. @default 20 */
  admissionMarginPercent?: number;
  /** Service time per batch assumed before a model's first batch, in milliseconds. @default 1000 */
  admissionPriorBatchMs?: number;
  /** Service time per audio second assumed before a model's first batch, in milliseconds. @default 500 */
  admissionPriorMsPerAudioSecond?: number;
  /** false: admission by queue length only, as before issue 16. @default true */
  admissionByPrediction?: boolean;
}

export const DEFAULT_ADMISSION_MARGIN_PERCENT = 20;
export const DEFAULT_ADMISSION_PRIOR_BATCH_MS = 1000;
export const DEFAULT_ADMISSION_PRIOR_MS_PER_AUDIO_SECOND = 500;

export interface SchedulerDeps {
  executor: Executor;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
}

export interface SubmitOptions {
  /** @default 'normal' */
  priority?: Priority;
  /** Aborting it (the client went away) drops the request if still queued. */
  signal?: AbortSignal;
  /** Time from submit to result before deadline_exceeded, in milliseconds. */
  timeoutMs: number;
  /** Id for logs; generated when absent. */
  requestId?: string;
  /**
   * `predict` judges the request by its predicted completion (deadline_unreachable); `queueLimitOnly`
   * skips the prediction, for the earlier pieces of a long recording whose last piece is then judged
   * with all of them ahead of it, so the call is judged as a whole. Queue limits apply either way.
   * @default 'predict'
   */
  admission?: 'predict' | 'queueLimitOnly';
  /**
   * Called each time an instance takes the work (again after a retry): which instance, and how long
   * the work was queued, in milliseconds. The request log reads it.
   */
  onDispatched?: (dispatch: Dispatch) => void;
}

export interface StreamOptions {
  /** @default 'normal' */
  priority?: Priority;
  /** Aborting it (the client went away) cancels the stream. */
  signal?: AbortSignal;
  /** Time from open to the stream's end before deadline_exceeded, in milliseconds. */
  timeoutMs: number;
  /**
   * Called each time an instance takes the work (again after a retry): which instance, and how long
   * the work was queued, in milliseconds. The request log reads it.
   */
  onDispatched?: (dispatch: Dispatch) => void;
}

/** Requests (batch requests and sequence items) and streams, queued and running. */
export interface ModelStats {
  queued: number;
  running: number;
  pending: number;
  /** Sessions the scheduler holds (sequence work). */
  sessions: number;
  streamsQueued: number;
  streamsRunning: number;
}

/** The sums over every model, and each model's own. */
export interface SchedulerStats extends ModelStats {
  models: Readonly<Record<string, ModelStats>>;
}

export interface Scheduler {
  /**
   * Queues one transcription request for a model (its canonical name). A request whose predicted
   * completion (the work queued ahead of it at its priority or higher, the instances' running work
   * and the model's measured service time) passes its deadline less the admission margin is
   * refused at once with deadline_unreachable, its retry delay the predicted drain time.
   * @throws model_not_found, queue_full, deadline_unreachable, no_ready_instance, deadline_exceeded, client_disconnected,
   *   shutting_down, and instance errors (instance_crashed after the retry, model_failed, invalid_audio...)
   */
  submit(model: string, request: TranscriptionRequest, options: SubmitOptions): Promise<TranscriptResult>;
  /**
   * Queues one item of a session (sequence work). Seq 0 creates the session; its items run one at
   * a time, in order, on the instance holding the session's state. Resubmitting the last finished
   * seq returns its outcome again; resubmitting a pending one returns the same promise.
   * @throws model_not_found, session_not_found, session_expired, sequence_gap, sequence_out_of_order,
   *   queue_full, no_ready_instance, deadline_exceeded, client_disconnected, shutting_down,
   *   state_too_large, and the instance's per-item errors
   * @example
   * const { output } = await scheduler.submitSequenceItem('diarizer',
   *   { sessionId, seq: 0, audio, isLast: false, options: {} }, { timeoutMs: 30_000 });
   */
  submitSequenceItem(model: string, item: SequenceItem, options: SubmitOptions): Promise<SequenceResult>;
  /**
   * Ends a session once its queued items finished: the scheduler forgets it and tells the
   * instance holding its state. Resolves at once for an unknown session.
   * @throws model_not_found
   */
  endSession(model: string, sessionId: string): Promise<void>;
  /**
   * Opens a stream (one request, many chunks). Errors arrive through the call: its iterator
   * throws and `done` rejects.
   * @throws model_not_found, queue_full, no_ready_instance, deadline_exceeded, client_disconnected,
   *   stream_cancelled, shutting_down, instance_crashed (after chunks were delivered, or after the retry)
   * @example
   * const call = scheduler.openStream('tts', { resource: 'alloy', params: { text }, body: new Uint8Array() }, { timeoutMs: 60_000 });
   * for await (const chunk of call) write(chunk.bytes);
   */
  openStream(model: string, input: StreamOpenInput, options: StreamOptions): StreamCall;
  /**
   * The model's catalogue (its voices): the union, by name, of what its instances declared when
   * they loaded. Empty for a model that declares none, or an unknown one.
   */
  catalog(model: string): readonly CatalogEntry[];
  stats(): SchedulerStats;
  /** Stops admitting; resolves once every pending request has finished. */
  close(): Promise<void>;
  /** Fails every queued request with shutting_down now. */
  destroy(): void;
}

interface Entry {
  requestId: string;
  model: string;
  request: TranscriptionRequest;
  bucket: number;
  /** Seconds of audio. */
  audioS: number;
  priority: number;
  /** First arrival: the batch's delay and its place in its priority count from it. */
  enqueuedMs: number;
  /** When it last entered the queue (its requeue, after a retry): its queue wait counts from it. */
  queuedSinceMs: number;
  timeoutMs: number;
  /** When admission predicted the request would finish (absolute milliseconds); undefined when not predicted. */
  predictedDoneMs: number | undefined;
  attempts: number;
  /** Retried after its instance crashed or wedged: it runs in a batch of its own (dynamic-batcher.ts). */
  isolated: boolean;
  state: 'queued' | 'running' | 'done';
  timer: TimerHandle;
  resolve: (result: TranscriptResult) => void;
  reject: (error: ServiceError) => void;
  detach: () => void;
  onDispatched: ((dispatch: Dispatch) => void) | undefined;
}

const RETRYABLE_CODES = new Set(['instance_crashed', 'instance_wedged']);

/** A batch on an instance, as admission sees it. */
interface BatchRun {
  model: string;
  dispatchedMs: number;
  audioS: number;
}

export function createScheduler(options: SchedulerOptions, deps: SchedulerDeps): Scheduler {
  const { executor, clock, log, metrics } = deps;
  const queues = new Map<string, Entry[]>(Object.keys(options.models).map((m) => [m, []]));
  const running = new Map<string, number>(Object.keys(options.models).map((m) => [m, 0]));
  const loads = new Map<string, InstanceLoad>();
  const wakeTimers = new Map<string, { atMs: number; handle: TimerHandle }>();
  let isClosing = false;
  let drainWaiters: (() => void)[] = [];
  // Admission's view: each model's learnt service time, each instance's batch work in dispatch
  // order, and when an instance last finished a batch (a batch sent while another ran starts then).
  const serviceTimes = new Map<string, ServiceTimeEstimate>(Object.keys(options.models).map((m) => [m, EMPTY_SERVICE_TIME]));
  const batchRuns = new Map<string, BatchRun[]>();
  // Instances running a retried request alone (see pump).
  const isolating = new Set<string>();
  const lastSettledMs = new Map<string, number>();
  const prior: ServiceTimeModel = {
    perBatchMs: options.admissionPriorBatchMs ?? DEFAULT_ADMISSION_PRIOR_BATCH_MS,
    perAudioSecondMs: options.admissionPriorMsPerAudioSecond ?? DEFAULT_ADMISSION_PRIOR_MS_PER_AUDIO_SECOND,
  };
  const marginPercent = options.admissionMarginPercent ?? DEFAULT_ADMISSION_MARGIN_PERCENT;
  const policyOf = (model: string) => {
    const p = options.models[model]!;
    return {
      ...p,
      sessionIdleTimeoutMs: p.sessionIdleTimeoutMs ?? DEFAULT_SESSION_IDLE_TIMEOUT_MS,
      maxStreamsPerInstance: p.maxStreamsPerInstance ?? DEFAULT_MAX_STREAMS_PER_INSTANCE,
      streamCreditChunks: p.streamCreditChunks ?? DEFAULT_STREAM_CREDIT_CHUNKS,
      maxRunningBatchesPerInstance: p.maxRunningBatchesPerInstance || options.maxRunningBatchesPerInstance,
    };
  };
  const policies = Object.fromEntries(Object.keys(options.models).map((m) => [m, policyOf(m)]));
  const sequences = createSequenceBatcher(
    { ...options, models: policies },
    {
      executor,
      clock,
      log,
      metrics,
      loads,
      onBatchDispatched: updateGauges,
      onBatchSettled: (model) => {
        pump(model);
        sequences.pump(model);
        streams.pump(model);
        updateGauges(model);
      },
      onFinished: () => {
        for (const model of queues.keys()) updateGauges(model);
        checkDrained();
      },
    },
  );
  const streams = createStreamDispatcher({ ...options, models: policies }, { executor, clock, log, metrics, onFinished: checkDrained });

  // Every model's series exist from the start, so scrapers see zeros rather than nothing.
  for (const model of queues.keys()) {
    updateGauges(model);
    metrics.batchSize.zero({ model });
    metrics.queueWait.zero({ model });
    metrics.retries.inc({ model }, 0);
    metrics.admissionPredictionError.zero({ model });
    for (const priority of PRIORITIES) metrics.admissionRejected.inc({ model, priority }, 0);
  }

  executor.observeQueue?.((model) => (queues.get(model)?.length ?? 0) + sequences.queued(model) + streams.queued(model));

  executor.onInstancesChanged(() => {
    for (const model of queues.keys()) {
      pump(model);
      sequences.pump(model);
      streams.pump(model);
    }
  });

  function updateGauges(model: string): void {
    metrics.requestsQueued.set({ model }, (queues.get(model)?.length ?? 0) + sequences.queued(model));
    metrics.requestsRunning.set({ model }, (running.get(model) ?? 0) + sequences.running(model));
  }

  function pendingTotal(): number {
    let total = sequences.pending() + streams.pending();
    for (const [model, q] of queues) total += q.length + (running.get(model) ?? 0);
    return total;
  }

  function checkDrained(): void {
    if (pendingTotal() !== 0) return;
    const waiters = drainWaiters;
    drainWaiters = [];
    for (const w of waiters) w();
  }

  function finish(entry: Entry, outcome: { result: TranscriptResult } | { error: ServiceError }): void {
    if (entry.state === 'done') return;
    const isQueued = entry.state === 'queued';
    entry.state = 'done';
    entry.timer.cancel();
    entry.detach();
    if (isQueued) {
      const q = queues.get(entry.model)!;
      const i = q.indexOf(entry);
      if (i !== -1) q.splice(i, 1);
    }
    if ('result' in outcome) {
      metrics.requests.inc({ model: entry.model, outcome: 'ok' });
      if (entry.predictedDoneMs !== undefined) {
        metrics.admissionPredictionError.observe({ model: entry.model }, (clock.nowMs() - entry.predictedDoneMs) / 1000);
      }
      entry.resolve(outcome.result);
    } else {
      metrics.requests.inc({ model: entry.model, outcome: outcome.error.code });
      entry.reject(outcome.error);
    }
    updateGauges(entry.model);
    checkDrained();
  }

  /**
   * Ends a request from outside its run: its deadline passed or its client went away. A queued one
   * may have held the queue (a retried request leads it while it waits for an idle instance), so
   * the queue is looked at again, rather than at the next batch's end.
   */
  function drop(entry: Entry, error: ServiceError): void {
    const isQueued = entry.state === 'queued';
    finish(entry, { error });
    if (isQueued) pump(entry.model);
  }

  function enqueue(entry: Entry, atFront: boolean): void {
    const q = queues.get(entry.model)!;
    // Keep priority order; within a priority, arrival order (a retried request goes first).
    let i = atFront ? q.findIndex((e) => e.priority >= entry.priority) : q.findIndex((e) => e.priority > entry.priority);
    if (i === -1) i = q.length;
    q.splice(i, 0, entry);
    entry.state = 'queued';
    entry.queuedSinceMs = clock.nowMs();
    updateGauges(entry.model);
  }

  function scheduleWake(model: string, atMs: number): void {
    const existing = wakeTimers.get(model);
    if (existing !== undefined && existing.atMs <= atMs) return;
    existing?.handle.cancel();
    const handle = clock.setTimeout(() => {
      wakeTimers.delete(model);
      pump(model);
    }, atMs - clock.nowMs());
    wakeTimers.set(model, { atMs, handle });
  }

  /** The model's ready instances and their loads; one running a retried request alone takes nothing else. */
  function candidatesFor(model: string): RouteCandidate[] {
    return executor
      .readyInstances(model)
      .filter((inst) => !isolating.has(inst.instanceId))
      .map((inst) => {
        const load = loads.get(inst.instanceId) ?? { runningBatches: 0, runningRequests: 0 };
        return { instanceId: inst.instanceId, ...load };
      });
  }

  function pump(model: string): void {
    const q = queues.get(model);
    const policy = policies[model];
    if (q === undefined || policy === undefined) return;
    if (q.length > 0 && executor.availability(model) === 'unavailable') {
      // No instance will come back soon (none configured, or a crash loop): fail fast, not at the deadline.
      for (const entry of [...q]) {
        finish(entry, { error: unavailableError(executor, model, options.retryAfterMs) });
      }
      return;
    }
    for (;;) {
      if (q.length === 0) return;
      const target = selectInstance(candidatesFor(model), policy.maxRunningBatchesPerInstance);
      if (target === undefined) return; // woken again when an instance frees up or becomes ready
      const idle = candidatesFor(model).filter((c) => c.runningBatches === 0).length;
      const decision = decideBatch(q, policy, clock.nowMs(), idle > 0);
      if (decision.kind === 'idle') return;
      if (decision.kind === 'wait') {
        scheduleWake(model, decision.untilMs);
        return;
      }
      if (decision.items[0]!.isolated) {
        // A retried request runs alone on an instance with nothing else running, and that instance
        // takes no other batch until it ends: if the request is what crashed its last instance, it
        // takes nothing down with it. It leads the queue, so it waits for an instance to drain.
        const free = selectInstance(candidatesFor(model), 1); // at most one batch: none running
        if (free === undefined) return; // woken when an instance frees up or becomes ready
        dispatch(model, free.instanceId, decision.items, true);
        continue;
      }
      // Spread before batching: a due batch is shared among idle instances, so requests never
      // wait in one instance's batch while another instance sits idle.
      const share = Math.ceil(decision.items.length / Math.max(1, idle));
      let rest = decision.items;
      let next: RouteCandidate | undefined = target;
      while (rest.length > 0 && next !== undefined) {
        dispatch(model, next.instanceId, rest.slice(0, share));
        rest = rest.slice(share);
        next = selectInstance(candidatesFor(model), policy.maxRunningBatchesPerInstance);
      }
    }
  }

  /**
   * A batch ended: its service time (from when the instance could start it) teaches the model's
   * estimate. A failed batch teaches nothing: a crash says nothing about the service time.
   */
  function settleRun(model: string, instanceId: string, run: BatchRun, isCompleted: boolean): void {
    const nowMs = clock.nowMs();
    const runs = batchRuns.get(instanceId);
    const i = runs?.indexOf(run) ?? -1;
    if (runs !== undefined && i !== -1) runs.splice(i, 1);
    if (runs?.length === 0) batchRuns.delete(instanceId);
    const startedMs = Math.max(run.dispatchedMs, lastSettledMs.get(instanceId) ?? 0);
    lastSettledMs.set(instanceId, nowMs);
    if (isCompleted) {
      serviceTimes.set(
        model,
        observeBatch(serviceTimes.get(model) ?? EMPTY_SERVICE_TIME, { audioS: run.audioS, durationMs: nowMs - startedMs }),
      );
    }
  }

  /**
   * When each ready instance of the model is predicted to finish the batch work it holds. An
   * instance whose batches belong to several models uses each model's estimate.
   * With no instance ready, a model waking from an idle stop (or booting) is free when the
   * executor predicts it ready (its last start's length): a request whose deadline the wake alone
   * would pass is refused at once, with a Retry-After for when the model should serve, instead of
   * being held and failed. NOTE: with no prediction (instances restarting, or no start timed yet),
   * one instance free now is assumed: a request is not refused for a gap the supervisor is already
   * closing, and a held request is bounded by the wake's own limit (wakeTimeoutMs).
   */
  function instanceFreeAt(model: string, nowMs: number): number[] {
    const ready = executor.readyInstances(model);
    if (ready.length === 0) return [Math.max(nowMs, executor.readyAtMs?.(model) ?? nowMs)];
    return ready.map((inst) => {
      let freeMs = nowMs;
      let previousEndMs = lastSettledMs.get(inst.instanceId) ?? 0;
      for (const run of batchRuns.get(inst.instanceId) ?? []) {
        const service = serviceTimeModel(serviceTimes.get(run.model) ?? EMPTY_SERVICE_TIME, prior);
        previousEndMs = Math.max(run.dispatchedMs, previousEndMs) + batchMs(service, run.audioS);
        freeMs = Math.max(freeMs, previousEndMs);
      }
      return freeMs;
    });
  }

  /**
   * Whether a request for the model would start at once on an idle instance: a ready one with no
   * batch running (not one whose batch merely runs past its prediction). With none ready, as
   * instanceFreeAt assumes: free now unless a timed wake says later.
   */
  function hasIdleInstance(model: string, nowMs: number): boolean {
    if (executor.readyInstances(model).length === 0) return instanceFreeAt(model, nowMs).some((t) => t <= nowMs);
    return candidatesFor(model).some((c) => c.runningBatches === 0);
  }

  function dispatch(model: string, instanceId: string, batch: Entry[], isIsolated = false): void {
    const q = queues.get(model)!;
    const nowMs = clock.nowMs();
    for (const entry of batch) {
      q.splice(q.indexOf(entry), 1);
      entry.state = 'running';
      entry.attempts += 1;
      metrics.queueWait.observe({ model }, (nowMs - entry.queuedSinceMs) / 1000);
      entry.onDispatched?.({ instanceId, queuedMs: nowMs - entry.queuedSinceMs });
    }
    running.set(model, (running.get(model) ?? 0) + batch.length);
    const load = loads.get(instanceId) ?? { runningBatches: 0, runningRequests: 0 };
    load.runningBatches += 1;
    load.runningRequests += batch.length;
    loads.set(instanceId, load);
    metrics.batchSize.observe({ model }, batch.length);
    updateGauges(model);
    const run: BatchRun = { model, dispatchedMs: nowMs, audioS: batch.reduce((sum, e) => sum + e.audioS, 0) };
    const runs = batchRuns.get(instanceId) ?? [];
    runs.push(run);
    batchRuns.set(instanceId, runs);
    const batchId = randomUUID();
    if (isIsolated) isolating.add(instanceId);
    log.debug({ model, instanceId, batchSize: batch.length, batchId }, 'batch dispatched');
    const settle = (outcomes: BatchItemOutcome[] | undefined, failure: ServiceError | undefined) => {
      if (isIsolated) isolating.delete(instanceId);
      settleRun(model, instanceId, run, outcomes !== undefined);
      load.runningBatches -= 1;
      load.runningRequests -= batch.length;
      running.set(model, (running.get(model) ?? 0) - batch.length);
      batch.forEach((entry, i) => {
        if (entry.state === 'done') return;
        const outcome = outcomes?.[i];
        if (outcome !== undefined && outcome.requestId === entry.requestId) {
          finish(entry, outcome.ok ? { result: outcome.result } : { error: outcome.error });
          return;
        }
        const error = failure ?? errors.internal({ cause: new Error('Batch result does not match its requests') });
        if (RETRYABLE_CODES.has(error.code) && entry.attempts < 2 && !isClosing) {
          metrics.retries.inc({ model });
          log.warn({ requestId: entry.requestId, model, instanceId, code: error.code }, 'request retried');
          entry.isolated = true;
          // Work given again: a model stopping for a sleep (its instance crashed in its close) wakes
          // for it once stopped, as for work queued when the sleep came, instead of failing it.
          executor.demand?.(model);
          enqueue(entry, true);
        } else {
          finish(entry, { error });
        }
      });
      updateGauges(model);
      pump(model);
      sequences.pump(model);
      streams.pump(model);
      // A batch whose requests all passed their deadlines finished none of them here: its end is
      // the last pending work a close may be waiting for.
      checkDrained();
    };
    executor
      .runBatch(instanceId, {
        batchId,
        requests: batch.map((e) => ({ requestId: e.requestId, ...e.request })),
      })
      .then(
        (outcomes) => settle(outcomes, undefined),
        (err: unknown) => settle(undefined, err instanceof ServiceError ? err : errors.internal({ cause: err })),
      );
  }

  return {
    submit(model, request, submitOptions) {
      const requestId = submitOptions.requestId ?? randomUUID();
      const q = queues.get(model);
      if (q === undefined) return Promise.reject(errors.modelNotFound({ model }));
      if (isClosing) return Promise.reject(errors.shuttingDown());
      if (submitOptions.signal?.aborted) return Promise.reject(errors.clientDisconnected({ requestId }));
      // A stopped model starts waking now, so the request is held for it rather than refused.
      executor.demand?.(model);
      if (!canAdmit(q.length, options.maxQueuedRequests)) {
        metrics.requests.inc({ model, outcome: 'queue_full' });
        return Promise.reject(errors.queueFull({ model, queued: q.length, retryAfterMs: options.retryAfterMs }));
      }
      if (executor.availability(model) === 'unavailable') {
        metrics.requests.inc({ model, outcome: 'no_ready_instance' });
        return Promise.reject(unavailableError(executor, model, options.retryAfterMs));
      }
      const priorityName = submitOptions.priority ?? 'normal';
      const priority = PRIORITIES.indexOf(priorityName);
      const audioS = request.audio.length / 16_000;
      const bucket = bucketOf(audioS * 1000, options.lengthBucketsMs);
      const nowMs = clock.nowMs();
      const policy = options.models[model]!;
      const decision: AdmissionDecision | undefined =
        submitOptions.admission === 'queueLimitOnly' || options.admissionByPrediction === false
          ? undefined
          : decideAdmission(
              {
                // The queue is kept in priority order: the work ahead at this priority or higher is a prefix.
                ahead: q.filter((e) => e.priority <= priority),
                request: { bucket, audioS, timeoutMs: submitOptions.timeoutMs },
                instanceFreeAtMs: instanceFreeAt(model, nowMs),
                hasIdleInstance: hasIdleInstance(model, nowMs),
                service: serviceTimeModel(serviceTimes.get(model) ?? EMPTY_SERVICE_TIME, prior),
                maxBatchSize: policy.maxBatchSize,
                maxQueueDelayMs: policy.maxQueueDelayMs,
                dispatchWhenIdle: policy.dispatchWhenIdle,
                marginPercent,
              },
              nowMs,
            );
      if (decision?.kind === 'reject') {
        metrics.requests.inc({ model, outcome: 'deadline_unreachable' });
        metrics.admissionRejected.inc({ model, priority: priorityName });
        log.debug(
          { requestId, model, predictedMs: decision.predictedDoneMs - nowMs, drainMs: decision.drainMs },
          'request refused by prediction',
        );
        return Promise.reject(
          errors.deadlineUnreachable({
            model,
            timeoutMs: submitOptions.timeoutMs,
            predictedMs: decision.predictedDoneMs - nowMs,
            drainMs: decision.drainMs,
          }),
        );
      }
      return new Promise<TranscriptResult>((resolve, reject) => {
        const entry: Entry = {
          requestId,
          model,
          request,
          bucket,
          audioS,
          priority,
          enqueuedMs: nowMs,
          queuedSinceMs: nowMs,
          timeoutMs: submitOptions.timeoutMs,
          predictedDoneMs: decision?.predictedDoneMs,
          attempts: 0,
          isolated: false,
          state: 'queued',
          timer: clock.setTimeout(
            () => drop(entry, errors.deadlineExceeded({ requestId, timeoutMs: submitOptions.timeoutMs })),
            submitOptions.timeoutMs,
          ),
          resolve,
          reject,
          detach: () => undefined,
          onDispatched: submitOptions.onDispatched,
        };
        const signal = submitOptions.signal;
        if (signal !== undefined) {
          const onAbort = () => drop(entry, errors.clientDisconnected({ requestId }));
          signal.addEventListener('abort', onAbort, { once: true });
          entry.detach = () => signal.removeEventListener('abort', onAbort);
        }
        enqueue(entry, false);
        pump(model);
      });
    },

    submitSequenceItem(model, item, submitOptions) {
      if (queues.has(model) && !isClosing) executor.demand?.(model);
      const result = sequences.submit(model, item, { ...submitOptions, priority: PRIORITIES.indexOf(submitOptions.priority ?? 'normal') });
      updateGauges(model);
      return result;
    },

    endSession: (model, sessionId) => sequences.endSession(model, sessionId),

    openStream(model, input, streamOptions) {
      if (queues.has(model) && !isClosing) executor.demand?.(model);
      return streams.open(model, input, { ...streamOptions, priority: PRIORITIES.indexOf(streamOptions.priority ?? 'normal') });
    },

    catalog: (model) => executor.catalog(model),

    stats() {
      const models: Record<string, ModelStats> = {};
      const total = { queued: 0, running: 0, pending: 0, sessions: 0, streamsQueued: 0, streamsRunning: 0 };
      for (const [model, q] of queues) {
        const queued = q.length + sequences.queued(model);
        const r = (running.get(model) ?? 0) + sequences.running(model);
        const stats: ModelStats = {
          queued,
          running: r,
          pending: queued + r,
          sessions: sequences.sessions(model),
          streamsQueued: streams.queued(model),
          streamsRunning: streams.running(model),
        };
        models[model] = Object.freeze(stats);
        for (const key of Object.keys(total) as (keyof ModelStats)[]) total[key] += stats[key];
      }
      return Object.freeze({ ...total, models: Object.freeze(models) });
    },

    close() {
      isClosing = true;
      sequences.close();
      streams.close();
      if (pendingTotal() === 0) return Promise.resolve();
      return new Promise<void>((resolve) => drainWaiters.push(resolve));
    },

    destroy() {
      isClosing = true;
      sequences.destroy();
      streams.destroy();
      for (const q of queues.values()) {
        for (const entry of [...q]) finish(entry, { error: errors.shuttingDown() });
      }
      for (const { handle } of wakeTimers.values()) handle.cancel();
      wakeTimers.clear();
    },
  };
}
