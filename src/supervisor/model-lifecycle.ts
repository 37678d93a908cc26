/**
 * Model lifecycle: whether a model's instances run at all. A model is
 * - `starting`: its instances are being started (by a wake, or at boot: until one is ready, they
 *   are restarted when they fail, a crash loop included), or restarted with none up (every
 *   instance of the ready model went into a crash loop);
 * - `ready`: an instance became ready; its instances are supervised (restarted when they end),
 *   serving when one is ready; the model stays ready while some restart, until all are in a crash
 *   loop;
 * - `stopping`: its instances are being closed (idle stop, or a sleep);
 * - `stopped`: no instance runs and none is restarted; its memory is freed.
 *
 * Transitions: starting → ready (the first instance of the wake or the boot became ready; when the
 * boot started none, or every instance went into a crash loop, the first of their restarts) or →
 * stopping (the wake failed or timed out, or a sleep; while its instances are restarted with none
 * up, also idle for idleStopAfterMs, as a ready model); ready → starting (every instance is in a
 * crash loop; not at each restart of one, which leaves the model ready) or → stopping (idle for
 * idleStopAfterMs, or a sleep); stopping → stopped, then → starting again at once when work is
 * waiting for the model (a request arrived meanwhile, work was queued when the sleep came, or
 * running work was retried after its instance ended in the stop); stopped → starting (a request or
 * a wake). A failed wake is remembered until the next demand, which wakes again: a model is never
 * locked out by one failure. A sleep before the boot stands: the boot leaves that model stopped.
 *
 * While its instances are restarted with none up (after a boot that started none, or a crash loop
 * of all), the model is starting but no wake is under way: a wake() answers model_wake_failed at
 * once (the restarts follow their backoff, with no deadline to wait for), a request wakes nothing
 * and is not counted as held (its call gets no_ready_instance at once while every instance is in a
 * crash loop), the model keeps the server unready (isOnDemand is false, as for a ready model), and
 * no ready time is predicted.
 *
 * The idle check is a timer on the injected clock, armed for lastDemand + idleStopAfterMs; running
 * and queued work both count as activity.
 */
import type { Clock, TimerHandle } from '../core/clock.js';
import { errors } from '../core/error-catalog.js';
import type { ServiceError } from '../core/errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';

export const MODEL_STATES = ['stopped', 'starting', 'ready', 'stopping'] as const;
export type ModelState = (typeof MODEL_STATES)[number];

/**
 * How a wake() ended: an instance is ready, or why the model does not serve (the wake failed, timed
 * out or was refused, the boot it waited for started no instance, a sleep stopped it, or the
 * lifecycle closed).
 */
export type WakeEnd = { isReady: true } | { isReady: false; error: ServiceError };

export interface LifecyclePolicy {
  /** Stop after this long without requests, in milliseconds; 0 never stops. */
  idleStopAfterMs: number;
  /** Longest a wake may take before it fails with model_wake_timeout, in milliseconds. */
  wakeTimeoutMs: number;
}

export interface ModelLifecycleOptions {
  models: Readonly<Record<string, LifecyclePolicy>>;
  /** Retry-After of the errors held requests get, in milliseconds. */
  retryAfterMs: number;
}

export interface ModelLifecycleDeps {
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** Starts the model's instances; resolves true once one is ready, false when none could start. */
  startInstances(model: string): Promise<boolean>;
  /** Stops the model's instances (no restarts); resolves when they have ended. */
  stopInstances(model: string): Promise<void>;
  /** Whether the model's instances run work now (an idle stop waits for it). */
  isBusy(model: string): boolean;
  /**
   * Whether work for the model is queued (not yet dispatched): an idle stop waits for it (a request
   * retried after its instance ended waits there for the restart), and a sleep holds it for the
   * wake that follows the stop.
   */
  hasQueuedWork(model: string): boolean;
  /** The refusal of a wake (the budget's hard stop), or undefined to allow it. */
  wakeRefusal?(model: string): ServiceError | undefined;
  /** Called after every state change. */
  onChanged(): void;
}

export interface ModelLifecycle {
  state(model: string): ModelState;
  /** Whether the model is stopped or waking by demand (it then does not make the server unready). */
  isOnDemand(model: string): boolean;
  /** Whether the model is starting, or stopping with a wake to follow: requests are held for it. */
  isWaking(model: string): boolean;
  /**
   * When a waking model should be ready (clock milliseconds): when its start began (now, when its
   * stop is still ending) plus its last successful start's length (the boot's, or the last wake's).
   * Undefined when it is not waking, or no start has completed yet.
   */
  readyAtMs(model: string): number | undefined;
  /** Why the model cannot serve now: its last wake failed, or wakes are refused. Undefined otherwise. */
  failure(model: string): ServiceError | undefined;
  /** A request arrived, or is retried: the idle timer restarts, a stopped model wakes, and a stopping one wakes once stopped. */
  demand(model: string): void;
  /**
   * Marks the model starting at boot, before its instances are launched. False when a sleep came
   * before the boot (the model is stopped, or woken since by demand): the boot leaves it alone.
   */
  booting(model: string): boolean;
  /**
   * The boot's first instance became ready (`isAnyReady`; the boot is timed to here, as a wake is):
   * the model is ready. Or none could start: the model stays starting while its instances are
   * restarted, until instanceReady(). Either way wake() calls made during the boot end.
   */
  booted(model: string, outcome: { isAnyReady: boolean }): void;
  /**
   * An instance of the model became ready: a model whose boot started none, or whose instances were
   * all in a crash loop, is ready from now on (not timed: its restarts' backoff says nothing about a
   * wake). Otherwise nothing changes.
   */
  instanceReady(model: string): void;
  /**
   * Every instance of the model is in a crash loop: a ready model is starting from now on, while they
   * are restarted, until instanceReady(). Otherwise (booting, waking, stopping, stopped) nothing
   * changes: the boot, the wake or the stop decides.
   */
  instancesCrashLooping(model: string): void;
  /**
   * Wakes a stopped model (idempotent). Resolves once the wake (or the boot) ends; at once with
   * model_wake_failed while its instances are restarted with none up (after a boot that started
   * none, or a crash loop of all).
   */
  wake(model: string): Promise<WakeEnd>;
  /**
   * Stops the model's instances (idempotent); resolves once stopped, or, when work was queued for
   * it, once the wake that follows has ended.
   */
  sleep(model: string): Promise<void>;
  /** Stops every timer; pending wake() calls end with shutting_down. */
  close(): void;
}

type RestartCause = 'bootFailed' | 'crashLoop';

/** The reason of the model_wake_failed a wake answers at once while the instances are restarted. */
const RESTART_REASONS: Record<RestartCause, string> = {
  bootFailed: 'no instance could start',
  crashLoop: 'every instance is in a crash loop',
};

interface Entry {
  state: ModelState;
  isWoken: boolean;
  lastDemandMs: number;
  idleTimer: TimerHandle | undefined;
  failure: ServiceError | undefined;
  /** Resolvers of wake() and sleep() calls waiting for the current wake or stop to end. */
  waiters: ((end: WakeEnd) => void)[];
  /** The current wake's wakeTimeoutMs timer. */
  wakeTimer: TimerHandle | undefined;
  /** Work waits for the model while it stops (a request arrived, or work was queued when the sleep came): wake once stopped. */
  isWakeQueued: boolean;
  /**
   * Why the model is starting while its instances are restarted with none up, until one is ready:
   * the boot started none, or every one went into a crash loop while the model was ready.
   */
  restartCause: RestartCause | undefined;
  /** Bumped by every wake, so a late result of an abandoned one is ignored. */
  wakeId: number;
  /** When the current start (boot or wake) began, on the clock. */
  startedMs: number;
  /** How long the last successful start took, in milliseconds. */
  lastStartMs: number | undefined;
}

export function createModelLifecycle(options: ModelLifecycleOptions, deps: ModelLifecycleDeps): ModelLifecycle {
  const { clock, log, metrics } = deps;
  const entries = new Map<string, Entry>();
  let isClosed = false;
  for (const model of Object.keys(options.models)) {
    // Every model starts at boot (the supervisor's start()): until then it is starting.
    entries.set(model, {
      state: 'starting',
      isWoken: false,
      lastDemandMs: clock.nowMs(),
      idleTimer: undefined,
      failure: undefined,
      waiters: [],
      wakeTimer: undefined,
      isWakeQueued: false,
      restartCause: undefined,
      wakeId: 0,
      startedMs: clock.nowMs(),
      lastStartMs: undefined,
    });
    for (const outcome of ['ok', 'failed', 'timeout', 'refused']) metrics.modelWakes.inc({ model, outcome }, 0);
    for (const reason of ['idle', 'requested']) metrics.modelSleeps.inc({ model, reason }, 0);
    metrics.modelHeldRequests.inc({ model }, 0);
    metrics.modelWakeDuration.zero({ model });
  }
  updateGauges();

  function updateGauges(): void {
    for (const [model, e] of entries) for (const s of MODEL_STATES) metrics.modelState.set({ model, state: s }, e.state === s ? 1 : 0);
  }

  function setState(e: Entry, state: ModelState): void {
    e.state = state;
    updateGauges();
    deps.onChanged();
  }

  function settleWaiters(e: Entry, end: WakeEnd): void {
    const waiters = e.waiters;
    e.waiters = [];
    for (const w of waiters) w(end);
  }

  function cancelTimers(e: Entry): void {
    e.idleTimer?.cancel();
    e.idleTimer = undefined;
    e.wakeTimer?.cancel();
    e.wakeTimer = undefined;
  }

  /** Whether the model's instances are supervised (restarted when they end): it is ready, or they are restarted with none up. */
  function isSupervised(e: Entry): boolean {
    return e.state === 'ready' || (e.state === 'starting' && e.restartCause !== undefined);
  }

  /** Whether a wake by demand is starting the model (not a boot, nor restarts with none up): work is held for it. */
  function isWokenStarting(e: Entry): boolean {
    return e.state === 'starting' && e.isWoken && e.restartCause === undefined;
  }

  function armIdleTimer(model: string, e: Entry): void {
    e.idleTimer?.cancel();
    e.idleTimer = undefined;
    const idleMs = options.models[model]!.idleStopAfterMs;
    if (idleMs <= 0 || !isSupervised(e) || isClosed) return;
    e.idleTimer = clock.setTimeout(
      () => {
        e.idleTimer = undefined;
        if (!isSupervised(e)) return;
        const nowMs = clock.nowMs();
        // Running and queued work count as activity: the idle time starts when the model has nothing to do.
        if (deps.isBusy(model) || deps.hasQueuedWork(model)) e.lastDemandMs = nowMs;
        if (nowMs - e.lastDemandMs >= idleMs) {
          log.info({ model, idleMs: nowMs - e.lastDemandMs }, 'model idle: stopping');
          void stop(model, e, 'idle');
          return;
        }
        armIdleTimer(model, e);
      },
      Math.max(0, e.lastDemandMs + idleMs - clock.nowMs()),
    );
  }

  async function stop(model: string, e: Entry, reason: 'idle' | 'requested' | 'failed'): Promise<void> {
    cancelTimers(e);
    e.wakeId += 1;
    e.restartCause = undefined;
    if (reason !== 'failed') metrics.modelSleeps.inc({ model, reason });
    setState(e, 'stopping');
    await deps.stopInstances(model);
    if (e.state !== 'stopping') return;
    e.isWoken = false;
    log.info({ model, reason }, 'model stopped');
    setState(e, 'stopped');
    if (e.isWakeQueued && !isClosed) {
      e.isWakeQueued = false;
      startWake(model, e);
      return;
    }
    settleWaiters(e, {
      isReady: false,
      error: e.failure ?? errors.modelWakeFailed({ model, reason: 'a sleep stopped it', retryAfterMs: options.retryAfterMs }),
    });
  }

  function startWake(model: string, e: Entry): void {
    const refusal = deps.wakeRefusal?.(model);
    if (refusal !== undefined) {
      e.failure = refusal;
      metrics.modelWakes.inc({ model, outcome: 'refused' });
      log.warn({ model, code: refusal.code }, 'model wake refused');
      deps.onChanged();
      settleWaiters(e, { isReady: false, error: refusal });
      return;
    }
    const policy = options.models[model]!;
    const wakeId = ++e.wakeId;
    const startedMs = clock.nowMs();
    e.startedMs = startedMs;
    e.failure = undefined;
    e.isWoken = true;
    e.lastDemandMs = startedMs;
    log.info({ model }, 'model waking');
    setState(e, 'starting');
    const fail = (outcome: 'failed' | 'timeout', error: ServiceError) => {
      if (e.wakeId !== wakeId || e.state !== 'starting') return;
      e.failure = error;
      metrics.modelWakes.inc({ model, outcome });
      log.error({ model, code: error.code, wakeMs: clock.nowMs() - startedMs }, 'model wake failed');
      // The failure is set before the state changes, so held requests get it at once, and so do the
      // wake() calls waiting for this wake (not for one that a request arriving meanwhile starts).
      settleWaiters(e, { isReady: false, error });
      void stop(model, e, 'failed');
    };
    e.wakeTimer = clock.setTimeout(
      () => fail('timeout', errors.modelWakeTimeout({ model, wakeTimeoutMs: policy.wakeTimeoutMs, retryAfterMs: options.retryAfterMs })),
      policy.wakeTimeoutMs,
    );
    deps.startInstances(model).then(
      (isReady) => {
        if (e.wakeId !== wakeId || e.state !== 'starting') return;
        if (!isReady) {
          fail('failed', errors.modelWakeFailed({ model, reason: 'no instance could start', retryAfterMs: options.retryAfterMs }));
          return;
        }
        e.wakeTimer?.cancel();
        e.wakeTimer = undefined;
        const wakeMs = clock.nowMs() - startedMs;
        e.lastStartMs = wakeMs;
        metrics.modelWakes.inc({ model, outcome: 'ok' });
        metrics.modelWakeDuration.observe({ model }, wakeMs / 1000);
        log.info({ model, wakeMs }, 'model woke');
        setState(e, 'ready');
        armIdleTimer(model, e);
        settleWaiters(e, { isReady: true });
      },
      (err: unknown) => fail('failed', errors.modelWakeFailed({ model, reason: String(err), retryAfterMs: options.retryAfterMs })),
    );
  }

  function entryOf(model: string): Entry {
    const e = entries.get(model);
    if (e === undefined) throw new Error(`Unknown model '${model}'`);
    return e;
  }

  function wake(model: string, e: Entry): void {
    if (isClosed) return;
    if (e.state === 'stopped') startWake(model, e);
    else if (e.state === 'stopping') e.isWakeQueued = true;
  }

  return {
    state: (model) => entryOf(model).state,
    isOnDemand(model) {
      const e = entryOf(model);
      return e.state === 'stopped' || e.state === 'stopping' || isWokenStarting(e);
    },
    isWaking(model) {
      const e = entryOf(model);
      // A wake to follow the stop holds work from the stop to the wake's start: the instant the
      // model reads stopped included (listeners hear of it before the wake starts).
      return e.state === 'starting' || ((e.state === 'stopping' || e.state === 'stopped') && e.isWakeQueued);
    },
    readyAtMs(model) {
      const e = entryOf(model);
      // Restarts with none up follow their backoff: no start's length predicts them.
      if (e.lastStartMs === undefined || e.restartCause !== undefined) return undefined;
      if (e.state === 'starting') return e.startedMs + e.lastStartMs;
      return e.state === 'stopping' && e.isWakeQueued ? clock.nowMs() + e.lastStartMs : undefined;
    },
    failure(model) {
      const e = entryOf(model);
      return e.state === 'stopped' || e.state === 'stopping' ? e.failure : undefined;
    },
    demand(model) {
      const e = entries.get(model);
      if (e === undefined) return;
      e.lastDemandMs = clock.nowMs();
      if (e.state === 'stopped' || e.state === 'stopping') metrics.modelHeldRequests.inc({ model });
      else if (isWokenStarting(e)) metrics.modelHeldRequests.inc({ model });
      wake(model, e);
    },
    // Boot changes notify no one: the supervisor's start() reports its instances itself.
    booting(model) {
      const e = entryOf(model);
      // Untouched since creation (starting, not woken, not booted): a sleep before the boot stands.
      if (e.state !== 'starting' || e.isWoken || e.restartCause !== undefined || isClosed) return false;
      e.startedMs = clock.nowMs();
      updateGauges();
      return true;
    },
    booted(model, { isAnyReady }) {
      const e = entryOf(model);
      if (e.state !== 'starting' || e.isWoken || e.restartCause !== undefined || isClosed) return;
      const nowMs = clock.nowMs();
      // A wake is predicted by the time to the boot's first ready instance, as a wake ends at its first.
      if (isAnyReady) e.lastStartMs = nowMs - e.startedMs;
      e.lastDemandMs = nowMs;
      // With no instance up the model is not ready: it stays starting while its instances are
      // restarted (a crash loop included), so /v1/models and /health/ready do not read ready.
      if (isAnyReady) e.state = 'ready';
      else e.restartCause = 'bootFailed';
      updateGauges();
      armIdleTimer(model, e);
      settleWaiters(
        e,
        isAnyReady
          ? { isReady: true }
          : {
              isReady: false,
              error: errors.modelWakeFailed({ model, reason: 'no instance could start', retryAfterMs: options.retryAfterMs }),
            },
      );
    },
    instanceReady(model) {
      const e = entries.get(model);
      if (e === undefined || e.state !== 'starting' || e.restartCause === undefined || isClosed) return;
      // Notifies no one: the supervisor reports the instance itself. The idle timer runs on.
      e.restartCause = undefined;
      e.state = 'ready';
      updateGauges();
      log.info({ model }, 'model ready');
    },
    instancesCrashLooping(model) {
      const e = entries.get(model);
      // Only a ready model: a boot or a wake ends by its own outcome or timeout, and a stop ends them.
      if (e === undefined || e.state !== 'ready' || isClosed) return;
      // Nothing can serve (calls get no_ready_instance): the model reads starting, as after a boot that
      // started none, while the supervisor restarts its instances. Notifies no one, as instanceReady()
      // does: the supervisor reports the instance's end itself. The idle timer runs on.
      e.restartCause = 'crashLoop';
      e.state = 'starting';
      updateGauges();
      log.error({ model }, 'model crash loop');
    },
    wake(model) {
      const e = entryOf(model);
      if (isClosed) return Promise.resolve<WakeEnd>({ isReady: false, error: errors.shuttingDown() });
      if (e.state === 'ready') return Promise.resolve<WakeEnd>({ isReady: true });
      if (e.restartCause !== undefined) {
        // No instance is up (the boot started none, or all are in a crash loop): their restarts follow
        // their backoff, with no deadline to wait for, so the wake answers now, as at the boot's end.
        const error = errors.modelWakeFailed({ model, reason: RESTART_REASONS[e.restartCause], retryAfterMs: options.retryAfterMs });
        return Promise.resolve<WakeEnd>({ isReady: false, error });
      }
      return new Promise<WakeEnd>((resolve) => {
        e.waiters.push(resolve);
        wake(model, e);
        // A refused wake settles at once, leaving the model stopped.
      });
    },
    async sleep(model) {
      const e = entryOf(model);
      if (e.state === 'stopped') return;
      // Work queued now is held for the model, as work arriving while it stops is: the model wakes
      // again once stopped, rather than failing it (running work finishes first either way).
      e.isWakeQueued = deps.hasQueuedWork(model);
      const done = new Promise<WakeEnd>((resolve) => e.waiters.push(resolve));
      if (e.state !== 'stopping') void stop(model, e, 'requested');
      await done;
    },
    close() {
      isClosed = true;
      for (const e of entries.values()) {
        cancelTimers(e);
        e.wakeId += 1;
        e.isWakeQueued = false;
        settleWaiters(e, { isReady: false, error: errors.shuttingDown() });
      }
    },
  };
}
