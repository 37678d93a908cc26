/**
 * When the gateway's upload memory goes idle, the rest of its idle memory goes back too
 * (GatewayDeps.releaseIdleMemory: a garbage collection, then the C heap's free pages). A
 * collection pauses the loop for tens of milliseconds, so while calls are still being answered (the
 * burst's last requests, a realtime call, a speech stream) only the trim runs at once, and the
 * collection waits for a moment when none is, checked every `retryMs`. A new idle release (after
 * the next uploads) replaces a wait in progress.
 */
import type { Clock, TimerHandle } from '../core/clock.js';

export interface IdleReleaseDeps {
  clock: Clock;
  /** How many requests are being answered now, open WebSockets included (connections.ts countServing). */
  serving(): number;
  release(p: { isServing: boolean }): void;
}

/** Returns what to call when the upload pool has let go of its memory. */
export function createIdleRelease(retryMs: number, deps: IdleReleaseDeps): () => void {
  let retry: TimerHandle | undefined;
  const whenQuiet = () => {
    retry = undefined;
    if (deps.serving() > 0) {
      retry = deps.clock.setTimeout(whenQuiet, retryMs);
      return;
    }
    deps.release({ isServing: false });
  };
  return () => {
    retry?.cancel();
    retry = undefined;
    if (deps.serving() === 0) {
      deps.release({ isServing: false });
      return;
    }
    deps.release({ isServing: true });
    retry = deps.clock.setTimeout(whenQuiet, retryMs);
  };
}
