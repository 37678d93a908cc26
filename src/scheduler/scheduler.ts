/**
 * The scheduler: per-model priority queues, dynamic batching by length bucket, least-pending
 * routing, admission control, deadlines, cancellation and one retry after an instance failure.
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
import { canAdmit } from './admission.js';
import { bucketOf, decideBatch, type BatchPolicy } from './dynamic-batcher.js';
import type { BatchItemOutcome, Executor, TranscriptionRequest, TranscriptResult } from './executor.js';
import { selectInstance, type RouteCandidate } from './router.js';

export const PRIORITIES = ['high', 'normal'] as const;
export type Priority = (typeof PRIORITIES)[number];

export interface SchedulerOptions {
  maxQueuedRequests: number;
  retryAfterMs: number;
  lengthBucketsMs: readonly number[];
  maxRunningBatchesPerInstance: number;
  models: Readonly<Record<string, BatchPolicy>>;
}

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
}

export interface ModelStats {
  queued: number;
  running: number;
  pending: number;
}

export interface SchedulerStats {
  queued: number;
  running: number;
  pending: number;
  models: Readonly<Record<string, ModelStats>>;
}

export interface Scheduler {
  /**
   * Queues one transcription request for a model (its canonical name).
   * @throws model_not_found, queue_full, no_ready_instance, deadline_exceeded, client_disconnected,
   *   shutting_down, and instance errors (instance_crashed after the retry, model_failed, invalid_audio...)
   */
  submit(model: string, request: TranscriptionRequest, options: SubmitOptions): Promise<TranscriptResult>;
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
  priority: number;
  enqueuedMs: number;
  timeoutMs: number;
  attempts: number;
  state: 'queued' | 'running' | 'done';
  timer: TimerHandle;
  resolve: (result: TranscriptResult) => void;
  reject: (error: ServiceError) => void;
  detach: () => void;
}

interface InstanceLoad {
  runningBatches: number;
  runningRequests: number;
}

const RETRYABLE_CODES = new Set(['instance_crashed', 'instance_wedged']);

export function createScheduler(options: SchedulerOptions, deps: SchedulerDeps): Scheduler {
  const { executor, clock, log, metrics } = deps;
  const queues = new Map<string, Entry[]>(Object.keys(options.models).map((m) => [m, []]));
  const running = new Map<string, number>(Object.keys(options.models).map((m) => [m, 0]));
  const loads = new Map<string, InstanceLoad>();
  const wakeTimers = new Map<string, { atMs: number; handle: TimerHandle }>();
  let isClosing = false;
  let drainWaiters: (() => void)[] = [];

  // Every model's series exist from the start, so scrapers see zeros rather than nothing.
  for (const model of queues.keys()) {
    updateGauges(model);
    metrics.batchSize.zero({ model });
    metrics.queueWait.zero({ model });
    metrics.retries.inc({ model }, 0);
  }

  executor.onInstancesChanged(() => {
    for (const model of queues.keys()) pump(model);
  });

  function updateGauges(model: string): void {
    metrics.requestsQueued.set({ model }, queues.get(model)?.length ?? 0);
    metrics.requestsRunning.set({ model }, running.get(model) ?? 0);
  }

  function pendingTotal(): number {
    let total = 0;
    for (const [model, q] of queues) total += q.length + (running.get(model) ?? 0);
    return total;
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
      entry.resolve(outcome.result);
    } else {
      metrics.requests.inc({ model: entry.model, outcome: outcome.error.code });
      entry.reject(outcome.error);
    }
    updateGauges(entry.model);
    if (pendingTotal() === 0) {
      const waiters = drainWaiters;
      drainWaiters = [];
      for (const w of waiters) w();
    }
  }

  function enqueue(entry: Entry, atFront: boolean): void {
    const q = queues.get(entry.model)!;
    // Keep priority order; within a priority, arrival order (a retried request goes first).
    let i = atFront ? q.findIndex((e) => e.priority >= entry.priority) : q.findIndex((e) => e.priority > entry.priority);
    if (i === -1) i = q.length;
    q.splice(i, 0, entry);
    entry.state = 'queued';
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

  function candidatesFor(model: string): RouteCandidate[] {
    return executor.readyInstances(model).map((inst) => {
      const load = loads.get(inst.instanceId) ?? { runningBatches: 0, runningRequests: 0 };
      return { instanceId: inst.instanceId, ...load };
    });
  }

  function pump(model: string): void {
    const q = queues.get(model);
    const policy = options.models[model];
    if (q === undefined || policy === undefined) return;
    if (q.length > 0 && executor.availability(model) === 'unavailable') {
      // No instance will come back soon (none configured, or a crash loop): fail fast, not at the deadline.
      for (const entry of [...q]) {
        finish(entry, { error: errors.noReadyInstance({ model, retryAfterMs: options.retryAfterMs }) });
      }
      return;
    }
    for (;;) {
      if (q.length === 0) return;
      const target = selectInstance(candidatesFor(model), options.maxRunningBatchesPerInstance);
      if (target === undefined) return; // woken again when an instance frees up or becomes ready
      const idle = candidatesFor(model).filter((c) => c.runningBatches === 0).length;
      const decision = decideBatch(q, policy, clock.nowMs(), idle > 0);
      if (decision.kind === 'idle') return;
      if (decision.kind === 'wait') {
        scheduleWake(model, decision.untilMs);
        return;
      }
      // Spread before batching: a due batch is shared among idle instances, so requests never
      // wait in one instance's batch while another instance sits idle.
      const share = Math.ceil(decision.items.length / Math.max(1, idle));
      let rest = decision.items;
      let next: RouteCandidate | undefined = target;
      while (rest.length > 0 && next !== undefined) {
        dispatch(model, next.instanceId, rest.slice(0, share));
        rest = rest.slice(share);
        next = selectInstance(candidatesFor(model), options.maxRunningBatchesPerInstance);
      }
    }
  }

  function dispatch(model: string, instanceId: string, batch: Entry[]): void {
    const q = queues.get(model)!;
    const nowMs = clock.nowMs();
    for (const entry of batch) {
      q.splice(q.indexOf(entry), 1);
      entry.state = 'running';
      entry.attempts += 1;
      metrics.queueWait.observe({ model }, (nowMs - entry.enqueuedMs) / 1000);
    }
    running.set(model, (running.get(model) ?? 0) + batch.length);
    const load = loads.get(instanceId) ?? { runningBatches: 0, runningRequests: 0 };
    load.runningBatches += 1;
    load.runningRequests += batch.length;
    loads.set(instanceId, load);
    metrics.batchSize.observe({ model }, batch.length);
    updateGauges(model);
    const batchId = randomUUID();
    log.debug({ model, instanceId, batchSize: batch.length, batchId }, 'batch dispatched');
    const settle = (outcomes: BatchItemOutcome[] | undefined, failure: ServiceError | undefined) => {
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
          enqueue(entry, true);
        } else {
          finish(entry, { error });
        }
      });
      updateGauges(model);
      pump(model);
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
      if (!canAdmit(q.length, options.maxQueuedRequests)) {
        metrics.requests.inc({ model, outcome: 'queue_full' });
        return Promise.reject(errors.queueFull({ model, queued: q.length, retryAfterMs: options.retryAfterMs }));
      }
      if (executor.availability(model) === 'unavailable') {
        metrics.requests.inc({ model, outcome: 'no_ready_instance' });
        return Promise.reject(errors.noReadyInstance({ model, retryAfterMs: options.retryAfterMs }));
      }
      return new Promise<TranscriptResult>((resolve, reject) => {
        const priority = PRIORITIES.indexOf(submitOptions.priority ?? 'normal');
        const entry: Entry = {
          requestId,
          model,
          request,
          bucket: bucketOf((request.audio.length / 16_000) * 1000, options.lengthBucketsMs),
          priority,
          enqueuedMs: clock.nowMs(),
          timeoutMs: submitOptions.timeoutMs,
          attempts: 0,
          state: 'queued',
          timer: clock.setTimeout(
            () => finish(entry, { error: errors.deadlineExceeded({ requestId, timeoutMs: submitOptions.timeoutMs }) }),
            submitOptions.timeoutMs,
          ),
          resolve,
          reject,
          detach: () => undefined,
        };
        const signal = submitOptions.signal;
        if (signal !== undefined) {
          const onAbort = () => finish(entry, { error: errors.clientDisconnected({ requestId }) });
          signal.addEventListener('abort', onAbort, { once: true });
          entry.detach = () => signal.removeEventListener('abort', onAbort);
        }
        enqueue(entry, false);
        pump(model);
      });
    },

    stats() {
      const models: Record<string, ModelStats> = {};
      let queued = 0;
      let runningTotal = 0;
      for (const [model, q] of queues) {
        const r = running.get(model) ?? 0;
        models[model] = Object.freeze({ queued: q.length, running: r, pending: q.length + r });
        queued += q.length;
        runningTotal += r;
      }
      return Object.freeze({ queued, running: runningTotal, pending: queued + runningTotal, models: Object.freeze(models) });
    },

    close() {
      isClosing = true;
      if (pendingTotal() === 0) return Promise.resolve();
      return new Promise<void>((resolve) => drainWaiters.push(resolve));
    },

    destroy() {
      isClosing = true;
      for (const q of queues.values()) {
        for (const entry of [...q]) finish(entry, { error: errors.shuttingDown() });
      }
      for (const { handle } of wakeTimers.values()) handle.cancel();
      wakeTimers.clear();
    },
  };
}
