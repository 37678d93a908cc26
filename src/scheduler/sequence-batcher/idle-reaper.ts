/**
 * Session expiry (pure). A session with nothing queued or running expires sessionIdleTimeoutMs
 * after its last activity (an item submitted or finished); the scheduler holds one timer per
 * model, set to the earliest expiry.
 */
export interface ReapableSession {
  lastActivityMs: number;
  isIdle: boolean;
}

export function isExpired(session: ReapableSession, nowMs: number, idleTimeoutMs: number): boolean {
  return session.isIdle && nowMs - session.lastActivityMs >= idleTimeoutMs;
}

/** When the next idle session expires; undefined when no session is idle. */
export function nextExpiryMs(sessions: Iterable<ReapableSession>, idleTimeoutMs: number): number | undefined {
  let earliest: number | undefined;
  for (const s of sessions) {
    if (!s.isIdle) continue;
    const atMs = s.lastActivityMs + idleTimeoutMs;
    if (earliest === undefined || atMs < earliest) earliest = atMs;
  }
  return earliest;
}
