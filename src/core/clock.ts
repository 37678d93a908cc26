/**
 * Time is injected: every timer-driven component takes a Clock so tests advance a FakeClock
 * instead of sleeping on the real one.
 */
export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds on a monotonic scale (not wall time). */
  nowMs(): number;
  /** Wall-clock milliseconds since the epoch, for timestamps shown to people. */
  wallMs(): number;
  setTimeout(callback: () => void, delayMs: number): TimerHandle;
}

export const systemClock: Clock = {
  nowMs: () => performance.now(),
  wallMs: () => Date.now(),
  setTimeout(callback, delayMs) {
    const handle = setTimeout(callback, Math.max(0, delayMs));
    handle.unref?.();
    return { cancel: () => clearTimeout(handle) };
  },
};
