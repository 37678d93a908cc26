/**
 * When to try a failed Hub call or download again: transient failures only (5xx, 408, 429, a
 * connection refused, reset or stalled), a bounded number of times, with exponential backoff, or
 * the server's Retry-After where it gave one. A download that received bytes before it failed
 * starts counting again (as huggingface_hub's http_get does): a long download over a flaky link
 * keeps going as long as it makes progress.
 */

export interface RetryPolicy {
  /** Attempts in a row without progress, the first included. @default 5 */
  maxAttempts: number;
  /** Wait before the second attempt; doubled for each further one. @default 1000 */
  baseDelayMs: number;
  /** Longest wait, Retry-After included. @default 30000 */
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxAttempts: 5, baseDelayMs: 1000, maxDelayMs: 30_000 };

export interface RetryDecision {
  shouldRetry: boolean;
  delayMs: number;
}

/**
 * @param failedAttempts attempts that have failed so far without progress (1 after the first failure)
 */
export function decideRetry(
  policy: RetryPolicy,
  failure: { failedAttempts: number; isTransient: boolean; retryAfterMs?: number | undefined },
): RetryDecision {
  if (!failure.isTransient || failure.failedAttempts >= policy.maxAttempts) return { shouldRetry: false, delayMs: 0 };
  const backoffMs = policy.baseDelayMs * 2 ** (failure.failedAttempts - 1);
  return { shouldRetry: true, delayMs: Math.min(policy.maxDelayMs, failure.retryAfterMs ?? backoffMs) };
}

/** A Retry-After header (seconds, or an HTTP date) in milliseconds from `nowWallMs`; undefined when absent or unreadable. */
export function parseRetryAfterMs(value: string | undefined, nowWallMs: number): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const atMs = Date.parse(text);
  return Number.isNaN(atMs) ? undefined : Math.max(0, atMs - nowWallMs);
}
