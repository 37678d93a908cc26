/**
 * Busy time by key (an instance slot, a GPU): how long each key had at least one piece of work
 * running, accumulated on the injected clock. Overlapping work on one key counts once, so a GPU
 * shared by several instances is busy while any of them is.
 */
import type { Clock } from '../core/clock.js';

export interface BusyMeter {
  /** One more piece of work running on `key`. */
  begin(key: string): void;
  /** One piece of work on `key` ended; the key's busy interval closes when none is left. */
  end(key: string): void;
  /** Milliseconds `key` has been busy, the interval still open included. */
  busyMs(key: string): number;
}

interface KeyState {
  running: number;
  sinceMs: number;
  closedMs: number;
}

export function createBusyMeter(clock: Clock): BusyMeter {
  const keys = new Map<string, KeyState>();
  const stateOf = (key: string): KeyState => {
    let state = keys.get(key);
    if (state === undefined) {
      state = { running: 0, sinceMs: 0, closedMs: 0 };
      keys.set(key, state);
    }
    return state;
  };
  return {
    begin(key) {
      const state = stateOf(key);
      if (state.running === 0) state.sinceMs = clock.nowMs();
      state.running += 1;
    },
    end(key) {
      const state = stateOf(key);
      if (state.running === 0) return;
      state.running -= 1;
      if (state.running === 0) state.closedMs += clock.nowMs() - state.sinceMs;
    },
    busyMs(key) {
      const state = keys.get(key);
      if (state === undefined) return 0;
      return state.closedMs + (state.running > 0 ? clock.nowMs() - state.sinceMs : 0);
    },
  };
}
