/**
 * Turns raw step samples into results: per-step statistics, SLO checks, capacity, cost, and the
 * JSON, CSV and markdown renderings of a run. Pure apart from the types it reads.
 *
 * Measurement rules (docs/bench.md repeats them):
 * - a request is measured when it finishes inside its step's window, (start, end]; requests finishing during
 *   the warmup or after the window (the drain) are counted apart;
 * - requests per second counts successful measured requests over the window length;
 * - latency and time-to-first-byte percentiles are over successful measured requests
 *   (nearest-rank);
 * - the error rate is measured errors over measured requests;
 * - for streamed audio answers (speech), the real-time factor of a call is its total time over the
 *   audio it returned, and its stalls are counted by playback.ts; both over successful measured calls.
 */
import type { ClientUsage } from './client-monitor.js';
import { CLIENT_SATURATION_CPU_PERCENT } from './client-monitor.js';
import type { GpuStepMetrics } from './gpu-sampler.js';
import type { StepSamples } from './load-driver.js';
import type { MachineInfo } from './machine-info.js';
import type { ServerStepMetrics } from './metrics-scraper.js';
import { DEFAULT_MAX_ERROR_RATE, type LoadMode, type SloClause } from './ramp-plan.js';
import { formatMarkdownTable, formatNumber, formatTextTable, formatUsd } from './text-table.js';
import { toErrorKey, type PlaybackOutcome, type WorkloadInfo } from './workload.js';

export const RESULTS_SCHEMA = 'voxmux.bench.results/v1';

export interface LatencyStats {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

/** Playback continuity of the successful measured calls that streamed audio (speech). */
export interface PlaybackStats {
  /** Calls whose playback was tracked. */
  calls: number;
  /** Calls with at least one stall. */
  callsWithStall: number;
  /** callsWithStall / calls: the share of calls a listener heard stall. */
  stallShare: number;
  /** Stalls over all calls. */
  stalls: number;
  /** Time spent stalled over all calls. */
  stalledSeconds: number;
  /** stalledSeconds over the audio seconds those calls returned. */
  stalledPerAudioSecond: number;
}

/** Resource (voice) residency work the server did per measured call, from its /metrics. */
export interface ResourceLoadsPerCall {
  /** Resources read from disk (or built) per call. */
  fromDisk: number;
  /** Resources copied from host memory per call. */
  fromHost: number;
}

export interface UnmeasuredRequests {
  requests: number;
  ok: number;
  errorsByCode: Record<string, number>;
}

export interface RepResult {
  rep: number;
  windowMs: number;
  /** Requests that finished inside the window. */
  requests: number;
  ok: number;
  errors: number;
  requestsPerSecond: number;
  audioSecondsPerSecond?: number;
  latencyMs?: LatencyStats;
  ttfbMs?: LatencyStats;
  /** Real-time factor of each call: its total time over the audio seconds it returned (speech). */
  rtf?: LatencyStats;
  playback?: PlaybackStats;
  /** The named stages of the successful measured requests (voice calls' turns). */
  stagesMs?: Record<string, LatencyStats>;
  errorsByCode: Record<string, number>;
  /** Requests that finished before the window (warmup). */
  warmup: UnmeasuredRequests;
  /** Requests that finished after the window (drain, timeouts of late requests) or were interrupted. */
  late: UnmeasuredRequests;
  droppedArrivals: number;
  client: ClientUsage;
  server?: ServerStepMetrics;
  gpu?: GpuStepMetrics[];
  isInterrupted?: boolean;
}

/** Everything a rep measured, with the raw values needed to pool reps into a step. */
export interface RepMeasurement {
  result: RepResult;
  latenciesMs: number[];
  ttfbsMs: number[];
  rtfs: number[];
  /** Playback of the successful measured calls that carried it, with their audio seconds. */
  playbacks: Array<PlaybackOutcome & { audioSeconds: number }>;
  stagesMs: Record<string, number[]>;
  audioSeconds: number;
  hasAudioSeconds: boolean;
}

export interface CostFigures {
  perRequestUsd?: number;
  perAudioHourUsd?: number;
  /** One minute of a real-time call: for transcription, one minute of audio. */
  perCallMinuteUsd?: number;
}

export interface StepResult {
  /** Level number from 1, in run order. */
  step: number;
  mode: LoadMode;
  /** Closed loop: the number of client loops. */
  concurrency?: number;
  /** Open loop: offered requests per second. */
  rateRps?: number;
  /** The x value of the ramp: concurrency or offered rate. */
  level: number;
  requests: number;
  ok: number;
  errors: number;
  errorRate: number;
  errorsByCode: Record<string, number>;
  /** Successful measured requests per second, over all reps' windows. */
  requestsPerSecond: number;
  requestsPerSecondMin: number;
  requestsPerSecondMax: number;
  /** Seconds of audio transcribed per second of wall time (RTFx). */
  audioSecondsPerSecond?: number;
  latencyMs?: LatencyStats;
  ttfbMs?: LatencyStats;
  rtf?: LatencyStats;
  playback?: PlaybackStats;
  stagesMs?: Record<string, LatencyStats>;
  /** From the server's resource counters over the window, divided by the measured calls. */
  resourceLoadsPerCall?: ResourceLoadsPerCall;
  droppedArrivals: number;
  lateRequests: number;
  clientCpuPercentMax: number;
  clientEventLoopDelayP99MsMax: number;
  server?: Omit<ServerStepMetrics, 'scrapes'>;
  gpu?: GpuStepMetrics[];
  meetsSlo?: boolean;
  sloFailures?: string[];
  cost?: CostFigures;
  reps: RepResult[];
}

export interface CostOptions {
  gpuHourUsd?: number;
  gpus: number;
}

export interface Capacity {
  basis: 'slo' | 'peak';
  /**
   * How the qualifying step was chosen: the most throughput (default), or the highest load level
   * (`level`: for speech, the most concurrent streams that meet the SLO).
   */
  rankedBy?: CapacityRank;
  slo?: string[];
  /** Undefined when no step qualified. */
  step?: number;
  level?: number;
  requestsPerSecond?: number;
  audioSecondsPerSecond?: number;
  latencyP95Ms?: number;
  ttfbP95Ms?: number;
  /** Share of calls with a stall at this step (speech). */
  stallShare?: number;
  cost?: CostFigures;
  gpus: number;
  targetRps?: number;
  /** GPUs needed for targetRps at this capacity, assuming linear scaling. */
  gpusNeeded?: number;
}

export interface RunOptionsRecord {
  levels: number[];
  reps: number;
  durationMs: number;
  warmupMs: number;
  timeoutMs: number;
  maxRequestsPerStep: number;
  maxOutstanding?: number;
  seed?: number;
  abandonAfterMs?: number;
  slo?: string[];
  gpuHourUsd?: number;
  gpus: number;
  targetRps?: number;
}

export interface BenchResults {
  schema: typeof RESULTS_SCHEMA;
  label: string;
  mode: LoadMode;
  workload: WorkloadInfo;
  /** The command line, with secrets replaced by `***`. */
  command: string[];
  gitCommit?: string;
  machine: MachineInfo;
  startedAt: string;
  endedAt: string;
  options: RunOptionsRecord;
  serverMetrics: { state: 'ok' | 'unavailable' | 'off'; url?: string; note?: string };
  gpuMetrics: { state: 'ok' | 'unavailable' | 'off'; note?: string };
  steps: StepResult[];
  peak?: Capacity;
  capacity?: Capacity;
  /** Why the ramp stopped before its last step, if it did. */
  stoppedEarly?: string;
  notes: string[];
}

/** Nearest-rank percentile of ascending values; q in (0, 1]. */
export function percentile(sortedValues: readonly number[], q: number): number {
  if (sortedValues.length === 0) return Number.NaN;
  const rank = Math.min(sortedValues.length, Math.max(1, Math.ceil(q * sortedValues.length)));
  return sortedValues[rank - 1]!;
}

/** Nearest-rank statistics, rounded to `round` (two decimals by default: milliseconds). */
export function toLatencyStats(values: readonly number[], round: (value: number) => number = roundMs): LatencyStats | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return {
    count: sorted.length,
    mean: round(sorted.reduce((sum, v) => sum + v, 0) / sorted.length),
    p50: round(percentile(sorted, 0.5)),
    p90: round(percentile(sorted, 0.9)),
    p95: round(percentile(sorted, 0.95)),
    p99: round(percentile(sorted, 0.99)),
    max: round(sorted.at(-1)!),
  };
}

/** Real-time factors keep four decimals: a fast engine's are a few hundredths. */
function toRtfStats(values: readonly number[]): LatencyStats | undefined {
  return toLatencyStats(values, roundRatio);
}

/** Pools the playback of calls; undefined when none carried it. */
export function toPlaybackStats(playbacks: ReadonlyArray<PlaybackOutcome & { audioSeconds: number }>): PlaybackStats | undefined {
  if (playbacks.length === 0) return undefined;
  const callsWithStall = playbacks.filter((p) => p.stalls > 0).length;
  const stalledMs = sum(playbacks.map((p) => p.stalledMs));
  const audioSeconds = sum(playbacks.map((p) => p.audioSeconds));
  return {
    calls: playbacks.length,
    callsWithStall,
    stallShare: roundRatio(callsWithStall / playbacks.length),
    stalls: sum(playbacks.map((p) => p.stalls)),
    stalledSeconds: roundRate(stalledMs / 1000),
    stalledPerAudioSecond: audioSeconds > 0 ? roundRatio(stalledMs / 1000 / audioSeconds) : 0,
  };
}

export interface RepExtras {
  rep: number;
  client: ClientUsage;
  server?: ServerStepMetrics;
  gpu?: GpuStepMetrics[];
}

export function summarizeRep(samples: StepSamples, extras: RepExtras): RepMeasurement {
  const windowMs = samples.windowEndMs - samples.windowStartMs;
  const latenciesMs: number[] = [];
  const ttfbsMs: number[] = [];
  const rtfs: number[] = [];
  const playbacks: RepMeasurement['playbacks'] = [];
  const stagesMs: Record<string, number[]> = {};
  const errorsByCode: Record<string, number> = {};
  const warmup: UnmeasuredRequests = { requests: 0, ok: 0, errorsByCode: {} };
  const late: UnmeasuredRequests = { requests: 0, ok: 0, errorsByCode: {} };
  let requests = 0;
  let ok = 0;
  let audioSeconds = 0;
  let hasAudioSeconds = true;
  for (const outcome of samples.outcomes) {
    const isOk = outcome.errorCode === undefined;
    // The window is half-open, (start, end], so that back-to-back windows never count a request twice.
    // Requests cut short by an interruption say nothing about the server: never measured.
    const isInterruption = outcome.errorCode === 'interrupted';
    if (isInterruption || outcome.endMs <= samples.windowStartMs || outcome.endMs > samples.windowEndMs) {
      const bucket = outcome.endMs <= samples.windowStartMs && !isInterruption ? warmup : late;
      bucket.requests += 1;
      if (isOk) bucket.ok += 1;
      else increment(bucket.errorsByCode, toErrorKey(outcome));
      continue;
    }
    requests += 1;
    if (!isOk) {
      increment(errorsByCode, toErrorKey(outcome));
      continue;
    }
    ok += 1;
    latenciesMs.push(outcome.endMs - outcome.startMs);
    if (outcome.ttfbMs !== undefined) ttfbsMs.push(outcome.ttfbMs);
    for (const [stage, ms] of Object.entries(outcome.stagesMs ?? {})) (stagesMs[stage] ??= []).push(ms);
    if (outcome.audioSeconds === undefined) hasAudioSeconds = false;
    else audioSeconds += outcome.audioSeconds;
    if (outcome.playback !== undefined) {
      const callSeconds = outcome.audioSeconds ?? 0;
      playbacks.push({ ...outcome.playback, audioSeconds: callSeconds });
      if (callSeconds > 0) rtfs.push((outcome.endMs - outcome.startMs) / 1000 / callSeconds);
    }
  }
  hasAudioSeconds &&= ok > 0;
  const latencyMs = toLatencyStats(latenciesMs);
  const ttfbMs = toLatencyStats(ttfbsMs);
  const rtf = toRtfStats(rtfs);
  const playback = toPlaybackStats(playbacks);
  const stages = toStageStats(stagesMs);
  const result: RepResult = {
    rep: extras.rep,
    windowMs: roundMs(windowMs),
    requests,
    ok,
    errors: requests - ok,
    requestsPerSecond: roundRate(windowMs > 0 ? (ok * 1000) / windowMs : 0),
    ...(hasAudioSeconds && windowMs > 0 ? { audioSecondsPerSecond: roundRate((audioSeconds * 1000) / windowMs) } : {}),
    ...(latencyMs === undefined ? {} : { latencyMs }),
    ...(ttfbMs === undefined ? {} : { ttfbMs }),
    ...(rtf === undefined ? {} : { rtf }),
    ...(playback === undefined ? {} : { playback }),
    ...(stages === undefined ? {} : { stagesMs: stages }),
    errorsByCode: sortKeys(errorsByCode),
    warmup: { ...warmup, errorsByCode: sortKeys(warmup.errorsByCode) },
    late: { ...late, errorsByCode: sortKeys(late.errorsByCode) },
    droppedArrivals: samples.droppedArrivals,
    client: extras.client,
    ...(extras.server === undefined ? {} : { server: extras.server }),
    ...(extras.gpu === undefined ? {} : { gpu: extras.gpu }),
    ...(samples.isInterrupted ? { isInterrupted: true } : {}),
  };
  return { result, latenciesMs, ttfbsMs, rtfs, playbacks, stagesMs, audioSeconds, hasAudioSeconds };
}

/** Latency statistics per named stage, stages in name order; undefined when there are none. */
function toStageStats(stagesMs: Readonly<Record<string, readonly number[]>>): Record<string, LatencyStats> | undefined {
  const stats: Record<string, LatencyStats> = {};
  for (const stage of Object.keys(stagesMs).sort()) {
    const values = toLatencyStats(stagesMs[stage]!);
    if (values !== undefined) stats[stage] = values;
  }
  return Object.keys(stats).length === 0 ? undefined : stats;
}

export interface AggregateOptions {
  /** Level number from 1, in run order. */
  step: number;
  mode: LoadMode;
  level: number;
  slo?: readonly SloClause[];
  cost: CostOptions;
}

/** Pools the reps of one level: counts add up, percentiles are over all reps' requests. */
export function aggregateStep(reps: readonly RepMeasurement[], options: AggregateOptions): StepResult {
  const results = reps.map((rep) => rep.result);
  const windowMs = sum(results.map((rep) => rep.windowMs));
  const requests = sum(results.map((rep) => rep.requests));
  const ok = sum(results.map((rep) => rep.ok));
  const errorsByCode: Record<string, number> = {};
  for (const rep of results) for (const [code, count] of Object.entries(rep.errorsByCode)) increment(errorsByCode, code, count);
  // A rep without successes returned no audio: it adds nothing, as it adds nothing to requestsPerSecond,
  // and says nothing of whether the inputs' durations are known.
  const answered = reps.filter((rep) => rep.result.ok > 0);
  const hasAudioSeconds = answered.length > 0 && answered.every((rep) => rep.hasAudioSeconds);
  const audioSeconds = sum(reps.map((rep) => rep.audioSeconds));
  const latencyMs = toLatencyStats(reps.flatMap((rep) => rep.latenciesMs));
  const ttfbMs = toLatencyStats(reps.flatMap((rep) => rep.ttfbsMs));
  const rtf = toRtfStats(reps.flatMap((rep) => rep.rtfs));
  const playback = toPlaybackStats(reps.flatMap((rep) => rep.playbacks));
  const pooledStages: Record<string, number[]> = {};
  for (const rep of reps) for (const [stage, values] of Object.entries(rep.stagesMs)) (pooledStages[stage] ??= []).push(...values);
  const stagesMs = toStageStats(pooledStages);
  const rates = results.map((rep) => rep.requestsPerSecond);
  const server = mergeServer(results.map((rep) => rep.server));
  const resourceLoadsPerCall = toLoadsPerCall(server, requests);
  const gpu = mergeGpu(results.map((rep) => rep.gpu));
  const step: StepResult = {
    step: options.step,
    mode: options.mode,
    ...(options.mode === 'closed' ? { concurrency: options.level } : { rateRps: options.level }),
    level: options.level,
    requests,
    ok,
    errors: requests - ok,
    errorRate: requests > 0 ? roundRatio((requests - ok) / requests) : 1,
    errorsByCode: sortKeys(errorsByCode),
    requestsPerSecond: roundRate(windowMs > 0 ? (ok * 1000) / windowMs : 0),
    requestsPerSecondMin: rates.length > 0 ? Math.min(...rates) : 0,
    requestsPerSecondMax: rates.length > 0 ? Math.max(...rates) : 0,
    ...(hasAudioSeconds && windowMs > 0 ? { audioSecondsPerSecond: roundRate((audioSeconds * 1000) / windowMs) } : {}),
    ...(latencyMs === undefined ? {} : { latencyMs }),
    ...(ttfbMs === undefined ? {} : { ttfbMs }),
    ...(rtf === undefined ? {} : { rtf }),
    ...(playback === undefined ? {} : { playback }),
    ...(stagesMs === undefined ? {} : { stagesMs }),
    ...(resourceLoadsPerCall === undefined ? {} : { resourceLoadsPerCall }),
    droppedArrivals: sum(results.map((rep) => rep.droppedArrivals)),
    lateRequests: sum(results.map((rep) => rep.late.requests)),
    clientCpuPercentMax: results.length > 0 ? Math.max(...results.map((rep) => rep.client.cpuPercent)) : 0,
    clientEventLoopDelayP99MsMax: results.length > 0 ? Math.max(...results.map((rep) => rep.client.eventLoopDelayP99Ms)) : 0,
    ...(server === undefined ? {} : { server }),
    ...(gpu === undefined ? {} : { gpu }),
    reps: results,
  };
  if (options.slo !== undefined && options.slo.length > 0) {
    const failures = checkSlo(options.slo, step);
    step.meetsSlo = failures.length === 0;
    if (failures.length > 0) step.sloFailures = failures;
  }
  const cost = computeCost(options.cost, step);
  if (cost !== undefined) step.cost = cost;
  return step;
}

/**
 * Loads from disk and from host memory over the measured calls: the growth of the server's
 * counters across the window over the calls that finished in it (an approximation at the window's
 * edges, where calls started before it or still running after it did part of their loading).
 */
function toLoadsPerCall(server: StepResult['server'], requests: number): ResourceLoadsPerCall | undefined {
  if (server === undefined || requests <= 0) return undefined;
  const { resourceLoadsFromDisk: disk, resourceLoadsFromHost: host } = server;
  if (disk === undefined && host === undefined) return undefined;
  return { fromDisk: roundRatio((disk ?? 0) / requests), fromHost: roundRatio((host ?? 0) / requests) };
}

type SloStep = Pick<StepResult, 'latencyMs' | 'ttfbMs' | 'errorRate' | 'playback'> & Partial<Pick<StepResult, 'requests' | 'errors'>>;

/** The SLO clauses a step misses, as readable phrases; empty when it meets them all. */
export function checkSlo(clauses: readonly SloClause[], step: SloStep): string[] {
  const failures: string[] = [];
  for (const clause of clauses) {
    const value = sloValue(clause, step);
    if (value === undefined) {
      failures.push(`${clause.text}: no measurement`);
      continue;
    }
    const isMet = clause.op === '<=' ? value <= clause.threshold : value < clause.threshold;
    if (!isMet) {
      const shown = isShareMetric(clause.metric) ? `${roundRatio(value * 100)}%` : `${roundMs(value)}ms`;
      failures.push(`${clause.text}: got ${shown}`);
    }
  }
  return failures;
}

function isShareMetric(metric: SloClause['metric']): boolean {
  return metric === 'error_rate' || metric === 'stalls';
}

function sloValue(clause: SloClause, step: SloStep): number | undefined {
  switch (clause.metric) {
    // The shares from their counts: the recorded shares are rounded, and a 1-in-20,001 share rounds to 0.
    case 'error_rate':
      return step.requests !== undefined && step.errors !== undefined && step.requests > 0 ? step.errors / step.requests : step.errorRate;
    case 'stalls':
      return step.playback === undefined ? undefined : step.playback.callsWithStall / step.playback.calls;
    case 'mean':
    case 'p50':
    case 'p90':
    case 'p95':
    case 'p99':
    case 'max':
      return step.latencyMs?.[clause.metric];
    case 'ttfb_p50':
      return step.ttfbMs?.p50;
    case 'ttfb_p90':
      return step.ttfbMs?.p90;
    case 'ttfb_p95':
      return step.ttfbMs?.p95;
    case 'ttfb_p99':
      return step.ttfbMs?.p99;
  }
}

/**
 * Cost at a given throughput: the GPUs' price per second spread over the work done per second.
 * A call minute is one minute of real-time audio: a server doing `audioSecondsPerSecond` seconds
 * of audio per second keeps that many calls going at once.
 */
export function computeCost(
  options: CostOptions,
  throughput: { requestsPerSecond?: number; audioSecondsPerSecond?: number },
): CostFigures | undefined {
  if (options.gpuHourUsd === undefined) return undefined;
  const { requestsPerSecond, audioSecondsPerSecond } = throughput;
  const usdPerSecond = (options.gpuHourUsd * options.gpus) / 3600;
  const cost: CostFigures = {};
  if (requestsPerSecond !== undefined && requestsPerSecond > 0) cost.perRequestUsd = roundUsd(usdPerSecond / requestsPerSecond);
  if (audioSecondsPerSecond !== undefined && audioSecondsPerSecond > 0) {
    cost.perAudioHourUsd = roundUsd((usdPerSecond * 3600) / audioSecondsPerSecond);
    cost.perCallMinuteUsd = roundUsd((usdPerSecond * 60) / audioSecondsPerSecond);
  }
  return cost;
}

export type CapacityRank = 'throughput' | 'level';

export interface CapacityOptions {
  slo?: readonly SloClause[];
  cost: CostOptions;
  targetRps?: number;
  /** Which passing step is the capacity: the most throughput, or the highest level. @default 'throughput' */
  rankedBy?: CapacityRank;
}

/** The step with the highest throughput among those within the default error bound (or all, if none is). */
export function findPeak(steps: readonly StepResult[], options: CapacityOptions): Capacity | undefined {
  if (steps.length === 0) return undefined;
  // From the counts: the recorded errorRate is rounded, and 1.005 % rounds to 1 %.
  const healthy = steps.filter((step) => step.ok > 0 && step.errors / step.requests <= DEFAULT_MAX_ERROR_RATE);
  const pool = healthy.length > 0 ? healthy : steps.filter((step) => step.ok > 0);
  if (pool.length === 0) return undefined;
  const best = pool.reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
  return toCapacity('peak', best, options);
}

/**
 * Capacity under the SLO: of the levels that meet it, the one with the most throughput (the
 * higher level on a tie), or with `rankedBy: 'level'` the highest level. A Capacity without a
 * step when none meets it.
 */
export function decideCapacity(steps: readonly StepResult[], options: CapacityOptions): Capacity | undefined {
  if (options.slo === undefined || options.slo.length === 0) return undefined;
  const passing = steps.filter((step) => step.meetsSlo === true);
  if (passing.length === 0) {
    return {
      basis: 'slo',
      ...(options.rankedBy === 'level' ? { rankedBy: 'level' as const } : {}),
      slo: options.slo.map((clause) => clause.text),
      gpus: options.cost.gpus,
      ...(options.targetRps === undefined ? {} : { targetRps: options.targetRps }),
    };
  }
  const best =
    options.rankedBy === 'level'
      ? passing.reduce((a, b) => (b.level > a.level ? b : a))
      : passing.reduce((a, b) =>
          b.requestsPerSecond > a.requestsPerSecond || (b.requestsPerSecond === a.requestsPerSecond && b.level > a.level) ? b : a,
        );
  return toCapacity('slo', best, options);
}

function toCapacity(basis: Capacity['basis'], step: StepResult, options: CapacityOptions): Capacity {
  const capacity: Capacity = {
    basis,
    ...(basis === 'slo' && options.rankedBy === 'level' ? { rankedBy: 'level' as const } : {}),
    ...(basis === 'slo' && options.slo !== undefined ? { slo: options.slo.map((clause) => clause.text) } : {}),
    step: step.step,
    level: step.level,
    requestsPerSecond: step.requestsPerSecond,
    ...(step.audioSecondsPerSecond === undefined ? {} : { audioSecondsPerSecond: step.audioSecondsPerSecond }),
    ...(step.latencyMs === undefined ? {} : { latencyP95Ms: step.latencyMs.p95 }),
    ...(step.ttfbMs === undefined ? {} : { ttfbP95Ms: step.ttfbMs.p95 }),
    ...(step.playback === undefined ? {} : { stallShare: step.playback.stallShare }),
    gpus: options.cost.gpus,
  };
  const cost = computeCost(options.cost, step);
  if (cost !== undefined) capacity.cost = cost;
  if (options.targetRps !== undefined) {
    capacity.targetRps = options.targetRps;
    const gpusNeeded = gpusForTarget({ targetRps: options.targetRps, capacityRps: step.requestsPerSecond, gpus: options.cost.gpus });
    if (gpusNeeded !== undefined) capacity.gpusNeeded = gpusNeeded;
  }
  return capacity;
}

/** GPUs needed for `targetRps` when `gpus` GPUs sustain `capacityRps`, assuming linear scaling. */
export function gpusForTarget(options: { targetRps: number; capacityRps: number; gpus: number }): number | undefined {
  const { targetRps, capacityRps, gpus } = options;
  if (!(capacityRps > 0) || !(gpus > 0)) return undefined;
  const perGpu = capacityRps / gpus;
  // Guards against 2.0000000001 GPUs from float error.
  return Math.max(1, Math.ceil(targetRps / perGpu - 1e-9));
}

/** Successful requests of a step, measured or not: zero means the server never answered well. */
export function countSuccesses(step: StepResult): number {
  return step.ok + sum(step.reps.map((rep) => rep.warmup.ok + rep.late.ok));
}

/** Notes for the summary: client saturation and the like. */
export function collectNotes(steps: readonly StepResult[]): string[] {
  const notes: string[] = [];
  const unmeasured = steps.filter((step) => step.requests === 0 && countSuccesses(step) > 0);
  if (unmeasured.length > 0) {
    notes.push(
      `At level ${unmeasured.map((s) => s.level).join(', ')} requests succeeded but none finished inside the window: the window is shorter than the latency there. Use a longer --duration-s.`,
    );
  }
  const saturated = steps.filter((step) => step.clientCpuPercentMax >= CLIENT_SATURATION_CPU_PERCENT);
  if (saturated.length > 0) {
    notes.push(
      `The client used ${Math.max(...saturated.map((s) => s.clientCpuPercentMax))}% of a CPU core at level ${saturated
        .map((s) => s.level)
        .join(', ')}: it may be the bottleneck there. Run several bench processes or a faster client.`,
    );
  }
  const dropped = steps.filter((step) => step.droppedArrivals > 0);
  if (dropped.length > 0) {
    notes.push(
      `Arrivals were dropped at level ${dropped.map((s) => s.level).join(', ')} because the outstanding-request cap was reached: the server is past capacity there.`,
    );
  }
  return notes;
}

export const CSV_COLUMNS = [
  'step',
  'mode',
  'level',
  'concurrency',
  'rate_rps',
  'reps',
  'requests',
  'ok',
  'errors',
  'error_rate',
  'requests_per_second',
  'requests_per_second_min',
  'requests_per_second_max',
  'audio_seconds_per_second',
  'latency_mean_ms',
  'latency_p50_ms',
  'latency_p90_ms',
  'latency_p95_ms',
  'latency_p99_ms',
  'latency_max_ms',
  'ttfb_p50_ms',
  'ttfb_p95_ms',
  'ttfb_p99_ms',
  'rtf_p50',
  'rtf_p95',
  'rtf_p99',
  'calls_with_stall',
  'stall_share',
  'stalls',
  'stalled_seconds',
  'stalled_per_audio_second',
  'disk_loads_per_call',
  'host_loads_per_call',
  'resource_hits',
  'resource_misses',
  'resource_evictions',
  'resource_disk_load_ms_mean',
  'resource_host_load_ms_mean',
  'resource_resident_bytes_max',
  'resource_budget_bytes',
  'dropped_arrivals',
  'late_requests',
  'client_cpu_percent_max',
  'server_queued_mean',
  'server_queued_max',
  'server_batch_size_mean',
  'server_loop_busy_percent',
  'server_cpu_percent',
  'server_batch_send_ms_mean',
  'gpu_utilization_percent_mean',
  'gpu_memory_used_mib_max',
  'meets_slo',
  'cost_per_request_usd',
  'cost_per_audio_hour_usd',
  'cost_per_call_minute_usd',
  'errors_by_code',
] as const;

export type CsvColumn = (typeof CSV_COLUMNS)[number];

/** The value of one CSV column for a step, as the JSON holds it; undefined becomes an empty cell. */
export function csvValue(step: StepResult, column: CsvColumn): string | number | boolean | undefined {
  switch (column) {
    case 'step':
      return step.step;
    case 'mode':
      return step.mode;
    case 'level':
      return step.level;
    case 'concurrency':
      return step.concurrency;
    case 'rate_rps':
      return step.rateRps;
    case 'reps':
      return step.reps.length;
    case 'requests':
      return step.requests;
    case 'ok':
      return step.ok;
    case 'errors':
      return step.errors;
    case 'error_rate':
      return step.errorRate;
    case 'requests_per_second':
      return step.requestsPerSecond;
    case 'requests_per_second_min':
      return step.requestsPerSecondMin;
    case 'requests_per_second_max':
      return step.requestsPerSecondMax;
    case 'audio_seconds_per_second':
      return step.audioSecondsPerSecond;
    case 'latency_mean_ms':
      return step.latencyMs?.mean;
    case 'latency_p50_ms':
      return step.latencyMs?.p50;
    case 'latency_p90_ms':
      return step.latencyMs?.p90;
    case 'latency_p95_ms':
      return step.latencyMs?.p95;
    case 'latency_p99_ms':
      return step.latencyMs?.p99;
    case 'latency_max_ms':
      return step.latencyMs?.max;
    case 'ttfb_p50_ms':
      return step.ttfbMs?.p50;
    case 'ttfb_p95_ms':
      return step.ttfbMs?.p95;
    case 'ttfb_p99_ms':
      return step.ttfbMs?.p99;
    case 'rtf_p50':
      return step.rtf?.p50;
    case 'rtf_p95':
      return step.rtf?.p95;
    case 'rtf_p99':
      return step.rtf?.p99;
    case 'calls_with_stall':
      return step.playback?.callsWithStall;
    case 'stall_share':
      return step.playback?.stallShare;
    case 'stalls':
      return step.playback?.stalls;
    case 'stalled_seconds':
      return step.playback?.stalledSeconds;
    case 'stalled_per_audio_second':
      return step.playback?.stalledPerAudioSecond;
    case 'disk_loads_per_call':
      return step.resourceLoadsPerCall?.fromDisk;
    case 'host_loads_per_call':
      return step.resourceLoadsPerCall?.fromHost;
    case 'resource_hits':
      return step.server?.resourceHits;
    case 'resource_misses':
      return step.server?.resourceMisses;
    case 'resource_evictions':
      return step.server?.resourceEvictions;
    case 'resource_disk_load_ms_mean':
      return step.server?.resourceDiskLoadMsMean;
    case 'resource_host_load_ms_mean':
      return step.server?.resourceHostLoadMsMean;
    case 'resource_resident_bytes_max':
      return step.server?.resourceResidentBytesMax;
    case 'resource_budget_bytes':
      return step.server?.resourceBudgetBytes;
    case 'dropped_arrivals':
      return step.droppedArrivals;
    case 'late_requests':
      return step.lateRequests;
    case 'client_cpu_percent_max':
      return step.clientCpuPercentMax;
    case 'server_queued_mean':
      return step.server?.queuedMean;
    case 'server_queued_max':
      return step.server?.queuedMax;
    case 'server_batch_size_mean':
      return step.server?.batchSizeMean;
    case 'server_loop_busy_percent':
      return step.server?.loopBusyPercent;
    case 'server_cpu_percent':
      return step.server?.cpuPercent;
    case 'server_batch_send_ms_mean':
      return step.server?.batchSendMsMean;
    case 'gpu_utilization_percent_mean':
      return step.gpu === undefined ? undefined : round1(meanOf(step.gpu.map((g) => g.utilizationPercentMean)));
    case 'gpu_memory_used_mib_max':
      return step.gpu === undefined ? undefined : Math.max(...step.gpu.map((g) => g.memoryUsedMiBMax));
    case 'meets_slo':
      return step.meetsSlo;
    case 'cost_per_request_usd':
      return step.cost?.perRequestUsd;
    case 'cost_per_audio_hour_usd':
      return step.cost?.perAudioHourUsd;
    case 'cost_per_call_minute_usd':
      return step.cost?.perCallMinuteUsd;
    case 'errors_by_code':
      return Object.entries(step.errorsByCode)
        .map(([code, count]) => `${code}=${count}`)
        .join(';');
  }
}

/** One row per load level; numbers are written exactly as in the JSON file. */
export function toCsv(results: BenchResults): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const step of results.steps) {
    lines.push(CSV_COLUMNS.map((column) => csvCell(csvValue(step, column))).join(','));
  }
  return `${lines.join('\n')}\n`;
}

function csvCell(value: string | number | boolean | undefined): string {
  if (value === undefined) return '';
  const text = String(value);
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** The header of the step table, shared by the terminal and the markdown summary. */
function stepTable(results: BenchResults): { header: string[]; rows: string[][] } {
  const isOpen = results.mode === 'open';
  const hasTtfb = results.steps.some((step) => step.ttfbMs !== undefined);
  const hasAudio = results.steps.some((step) => step.audioSecondsPerSecond !== undefined);
  const hasServer = results.steps.some((step) => step.server !== undefined);
  const hasLoop = results.steps.some((step) => step.server?.loopBusyPercent !== undefined);
  const hasSend = results.steps.some((step) => step.server?.batchSendMsMean !== undefined);
  const hasSlo = results.steps.some((step) => step.meetsSlo !== undefined);
  const hasPlayback = results.steps.some((step) => step.playback !== undefined);
  const hasLoads = results.steps.some((step) => step.resourceLoadsPerCall !== undefined);
  const hasGpuMemory = hasPlayback && results.steps.some((step) => step.gpu !== undefined);
  const header = [
    isOpen ? 'rate' : 'conc',
    'req/s',
    // For transcription the audio seconds per second are its RTFx; for speech, the audio produced.
    ...(hasAudio ? [hasPlayback ? 'audio s/s' : 'RTFx'] : []),
    // Played answers are judged by their first byte: of the whole call's time, p50 and p95 suffice.
    ...(hasPlayback ? ['p50 ms', 'p95 ms'] : ['p50 ms', 'p90 ms', 'p95 ms', 'p99 ms', 'max ms']),
    ...(hasTtfb ? ['ttfb p50', 'ttfb p95'] : []),
    ...(hasPlayback ? ['ttfb p99', 'RTF p50', 'RTF p95', 'calls', 'stalled calls', 'stalled s'] : []),
    ...(hasLoads ? ['disk/call', 'host/call', 'evictions'] : []),
    ...(hasGpuMemory ? ['gpu MiB'] : []),
    'errors',
    ...(isOpen ? ['dropped'] : []),
    ...(hasServer ? ['queued', 'batch'] : []),
    ...(hasLoop ? ['srv loop %'] : []),
    ...(hasSend ? ['send ms'] : []),
    'client cpu %',
    ...(hasSlo ? ['SLO'] : []),
  ];
  const rows = results.steps.map((step) => [
    String(step.level),
    formatNumber(step.requestsPerSecond, 2),
    ...(hasAudio ? [formatNumber(step.audioSecondsPerSecond, 1)] : []),
    ...(hasPlayback
      ? [formatNumber(step.latencyMs?.p50, 0), formatNumber(step.latencyMs?.p95, 0)]
      : [
          formatNumber(step.latencyMs?.p50, 0),
          formatNumber(step.latencyMs?.p90, 0),
          formatNumber(step.latencyMs?.p95, 0),
          formatNumber(step.latencyMs?.p99, 0),
          formatNumber(step.latencyMs?.max, 0),
        ]),
    ...(hasTtfb ? [formatNumber(step.ttfbMs?.p50, 0), formatNumber(step.ttfbMs?.p95, 0)] : []),
    ...(hasPlayback
      ? [
          formatNumber(step.ttfbMs?.p99, 0),
          formatNumber(step.rtf?.p50, 3),
          formatNumber(step.rtf?.p95, 3),
          String(step.ok),
          step.playback === undefined ? '-' : `${step.playback.callsWithStall} (${formatNumber(step.playback.stallShare * 100, 1)}%)`,
          formatNumber(step.playback?.stalledSeconds, 1),
        ]
      : []),
    ...(hasLoads
      ? [
          formatNumber(step.resourceLoadsPerCall?.fromDisk, 2),
          formatNumber(step.resourceLoadsPerCall?.fromHost, 2),
          formatNumber(step.server?.resourceEvictions, 0),
        ]
      : []),
    ...(hasGpuMemory ? [formatNumber(step.gpu === undefined ? undefined : Math.max(...step.gpu.map((g) => g.memoryUsedMiBMax)), 0)] : []),
    step.errors === 0 ? '0' : `${step.errors} (${formatNumber(step.errorRate * 100, 1)}%)`,
    ...(isOpen ? [String(step.droppedArrivals)] : []),
    ...(hasServer ? [formatNumber(step.server?.queuedMean, 1), formatNumber(step.server?.batchSizeMean, 2)] : []),
    ...(hasLoop ? [formatNumber(step.server?.loopBusyPercent, 0)] : []),
    ...(hasSend ? [formatNumber(step.server?.batchSendMsMean, 1)] : []),
    formatNumber(step.clientCpuPercentMax, 0),
    ...(hasSlo ? [step.meetsSlo === true ? 'yes' : 'no'] : []),
  ]);
  return { header, rows };
}

export function formatStepTable(results: BenchResults): string {
  const { header, rows } = stepTable(results);
  return formatTextTable(header, rows);
}

/** The lines about capacity, cost and GPUs needed, shared by the terminal and markdown output. */
export function capacityLines(results: BenchResults): string[] {
  const lines: string[] = [];
  const unit = results.mode === 'open' ? 'offered rate' : 'concurrency';
  const describe = (capacity: Capacity, title: string): void => {
    if (capacity.step === undefined) {
      lines.push(`${title}: no step met the SLO ${capacity.slo?.join(', ') ?? ''}`.trimEnd());
      return;
    }
    const rtfx = capacity.audioSecondsPerSecond === undefined ? '' : `, ${formatNumber(capacity.audioSecondsPerSecond, 1)} audio s/s`;
    const slo = capacity.basis === 'slo' ? ` meeting ${capacity.slo?.join(', ')}` : '';
    lines.push(
      capacity.rankedBy === 'level'
        ? `${title}: ${capacity.level} ${results.mode === 'open' ? 'calls/s offered' : 'concurrent streams'}${slo} (first byte p95 ${formatNumber(capacity.ttfbP95Ms, 0)} ms, ${formatNumber(capacity.requestsPerSecond, 2)} calls/s${rtfx}) on ${capacity.gpus} GPU(s)`
        : `${title}: ${formatNumber(capacity.requestsPerSecond, 2)} req/s${rtfx} at ${unit} ${capacity.level}${slo} (p95 ${formatNumber(capacity.latencyP95Ms, 0)} ms) on ${capacity.gpus} GPU(s)`,
    );
    if (capacity.cost !== undefined) {
      lines.push(
        `  cost at $${results.options.gpuHourUsd}/GPU-hour: ${formatUsd(capacity.cost.perRequestUsd)} per request, ${formatUsd(capacity.cost.perAudioHourUsd)} per audio hour, ${formatUsd(capacity.cost.perCallMinuteUsd)} per call minute`,
      );
    }
    if (capacity.targetRps !== undefined) {
      lines.push(
        capacity.gpusNeeded === undefined
          ? `  GPUs for ${capacity.targetRps} req/s: unknown (no throughput measured)`
          : `  GPUs for ${capacity.targetRps} req/s: ${capacity.gpusNeeded} (linear scaling assumed)`,
      );
    }
  };
  if (results.capacity !== undefined) describe(results.capacity, 'Capacity');
  if (results.peak !== undefined) describe(results.peak, 'Peak throughput');
  return lines;
}

export function toMarkdownSummary(results: BenchResults): string {
  const { header, rows } = stepTable(results);
  const machine = results.machine;
  const out: string[] = [
    `# Bench: ${results.label}`,
    '',
    `- Workload: ${results.workload.kind} (${results.workload.isStreaming ? 'streamed' : 'not streamed'}), model \`${results.workload.model}\`, ${results.workload.inputCount} ${results.workload.kind === 'speech' ? 'input text(s)' : 'input file(s)'}${describeSettings(results.workload.settings)}${results.workload.meanAudioSeconds === undefined ? '' : `, ${formatNumber(results.workload.meanAudioSeconds, 2)} s of audio each on average`}`,
    `- Endpoint: ${results.workload.endpoint}`,
    `- Mode: ${results.mode === 'closed' ? 'closed loop (concurrency)' : 'open loop (Poisson arrivals)'}; ${results.options.reps} rep(s) of ${results.options.durationMs / 1000} s per level after ${results.options.warmupMs / 1000} s of warmup`,
    `- Started ${results.startedAt}, ended ${results.endedAt}`,
    `- Command: \`${results.command.join(' ')}\``,
    `- Git commit: ${results.gitCommit ?? 'unknown'}`,
    `- Client: ${machine.cpuModel}, ${machine.cpuCores} cores, ${Math.round(machine.memoryBytes / 2 ** 30)} GiB, ${machine.platform} ${machine.release}, Node ${machine.nodeVersion}`,
    `- Server metrics: ${results.serverMetrics.state}${results.serverMetrics.note === undefined ? '' : ` (${results.serverMetrics.note})`}; GPU metrics: ${results.gpuMetrics.state}${results.gpuMetrics.note === undefined ? '' : ` (${results.gpuMetrics.note})`}`,
    '',
    '## Steps',
    '',
    formatMarkdownTable(header, rows),
    '',
  ];
  const stages = stageTable(results.steps);
  if (stages !== undefined) out.push('## Stages (ms, p50 / p95)', '', stages, '');
  const capacity = capacityLines(results);
  if (capacity.length > 0)
    out.push('## Capacity', '', ...capacity.map((line) => (line.startsWith('  ') ? `  - ${line.trim()}` : `- ${line}`)), '');
  const errorSteps = results.steps.filter((step) => step.errors > 0);
  if (errorSteps.length > 0) {
    out.push('## Errors', '');
    for (const step of errorSteps) {
      out.push(
        `- level ${step.level}: ${Object.entries(step.errorsByCode)
          .map(([code, n]) => `${code} x${n}`)
          .join(', ')}`,
      );
    }
    out.push('');
  }
  const notes = [...(results.stoppedEarly === undefined ? [] : [`Stopped early: ${results.stoppedEarly}`]), ...results.notes];
  if (notes.length > 0) out.push('## Notes', '', ...notes.map((note) => `- ${note}`), '');
  return out.join('\n');
}

/** Per level, each named stage's p50 / p95; undefined when no step has stages. */
function stageTable(steps: readonly StepResult[]): string | undefined {
  const names = [...new Set(steps.flatMap((step) => Object.keys(step.stagesMs ?? {})))].sort();
  if (names.length === 0) return undefined;
  const rows = steps.map((step) => [
    String(step.level),
    ...names.map((name) => {
      const stats = step.stagesMs?.[name];
      return stats === undefined ? '-' : `${formatNumber(stats.p50, 0)} / ${formatNumber(stats.p95, 0)}`;
    }),
  ]);
  return formatMarkdownTable(['level', ...names], rows);
}

export function toJson(results: BenchResults): string {
  return `${JSON.stringify(results, null, 2)}\n`;
}

/** `; voices 64, mix zipf` for the summary's workload line; nothing when there are no settings. */
function describeSettings(settings: Readonly<Record<string, string>>): string {
  const entries = Object.entries(settings);
  return entries.length === 0 ? '' : ` (${entries.map(([key, value]) => `${key} ${value}`).join(', ')})`;
}

function mergeServer(list: ReadonlyArray<ServerStepMetrics | undefined>): StepResult['server'] {
  const present = list.filter((s): s is ServerStepMetrics => s !== undefined);
  if (present.length === 0) return undefined;
  const pick = (
    key:
      | 'queuedMean'
      | 'runningMean'
      | 'batchSizeMean'
      | 'loopBusyPercent'
      | 'cpuPercent'
      | 'batchSendMsMean'
      | 'resourceDiskLoadMsMean'
      | 'resourceHostLoadMsMean',
  ): number | undefined => {
    const values = present.map((s) => s[key]).filter((v): v is number => v !== undefined);
    return values.length === 0 ? undefined : Math.round(meanOf(values) * 100) / 100;
  };
  const maxes = present.map((s) => s.queuedMax).filter((v): v is number => v !== undefined);
  const out: NonNullable<StepResult['server']> = {};
  const queuedMean = pick('queuedMean');
  const runningMean = pick('runningMean');
  const batchSizeMean = pick('batchSizeMean');
  if (queuedMean !== undefined) out.queuedMean = queuedMean;
  if (maxes.length > 0) out.queuedMax = Math.max(...maxes);
  if (runningMean !== undefined) out.runningMean = runningMean;
  if (batchSizeMean !== undefined) out.batchSizeMean = batchSizeMean;
  const loopBusyPercent = pick('loopBusyPercent');
  if (loopBusyPercent !== undefined) out.loopBusyPercent = loopBusyPercent;
  const cpuPercent = pick('cpuPercent');
  if (cpuPercent !== undefined) out.cpuPercent = cpuPercent;
  const batchSendMsMean = pick('batchSendMsMean');
  if (batchSendMsMean !== undefined) out.batchSendMsMean = batchSendMsMean;
  // Counts over the window add up over reps; load times are over all the reps' loads; resident bytes keep the maximum.
  const counts = ['resourceLoadsFromDisk', 'resourceLoadsFromHost', 'resourceHits', 'resourceMisses', 'resourceEvictions'] as const;
  for (const key of counts) {
    const values = present.map((s) => s[key]).filter((v): v is number => v !== undefined);
    if (values.length > 0) out[key] = sum(values);
  }
  const diskLoadMs = loadMsMean(present, 'resourceLoadsFromDisk', 'resourceDiskLoadMsMean');
  if (diskLoadMs !== undefined) out.resourceDiskLoadMsMean = diskLoadMs;
  const hostLoadMs = loadMsMean(present, 'resourceLoadsFromHost', 'resourceHostLoadMsMean');
  if (hostLoadMs !== undefined) out.resourceHostLoadMsMean = hostLoadMs;
  for (const key of ['resourceResidentBytesMax', 'resourceBudgetBytes'] as const) {
    const values = present.map((s) => s[key]).filter((v): v is number => v !== undefined);
    if (values.length > 0) out[key] = Math.max(...values);
  }
  return out;
}

/** A load time's mean over every rep's loads: each rep's mean weighted by its load count. */
function loadMsMean(
  present: readonly ServerStepMetrics[],
  countKey: 'resourceLoadsFromDisk' | 'resourceLoadsFromHost',
  meanKey: 'resourceDiskLoadMsMean' | 'resourceHostLoadMsMean',
): number | undefined {
  let loads = 0;
  let totalMs = 0;
  for (const server of present) {
    const count = server[countKey];
    const mean = server[meanKey];
    if (count === undefined || mean === undefined || count <= 0) continue;
    loads += count;
    totalMs += count * mean;
  }
  return loads > 0 ? round1(totalMs / loads) : undefined;
}

function mergeGpu(list: ReadonlyArray<GpuStepMetrics[] | undefined>): GpuStepMetrics[] | undefined {
  const byIndex = new Map<number, GpuStepMetrics[]>();
  for (const gpus of list) for (const gpu of gpus ?? []) byIndex.set(gpu.index, [...(byIndex.get(gpu.index) ?? []), gpu]);
  if (byIndex.size === 0) return undefined;
  return [...byIndex.entries()]
    .sort(([a], [b]) => a - b)
    .map(([index, gpus]) => {
      const samples = sum(gpus.map((g) => g.samples));
      const total = gpus.find((g) => g.memoryTotalMiB !== undefined)?.memoryTotalMiB;
      return {
        index,
        utilizationPercentMean: round1(sum(gpus.map((g) => g.utilizationPercentMean * g.samples)) / Math.max(1, samples)),
        utilizationPercentMax: Math.max(...gpus.map((g) => g.utilizationPercentMax)),
        memoryUsedMiBMax: Math.max(...gpus.map((g) => g.memoryUsedMiBMax)),
        ...(total === undefined ? {} : { memoryTotalMiB: total }),
        samples,
      };
    });
}

function increment(counts: Record<string, number>, key: string, by = 1): void {
  counts[key] = (counts[key] ?? 0) + by;
}

function sortKeys(counts: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
}

function sum(values: readonly number[]): number {
  return values.reduce((total, v) => total + v, 0);
}

function meanOf(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : sum(values) / values.length;
}

function roundMs(value: number): number {
  return Math.round(value * 100) / 100;
}

function roundRate(value: number): number {
  return Math.round(value * 1000) / 1000;
}

function roundRatio(value: number): number {
  return Math.round(value * 10000) / 10000;
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}

/** Money keeps six significant digits: a cost per request can be a millionth of a dollar. */
function roundUsd(value: number): number {
  return Number(value.toPrecision(6));
}
