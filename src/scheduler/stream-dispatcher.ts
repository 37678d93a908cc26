/**
 * Stream dispatch: one request, many ordered chunks. A stream waits in its model's queue
 * (priority, then arrival) until an instance has fewer than maxStreamsPerInstance streams
 * running, then starts there (selectStreamInstance weighs running streams against where its resource is held).
 *
 * A stream moves queued → running → done, and is done exactly once: ended by the instance,
 * failed, expired at its deadline, or cancelled. Its instance slot is released only when the
 * executor ends it (a cancelled stream still occupies its slot until the instance lets it go).
 * When the instance dies before the first chunk, the stream is retried once on another instance; after a
 * chunk reached the caller it ends with the instance's error, as the caller cannot unsee chunks.
 */
import { randomUUID } from 'node:crypto';
import type { Clock, TimerHandle } from '../core/clock.js';
import { errors } from '../core/error-catalog.js';
import type { ServiceError } from '../core/errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { canAdmit } from './admission.js';
import { unavailableError, type Executor } from './executor.js';
import type { StreamControl, StreamEnd } from '../protocol/work.js';
import { selectStreamInstance, type StreamRouteCandidate } from './router.js';
import { StreamCallImpl, type StreamCall } from './stream-call.js';

export interface StreamOpenInput {
  /** Id for logs; generated when absent. */
  requestId?: string;
  /** The named resource the stream needs (a voice), or null. */
  resource: string | null;
  params: Readonly<Record<string, unknown>>;
  body: Uint8Array;
}

export interface StreamOpenOptions {
  /** Index in PRIORITIES (0 first). */
  priority: number;
  /** Aborting it cancels the stream. */
  signal?: AbortSignal;
  /** Time from open to the stream's end before deadline_exceeded, in milliseconds. */
  timeoutMs: number;
  /** Called each time an instance takes the stream (again after a retry). */
  onDispatched?: (dispatch: Dispatch) => void;
}

/** An instance took a queued request or stream, after it was queued for queuedMs milliseconds. */
export interface Dispatch {
  instanceId: string;
  queuedMs: number;
}

export interface StreamPolicy {
  maxStreamsPerInstance: number;
  streamCreditChunks: number;
}

export interface StreamDispatcherOptions {
  maxQueuedRequests: number;
  retryAfterMs: number;
  models: Readonly<Record<string, StreamPolicy>>;
}

export interface StreamDispatcherDeps {
  executor: Executor;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** Called after a stream finished; the scheduler checks whether it has drained. */
  onFinished: () => void;
}

export interface StreamDispatcher {
  open(model: string, input: StreamOpenInput, options: StreamOpenOptions): StreamCall;
  pump(model: string): void;
  queued(model: string): number;
  running(model: string): number;
  /** Streams not yet ended by their instance, cancelled ones included. */
  pending(): number;
  /** Stops admitting; fails queued streams with shutting_down. */
  destroy(): void;
  close(): void;
}

interface Attempt {
  instanceId: string;
  control: StreamControl | undefined;
  /** The executor ended this attempt (its slot is free). */
  isEnded: boolean;
}

interface StreamEntry {
  streamId: string;
  requestId: string;
  model: string;
  input: StreamOpenInput;
  priority: number;
  /** When it last entered the queue (its requeue, after a retry): its queued time counts from it. */
  queuedSinceMs: number;
  attempts: number;
  /** Chunks delivered to the caller across attempts. */
  deliveredChunks: number;
  state: 'queued' | 'running' | 'done';
  attempt: Attempt | undefined;
  /** The instance a retried stream failed on: not chosen again, though it may still look ready. */
  failedInstanceId: string | undefined;
  call: StreamCallImpl;
  timer: TimerHandle | undefined;
  detach: () => void;
  onDispatched: ((dispatch: Dispatch) => void) | undefined;
}

const RETRYABLE_CODES = new Set(['instance_crashed', 'instance_wedged']);

export function createStreamDispatcher(options: StreamDispatcherOptions, deps: StreamDispatcherDeps): StreamDispatcher {
  const { executor, clock, log, metrics } = deps;
  const queues = new Map<string, StreamEntry[]>(Object.keys(options.models).map((m) => [m, []]));
  /** Running attempts by model (including cancelled ones not yet ended by their instance). */
  const runningByModel = new Map<string, number>(Object.keys(options.models).map((m) => [m, 0]));
  const runningByInstance = new Map<string, number>();
  let isClosing = false;
  let pumping = new Set<string>();

  for (const model of queues.keys()) {
    updateGauges(model);
    metrics.streams.inc({ model, outcome: 'ok' }, 0);
  }

  function updateGauges(model: string): void {
    metrics.streamsQueued.set({ model }, queues.get(model)?.length ?? 0);
    metrics.streamsRunning.set({ model }, runningByModel.get(model) ?? 0);
  }

  function enqueue(entry: StreamEntry, isRetry: boolean): void {
    const q = queues.get(entry.model)!;
    let i = isRetry ? q.findIndex((e) => e.priority >= entry.priority) : q.findIndex((e) => e.priority > entry.priority);
    if (i === -1) i = q.length;
    q.splice(i, 0, entry);
    entry.state = 'queued';
    entry.queuedSinceMs = clock.nowMs();
    updateGauges(entry.model);
  }

  function finish(
    entry: StreamEntry,
    ending: { ok: true; chunks: number; usage: Readonly<Record<string, unknown>> } | { ok: false; error: ServiceError },
  ): void {
    if (entry.state === 'done') return;
    const isQueued = entry.state === 'queued';
    entry.state = 'done';
    entry.timer?.cancel();
    entry.detach();
    if (isQueued) {
      const q = queues.get(entry.model)!;
      const i = q.indexOf(entry);
      if (i !== -1) q.splice(i, 1);
    }
    // A running stream that ends early (cancel, deadline) is stopped at its instance too.
    const attempt = entry.attempt;
    if (!ending.ok && attempt !== undefined && !attempt.isEnded) attempt.control?.cancel();
    metrics.streams.inc({ model: entry.model, outcome: ending.ok ? 'ok' : ending.error.code });
    entry.call.end(ending.ok ? { ok: true, summary: { chunks: ending.chunks, usage: ending.usage } } : ending);
    updateGauges(entry.model);
    deps.onFinished();
  }

  function candidatesFor(model: string): StreamRouteCandidate[] {
    return executor.readyInstances(model).map((inst) => ({
      instanceId: inst.instanceId,
      resources: inst.resources,
      runningStreams: runningByInstance.get(inst.instanceId) ?? 0,
    }));
  }

  function pump(model: string): void {
    const q = queues.get(model);
    const policy = options.models[model];
    if (q === undefined || policy === undefined) return;
    // Starting a stream may end it at once (its instance just died), which pumps again: the
    // outer loop picks that up instead of recursing.
    if (pumping.has(model)) return;
    pumping.add(model);
    try {
      if (q.length > 0 && executor.availability(model) === 'unavailable') {
        for (const entry of [...q]) finish(entry, { ok: false, error: unavailableError(executor, model, options.retryAfterMs) });
        return;
      }
      for (;;) {
        const head = q[0];
        if (head === undefined) return;
        const candidates = candidatesFor(model).filter((c) => c.instanceId !== head.failedInstanceId);
        const target = selectStreamInstance(candidates, {
          resource: head.input.resource ?? undefined,
          maxStreamsPerInstance: policy.maxStreamsPerInstance,
        });
        if (target === undefined) return; // pumped again when a stream ends or instances change
        start(head, target.instanceId, policy);
      }
    } finally {
      pumping.delete(model);
    }
  }

  function start(entry: StreamEntry, instanceId: string, policy: StreamPolicy): void {
    const q = queues.get(entry.model)!;
    q.splice(q.indexOf(entry), 1);
    entry.state = 'running';
    entry.attempts += 1;
    const attempt: Attempt = { instanceId, control: undefined, isEnded: false };
    entry.attempt = attempt;
    runningByInstance.set(instanceId, (runningByInstance.get(instanceId) ?? 0) + 1);
    runningByModel.set(entry.model, (runningByModel.get(entry.model) ?? 0) + 1);
    updateGauges(entry.model);
    log.debug({ requestId: entry.requestId, model: entry.model, instanceId }, 'stream started');
    entry.onDispatched?.({ instanceId, queuedMs: clock.nowMs() - entry.queuedSinceMs });
    attempt.control = executor.openStream(
      instanceId,
      {
        streamId: entry.streamId,
        requestId: entry.requestId,
        resource: entry.input.resource,
        params: entry.input.params,
        body: entry.input.body,
        creditChunks: policy.streamCreditChunks,
      },
      {
        chunk: (chunk) => {
          if (attempt.isEnded || entry.attempt !== attempt || entry.state !== 'running') return;
          entry.deliveredChunks += 1;
          entry.call.push(chunk);
        },
        end: (end) => onEnd(entry, attempt, end),
      },
    );
  }

  function onEnd(entry: StreamEntry, attempt: Attempt, end: StreamEnd): void {
    if (attempt.isEnded) return;
    attempt.isEnded = true;
    runningByInstance.set(attempt.instanceId, (runningByInstance.get(attempt.instanceId) ?? 1) - 1);
    runningByModel.set(entry.model, (runningByModel.get(entry.model) ?? 1) - 1);
    updateGauges(entry.model);
    if (entry.state === 'running' && entry.attempt === attempt) {
      if (end.ok) {
        finish(entry, end);
      } else if (RETRYABLE_CODES.has(end.error.code) && entry.deliveredChunks === 0 && entry.attempts < 2 && !isClosing) {
        metrics.retries.inc({ model: entry.model });
        log.warn(
          { requestId: entry.requestId, model: entry.model, instanceId: attempt.instanceId, code: end.error.code },
          'stream retried',
        );
        entry.attempt = undefined;
        entry.failedInstanceId = attempt.instanceId;
        // Work given again: a model stopping for a sleep wakes for it once stopped, instead of failing it.
        executor.demand?.(entry.model);
        enqueue(entry, true);
      } else {
        finish(entry, end);
      }
    } else {
      // A cancelled or expired stream just released its slot.
      deps.onFinished();
    }
    pump(entry.model);
  }

  return {
    open(model, input, openOptions) {
      const requestId = input.requestId ?? randomUUID();
      const entry: StreamEntry = {
        streamId: randomUUID(),
        requestId,
        model,
        input,
        priority: openOptions.priority,
        queuedSinceMs: clock.nowMs(),
        attempts: 0,
        deliveredChunks: 0,
        state: 'queued',
        attempt: undefined,
        failedInstanceId: undefined,
        call: new StreamCallImpl({
          onTake: () => {
            const attempt = entry.attempt;
            if (entry.state === 'running' && attempt !== undefined && !attempt.isEnded) attempt.control?.grant(1);
          },
          onCancel: () => finish(entry, { ok: false, error: errors.streamCancelled({ requestId }) }),
        }),
        timer: undefined,
        detach: () => undefined,
        onDispatched: openOptions.onDispatched,
      };
      const refuse = (error: ServiceError): StreamCall => {
        entry.state = 'done';
        metrics.streams.inc({ model, outcome: error.code });
        entry.call.end({ ok: false, error });
        return entry.call;
      };
      const q = queues.get(model);
      if (q === undefined) return refuse(errors.modelNotFound({ model }));
      if (isClosing) return refuse(errors.shuttingDown());
      if (openOptions.signal?.aborted === true) return refuse(errors.clientDisconnected({ requestId }));
      if (!canAdmit(q.length, options.maxQueuedRequests)) {
        return refuse(errors.queueFull({ model, queued: q.length, retryAfterMs: options.retryAfterMs }));
      }
      if (executor.availability(model) === 'unavailable') {
        return refuse(unavailableError(executor, model, options.retryAfterMs));
      }
      entry.timer = clock.setTimeout(
        () => finish(entry, { ok: false, error: errors.deadlineExceeded({ requestId, timeoutMs: openOptions.timeoutMs }) }),
        openOptions.timeoutMs,
      );
      const signal = openOptions.signal;
      if (signal !== undefined) {
        const onAbort = () => finish(entry, { ok: false, error: errors.clientDisconnected({ requestId }) });
        signal.addEventListener('abort', onAbort, { once: true });
        entry.detach = () => signal.removeEventListener('abort', onAbort);
      }
      enqueue(entry, false);
      pump(model);
      return entry.call;
    },
    pump,
    queued: (model) => queues.get(model)?.length ?? 0,
    running: (model) => runningByModel.get(model) ?? 0,
    pending() {
      let total = 0;
      for (const [model, q] of queues) total += q.length + (runningByModel.get(model) ?? 0);
      return total;
    },
    close() {
      isClosing = true;
    },
    destroy() {
      isClosing = true;
      for (const q of queues.values()) {
        for (const entry of [...q]) finish(entry, { ok: false, error: errors.shuttingDown() });
      }
      pumping = new Set();
    },
  };
}
