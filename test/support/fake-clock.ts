/** A Clock whose time moves only when a test advances it. */
import type { Clock, TimerHandle } from '../../src/core/clock.js';

interface Timer {
  atMs: number;
  seq: number;
  callback: () => void;
  isCancelled: boolean;
}

export class FakeClock implements Clock {
  #now = 0;
  #seq = 0;
  #timers: Timer[] = [];

  nowMs(): number {
    return this.#now;
  }

  wallMs(): number {
    return 1_700_000_000_000 + this.#now;
  }

  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    const timer: Timer = { atMs: this.#now + Math.max(0, delayMs), seq: this.#seq++, callback, isCancelled: false };
    this.#timers.push(timer);
    return { cancel: () => void (timer.isCancelled = true) };
  }

  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => !t.isCancelled && t.atMs <= target).sort((a, b) => a.atMs - b.atMs || a.seq - b.seq)[0];
      if (due === undefined) break;
      this.#timers.splice(this.#timers.indexOf(due), 1);
      this.#now = Math.max(this.#now, due.atMs);
      due.callback();
    }
    this.#now = target;
  }

  get pendingTimers(): number {
    return this.#timers.filter((t) => !t.isCancelled).length;
  }
}

/** Lets queued promise callbacks run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * Advances `clock` by `ms` in steps of at most `stepMs`, settling after each, so that answers the
 * code under test awaits (a heartbeat's ack) arrive between its timers, as they would in real time.
 */
export async function advanceSettling(clock: FakeClock, ms: number, stepMs = 10): Promise<void> {
  for (let left = ms; left > 0; left -= stepMs) {
    clock.advance(Math.min(stepMs, left));
    await settle();
  }
}
