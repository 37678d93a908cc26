/** Deadline helpers: a deadline is an absolute time on the Clock's monotonic scale, in ms. */
import type { Clock } from './clock.js';

export function deadlineFrom(clock: Clock, timeoutMs: number): number {
  return clock.nowMs() + timeoutMs;
}

export function remainingMs(clock: Clock, deadlineMs: number): number {
  return Math.max(0, deadlineMs - clock.nowMs());
}

export function isExpired(clock: Clock, deadlineMs: number): boolean {
  return clock.nowMs() >= deadlineMs;
}
