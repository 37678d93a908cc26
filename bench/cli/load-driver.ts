/**
 * Drives one step of load against a Workload and records every request's outcome.
 *
 * - Closed loop: `concurrency` client loops, each sending its next request as soon as the last
 *   one finished. Throughput is what the server sustains at that many outstanding requests.
 * - Open loop: requests arrive as a Poisson process at `rateRps`, whatever the server does, so a
 *   rate above capacity shows queueing collapse. Arrivals that would exceed `maxOutstanding`
 *   requests in flight are dropped and counted, never queued in the client (that would turn the
 *   open loop back into a closed one).
 *
 * Every step is bounded: no request starts after the window ends or once `maxRequests` were
 * issued, every request is aborted after `timeoutMs`, and the run's abort signal aborts them all.
 * The step ends when the last request has finished.
 */
import type { Clock } from '../../src/core/clock.js';
import { invariant } from '../../src/core/invariant.js';
import type { LoadMode } from './ramp-plan.js';
import { RequestAbort, type RequestOutcome, type Workload } from './workload.js';

export interface StepOptions {
  mode: LoadMode;
  /** Concurrency (closed loop) or offered requests per second (open loop). */
  level: number;
  /** Time before the measured window; requests run but are not measured. */
  warmupMs: number;
  /** The measured window. */
  durationMs: number;
  /** Per-request timeout. */
  timeoutMs: number;
  /** No request starts once this many were issued in the step. */
  maxRequests: number;
  /** Open loop only: the most requests in flight at once; arrivals beyond it are dropped. */
  maxOutstanding: number;
  /** Open loop only: seed of the arrival process, so that a run can be repeated exactly. */
  seed: number;
  /**
   * Requests still in flight this long after the window are aborted ('abandoned'): they finish
   * after it and are not measured anyway, and against a server far over its capacity waiting for
   * them to drain can take longer than the step. Undefined: wait for every one.
   */
  abandonAfterMs?: number;
}

export interface StepDeps {
  workload: Workload;
  clock: Clock;
  /** Aborting it interrupts the step: no new requests, in-flight ones are aborted. */
  signal?: AbortSignal;
}

/** Live counters, read by the progress line. */
export interface StepProgress {
  elapsedMs: number;
  issued: number;
  completed: number;
  ok: number;
  errors: number;
  inFlight: number;
  droppedArrivals: number;
}

export interface StepSamples {
  startMs: number;
  /** The measured window: requests that finish inside it are measured. It ends early on interruption. */
  windowStartMs: number;
  windowEndMs: number;
  /** When the last request finished. */
  endMs: number;
  /** Every request of the step, warmup and drain included, in completion order. */
  outcomes: RequestOutcome[];
  issued: number;
  droppedArrivals: number;
  isInterrupted: boolean;
}

export interface RunningStep {
  progress(): StepProgress;
  readonly done: Promise<StepSamples>;
}

export function startStep(options: StepOptions, deps: StepDeps): RunningStep {
  invariant(options.level > 0, 'load level must be positive');
  const { clock, workload } = deps;
  const startMs = clock.nowMs();
  const windowStartMs = startMs + options.warmupMs;
  const windowEndMs = windowStartMs + options.durationMs;
  const outcomes: RequestOutcome[] = [];
  let issued = 0;
  let ok = 0;
  let inFlight = 0;
  let droppedArrivals = 0;

  // One listener on the run's signal aborts every request in flight: a listener per request
  // would pile up hundreds on one signal at high concurrency.
  const controllers = new Set<AbortController>();
  let interruptedAtMs: number | undefined;
  const onInterrupt = (): void => {
    interruptedAtMs = clock.nowMs();
    for (const controller of controllers) controller.abort(new RequestAbort('interrupted'));
  };
  deps.signal?.addEventListener('abort', onInterrupt, { once: true });

  const isStopped = (): boolean => deps.signal?.aborted === true || issued >= options.maxRequests || clock.nowMs() >= windowEndMs;

  async function runOne(scheduledMs?: number): Promise<void> {
    const sequence = issued;
    issued += 1;
    inFlight += 1;
    const controller = new AbortController();
    const timer = clock.setTimeout(() => controller.abort(new RequestAbort('timeout')), options.timeoutMs);
    if (deps.signal?.aborted === true) controller.abort(new RequestAbort('interrupted'));
    controllers.add(controller);
    try {
      const outcome = await workload.makeRequest({ sequence, signal: controller.signal, clock });
      // NOTE: in the open loop, latency counts from the scheduled arrival, not from when the
      // client got round to sending: a late client must not hide queueing (coordinated omission).
      const measured = scheduledMs === undefined ? outcome : { ...outcome, startMs: Math.min(outcome.startMs, scheduledMs) };
      outcomes.push(measured);
      if (measured.errorCode === undefined) ok += 1;
    } finally {
      timer.cancel();
      controllers.delete(controller);
      inFlight -= 1;
    }
  }

  const abandonTimer =
    options.abandonAfterMs === undefined
      ? undefined
      : clock.setTimeout(
          () => {
            for (const controller of controllers) controller.abort(new RequestAbort('abandoned'));
          },
          windowEndMs + options.abandonAfterMs - startMs,
        );

  const done = options.mode === 'closed' ? runClosed() : runOpen();

  async function runClosed(): Promise<StepSamples> {
    const loop = async (): Promise<void> => {
      while (!isStopped()) await runOne();
    };
    await Promise.all(Array.from({ length: options.level }, loop));
    return finish();
  }

  async function runOpen(): Promise<StepSamples> {
    const random = createSeededRandom(options.seed);
    const meanGapMs = 1000 / options.level;
    const running = new Set<Promise<void>>();
    let nextArrivalMs = startMs + exponential(random, meanGapMs);
    await new Promise<void>((resolve) => {
      const stopArrivals = (): void => {
        pending?.cancel();
        resolve();
      };
      let pending: { cancel(): void } | undefined;
      const arrive = (): void => {
        pending = undefined;
        // A late timer fires every arrival that is already due, so the offered rate holds.
        while (nextArrivalMs <= clock.nowMs() && nextArrivalMs < windowEndMs && !isStopped()) {
          if (inFlight >= options.maxOutstanding) {
            droppedArrivals += 1;
          } else {
            const request = runOne(nextArrivalMs);
            running.add(request);
            void request.finally(() => running.delete(request));
          }
          nextArrivalMs += exponential(random, meanGapMs);
        }
        if (nextArrivalMs >= windowEndMs || isStopped()) {
          deps.signal?.removeEventListener('abort', stopArrivals);
          resolve();
          return;
        }
        pending = clock.setTimeout(arrive, nextArrivalMs - clock.nowMs());
      };
      if (deps.signal?.aborted === true) {
        resolve();
        return;
      }
      deps.signal?.addEventListener('abort', stopArrivals, { once: true });
      arrive();
    });
    while (running.size > 0) await Promise.all(running);
    return finish();
  }

  function finish(): StepSamples {
    abandonTimer?.cancel();
    deps.signal?.removeEventListener('abort', onInterrupt);
    if (deps.signal?.aborted === true) interruptedAtMs ??= startMs;
    return {
      startMs,
      windowStartMs,
      // An interrupted step is measured up to the interruption only.
      windowEndMs: interruptedAtMs === undefined ? windowEndMs : Math.max(windowStartMs, Math.min(windowEndMs, interruptedAtMs)),
      endMs: clock.nowMs(),
      outcomes,
      issued,
      droppedArrivals,
      isInterrupted: deps.signal?.aborted === true,
    };
  }

  return {
    done,
    progress: () => ({
      elapsedMs: clock.nowMs() - startMs,
      issued,
      completed: outcomes.length,
      ok,
      errors: outcomes.length - ok,
      inFlight,
      droppedArrivals,
    }),
  };
}

function exponential(random: () => number, meanMs: number): number {
  // 1 - u is in (0, 1], so the log is finite.
  return -Math.log(1 - random()) * meanMs;
}

/** mulberry32: a small, fast, seedable PRNG; numbers in [0, 1). */
export function createSeededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
