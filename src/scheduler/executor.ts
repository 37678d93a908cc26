/**
 * The port the scheduler needs to run work on instances. The supervisor satisfies it; tests use a
 * FakeExecutor. The scheduler never imports the supervisor: both read the interface from the
 * shared vocabulary (protocol/work.ts).
 *
 * Four optional members let a model be stopped when idle and woken on demand: the scheduler calls
 * `demand` for every request, sequence item and stream it is given, and again for each it retries
 * after its instance ended (before it looks at the model's availability, so a stopped model is
 * already starting, or a stopping one wakes once stopped, and the work is held, not refused), asks
 * `whyUnavailable` for the error that work held for a model that cannot serve gets, and
 * `readyAtMs` when a waking model should serve, so that admission counts the wake left; and it
 * gives `observeQueue` its count of queued work once, so that a model with work waiting (a request
 * retried after its instance ended, or queued when a sleep arrives) is neither idle nor failed.
 */
import { errors } from '../core/error-catalog.js';
import type { ServiceError } from '../core/errors.js';
import type { WorkExecutor } from '../protocol/work.js';

export interface Executor extends WorkExecutor {
  /** A request for the model arrived, or is retried: a stopped model wakes, and its idle time starts again. */
  demand?(model: string): void;
  /** Why the model cannot serve (a failed or refused wake); undefined for no particular reason. */
  whyUnavailable?(model: string): ServiceError | undefined;
  /**
   * When a starting model is predicted to serve (clock milliseconds): its start's beginning plus
   * how long its last start took; undefined when it is not starting or no start has been timed.
   */
  readyAtMs?(model: string): number | undefined;
  /**
   * Called once, at the scheduler's creation, with its count of work queued for a model (requests,
   * sequence items and streams not yet dispatched).
   */
  observeQueue?(queued: (model: string) => number): void;
}

/** The error for work on a model that is unavailable: the executor's reason, else no_ready_instance. */
export function unavailableError(executor: Executor, model: string, retryAfterMs: number): ServiceError {
  return executor.whyUnavailable?.(model) ?? errors.noReadyInstance({ model, retryAfterMs });
}
