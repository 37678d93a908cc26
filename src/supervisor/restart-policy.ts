/**
 * Restart decisions (pure): exponential backoff over recent failures, and crash-loop detection.
 * A crash loop is reported and restarted at the longest backoff, never spun.
 */
export interface RestartPolicy {
  restartInitialBackoffMs: number;
  restartMaxBackoffMs: number;
  crashLoopWindowMs: number;
  crashLoopMaxFailures: number;
}

export interface RestartDecision {
  delayMs: number;
  isCrashLoop: boolean;
  /** Failure times still inside the window, the newest included. */
  recentFailuresMs: number[];
}

export function decideRestart(previousFailuresMs: readonly number[], nowMs: number, policy: RestartPolicy): RestartDecision {
  const recentFailuresMs = [...previousFailuresMs.filter((t) => nowMs - t < policy.crashLoopWindowMs), nowMs];
  const isCrashLoop = recentFailuresMs.length >= policy.crashLoopMaxFailures;
  const exponent = Math.min(recentFailuresMs.length - 1, 30);
  const delayMs = isCrashLoop
    ? policy.restartMaxBackoffMs
    : Math.min(policy.restartMaxBackoffMs, policy.restartInitialBackoffMs * 2 ** exponent);
  return { delayMs, isCrashLoop, recentFailuresMs };
}
