/**
 * `voxmux cost`'s arithmetic (pure): from the calls of a request log, what a GPU node costs in
 * each operating mode. Always on; on for a fixed window of hours each day; on demand, stopped
 * after N idle minutes and woken by the next call, which then waits a cold start.
 *
 * The log's span is the whole local days from the first call's day to the last call's day; every
 * monthly figure is that span scaled to 30 days.
 */
import type { RequestLogKind } from '../../src/api/request-log.js';

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
export const DAYS_PER_MONTH = 30;

/** One call of the log, as the cost model needs it. */
export interface CostCall {
  /** Arrival, wall-clock milliseconds since the epoch (UTC). */
  arrivalMs: number;
  /** From arrival to the end of the answer (a realtime call: to its end), in milliseconds. */
  durationMs: number;
  kind: RequestLogKind;
  audioInSeconds: number;
  audioOutSeconds: number;
}

export interface CostOptions {
  gpuHourUsd: number;
  gpus: number;
  /** Time from a wake to serving, in seconds: a call that finds the node stopped waits this long. */
  coldStartS: number;
  /** The idle stops to simulate, in minutes. */
  idleStopMin: readonly number[];
  /** Length of the fixed daily window, in hours. */
  hoursPerDay: number;
  /** Start of the fixed daily window, in minutes after local midnight. */
  dayStartMin: number;
  /** Local time minus UTC, in minutes (120 for UTC+2). */
  tzOffsetMin: number;
}

export type CostModeKind = 'always-on' | 'fixed-hours' | 'on-demand';

export interface CostMode {
  kind: CostModeKind;
  label: string;
  /** Hours the node is up (and billed) per day, on average over the span. */
  uptimeHoursPerDay: number;
  monthlyGpuHours: number;
  monthlyCostUsd: number;
  /** Calls that found the node down: on demand they wait for a wake; for fixed hours they arrive off hours. */
  waitedCalls: number;
  /** The longest wait, in seconds (0 when none waited). */
  maxWaitS: number;
  /** The mean wait of the calls that waited, in seconds (0 when none waited). */
  meanWaitS: number;
  costPerCallUsd: number | null;
  costPerAudioHourUsd: number | null;
  /** Per minute of synthesized speech (a voice call's minute); null without speech. */
  costPerCallMinuteUsd: number | null;
}

export interface TraceSummary {
  calls: number;
  /** Whole local days the log spans. */
  spanDays: number;
  /** First local midnight of the span, as UTC milliseconds. */
  spanStartMs: number;
  audioHours: number;
  /** Minutes of synthesized speech (POST /v1/audio/speech) plus minutes of realtime calls. */
  callMinutes: number;
}

export interface CostReport {
  trace: TraceSummary;
  modes: CostMode[];
}

/** The whole local days the calls span, and their audio. */
export function summarizeTrace(calls: readonly CostCall[], tzOffsetMin: number): TraceSummary {
  const offsetMs = tzOffsetMin * MINUTE_MS;
  const times = calls.map((c) => c.arrivalMs);
  const firstDay = Math.floor((Math.min(...times) + offsetMs) / DAY_MS);
  const lastDay = Math.floor((Math.max(...times) + offsetMs) / DAY_MS);
  return {
    calls: calls.length,
    spanDays: lastDay - firstDay + 1,
    spanStartMs: firstDay * DAY_MS - offsetMs,
    audioHours: calls.reduce((sum, c) => sum + c.audioInSeconds + c.audioOutSeconds, 0) / 3600,
    callMinutes:
      calls.filter((c) => c.kind === 'speech').reduce((sum, c) => sum + c.audioOutSeconds, 0) / 60 +
      calls.filter((c) => c.kind === 'realtime').reduce((sum, c) => sum + c.durationMs, 0) / MINUTE_MS,
  };
}

/** Whether a wall-clock instant falls in the daily window [dayStartMin, dayStartMin + hoursPerDay) local time. */
export function isInWindow(atMs: number, options: Pick<CostOptions, 'dayStartMin' | 'hoursPerDay' | 'tzOffsetMin'>): boolean {
  const minuteOfDay = ((((atMs + options.tzOffsetMin * MINUTE_MS) % DAY_MS) + DAY_MS) % DAY_MS) / MINUTE_MS;
  const sinceStart = (minuteOfDay - options.dayStartMin + 24 * 60) % (24 * 60);
  return sinceStart < options.hoursPerDay * 60;
}

export interface OnDemandRun {
  /** Time up (billed), boots included, in milliseconds. */
  uptimeMs: number;
  wakes: number;
  /** Each waiting call's wait, in milliseconds. */
  waitsMs: number[];
}

/**
 * Simulates idle stop and wake from the calls' arrivals and durations. A call that finds the node
 * stopped starts it: the node is up (billed) from then, serves from coldStartS later, and every call
 * arriving before that waits for it. A call keeps the node up while it lasts (from when it is served,
 * for its logged duration: a voice call's minutes, an HTTP call's fraction of a second); the node
 * stops idleStopMin after the last call ends.
 */
export function simulateOnDemand(
  calls: ReadonlyArray<Pick<CostCall, 'arrivalMs' | 'durationMs'>>,
  options: { coldStartS: number; idleStopMin: number },
): OnDemandRun {
  const coldMs = options.coldStartS * 1000;
  const idleMs = options.idleStopMin * MINUTE_MS;
  const sorted = [...calls].sort((a, b) => a.arrivalMs - b.arrivalMs);
  let uptimeMs = 0;
  let wakes = 0;
  const waitsMs: number[] = [];
  let upSinceMs: number | undefined;
  let readyAtMs = 0;
  let stopAtMs = 0;
  for (const { arrivalMs: t, durationMs } of sorted) {
    if (upSinceMs !== undefined && t > stopAtMs) {
      uptimeMs += stopAtMs - upSinceMs;
      upSinceMs = undefined;
    }
    if (upSinceMs === undefined) {
      upSinceMs = t;
      readyAtMs = t + coldMs;
      wakes += 1;
    }
    if (t < readyAtMs) waitsMs.push(readyAtMs - t);
    stopAtMs = Math.max(stopAtMs, Math.max(t, readyAtMs) + durationMs + idleMs);
  }
  if (upSinceMs !== undefined) uptimeMs += stopAtMs - upSinceMs;
  return { uptimeMs, wakes, waitsMs };
}

/** The operating modes' table: always on, the fixed window, then each idle stop. */
export function computeCost(calls: readonly CostCall[], options: CostOptions): CostReport {
  const trace = summarizeTrace(calls, options.tzOffsetMin);
  const scale = DAYS_PER_MONTH / trace.spanDays;
  const monthlyCalls = trace.calls * scale;
  const monthlyAudioHours = trace.audioHours * scale;
  const monthlyCallMinutes = trace.callMinutes * scale;
  const mode = (kind: CostModeKind, label: string, uptimeHoursInSpan: number, waitsS: readonly number[]): CostMode => {
    const monthlyGpuHours = uptimeHoursInSpan * scale * options.gpus;
    const monthlyCostUsd = monthlyGpuHours * options.gpuHourUsd;
    const per = (units: number) => (units > 0 ? monthlyCostUsd / units : null);
    return {
      kind,
      label,
      uptimeHoursPerDay: uptimeHoursInSpan / trace.spanDays,
      monthlyGpuHours,
      monthlyCostUsd,
      waitedCalls: waitsS.length,
      maxWaitS: waitsS.length === 0 ? 0 : Math.max(...waitsS),
      meanWaitS: waitsS.length === 0 ? 0 : waitsS.reduce((a, b) => a + b, 0) / waitsS.length,
      costPerCallUsd: per(monthlyCalls),
      costPerAudioHourUsd: per(monthlyAudioHours),
      costPerCallMinuteUsd: per(monthlyCallMinutes),
    };
  };
  const offHours = calls.filter((c) => !isInWindow(c.arrivalMs, options));
  const modes = [
    mode('always-on', 'always on', trace.spanDays * 24, []),
    mode(
      'fixed-hours',
      `${formatHours(options.hoursPerDay)} h a day from ${formatClock(options.dayStartMin)}`,
      trace.spanDays * options.hoursPerDay,
      // An off-hours call finds the node stopped: it fails, or waits a cold start if it may wake it.
      offHours.map(() => options.coldStartS),
    ),
    ...options.idleStopMin.map((idleStopMin) => {
      const run = simulateOnDemand(calls, { coldStartS: options.coldStartS, idleStopMin });
      return mode(
        'on-demand',
        `on demand, idle stop ${formatHours(idleStopMin)} min`,
        run.uptimeMs / HOUR_MS,
        run.waitsMs.map((ms) => ms / 1000),
      );
    }),
  ];
  return { trace, modes };
}

export function formatClock(minutes: number): string {
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}

function formatHours(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(2).replace(/0+$/, '');
}
