/**
 * Pure parsing and planning for a load ramp: the list of load levels (concurrency or offered
 * rate), SLO expressions, and the ordered list of steps. No I/O.
 */
import { usageError } from './bench-error.js';

export type LoadMode = 'closed' | 'open';

/** Safety limits: a typo must not turn a bench into a flood. */
export const MAX_CONCURRENCY = 10_000;
export const MAX_RATE_RPS = 100_000;
export const MAX_LEVELS = 200;

export interface LevelListOptions {
  /** The flag name, for messages. */
  flag: string;
  /** Integers only (concurrency), or any positive number (rates). */
  isInteger: boolean;
  max: number;
}

/**
 * Parses a list of load levels. Accepted forms, combinable with commas:
 * - `1,2,4,8`: explicit values;
 * - `1-8`: every integer from 1 to 8; `10-100:10`: from 10 to 100 in steps of 10;
 * - `1-64x2`: geometric, from 1 to 64, multiplying by 2;
 * - `1,2,4,...,100`: continue the progression before `...` below the value after it, then add
 *   that value. Three values before `...` decide between a constant difference and a constant
 *   ratio; with two, an integer ratio of 2 or more is geometric (`1,2,...,64`), anything else
 *   arithmetic (`10,15,...,40`).
 * Order is kept; duplicates are rejected.
 */
export function parseLevelList(text: string, options: LevelListOptions): number[] {
  const parts = text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
  if (parts.length === 0) throw usageError(`Expected ${options.flag} to list at least one value: got '${text}'`);
  const values: number[] = [];
  for (let i = 0; i < parts.length; i += 1) {
    const part = parts[i]!;
    if (part === '...' || part === '…') {
      const endText = parts[i + 1];
      if (values.length < 2 || endText === undefined) {
        throw usageError(`Expected two values before '...' and one after it in ${options.flag}: got '${text}'`);
      }
      const end = parseLevel(endText, options);
      values.push(...continueProgression(values, end, options));
      i += 1;
      continue;
    }
    values.push(...parseLevelRange(part, options));
  }
  if (values.length > MAX_LEVELS) {
    throw usageError(`Expected ${options.flag} to list at most ${MAX_LEVELS} values: got ${values.length}`);
  }
  const seen = new Set<number>();
  for (const value of values) {
    if (seen.has(value)) throw usageError(`Expected ${options.flag} values to be distinct: ${value} appears twice`);
    seen.add(value);
  }
  return values;
}

function parseLevelRange(part: string, options: LevelListOptions): number[] {
  const range = /^(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)(?:(:|x)(\d+(?:\.\d+)?))?$/.exec(part);
  if (range === null) return [parseLevel(part, options)];
  const from = parseLevel(range[1]!, options);
  const to = parseLevel(range[2]!, options);
  if (to < from) throw usageError(`Expected the range '${part}' in ${options.flag} to be increasing`);
  const kind = range[3] ?? ':';
  const by = range[4] === undefined ? 1 : Number(range[4]);
  if (kind === 'x') {
    if (!(by > 1)) throw usageError(`Expected the factor in '${part}' to be above 1: got ${by}`);
    return geometric(from, by, to, options);
  }
  if (!(by > 0) || (options.isInteger && !Number.isInteger(by))) {
    throw usageError(`Expected the step in '${part}' to be a positive ${options.isInteger ? 'integer' : 'number'}`);
  }
  const out: number[] = [];
  for (let k = 0; from + k * by <= to + 1e-9; k += 1) {
    out.push(normalize(from + k * by, options));
    if (out.length > MAX_LEVELS) break;
  }
  return out;
}

function continueProgression(before: number[], end: number, options: LevelListOptions): number[] {
  const [a, b, c] = before.length >= 3 ? before.slice(-3) : [undefined, ...before.slice(-2)];
  if (b === undefined || c === undefined || end <= c) {
    throw usageError(`Expected the value after '...' in ${options.flag} to exceed the values before it`);
  }
  const step = c - b;
  const ratio = c / b;
  let isGeometric: boolean;
  if (a !== undefined) {
    // Three values decide: a constant difference wins, then a constant ratio.
    if (Math.abs(b - a - step) < 1e-9) isGeometric = false;
    else if (Math.abs(b / a - ratio) < 1e-9) isGeometric = true;
    else throw usageError(`Expected the values before '...' in ${options.flag} to form a progression`);
  } else {
    // Two values: an integer ratio (1,2 or 2,4) reads as doubling, the usual ramp.
    isGeometric = Number.isInteger(ratio) && ratio >= 2;
  }
  if (!(step > 0)) throw usageError(`Expected the values before '...' in ${options.flag} to increase`);
  const out = isGeometric ? geometric(c, ratio, end, options).slice(1) : [];
  if (!isGeometric) {
    for (let v = c + step; v < end - 1e-9 && out.length <= MAX_LEVELS; v += step) out.push(normalize(v, options));
  }
  const filtered = out.filter((v) => v < end);
  filtered.push(end);
  return filtered;
}

function geometric(from: number, factor: number, to: number, options: LevelListOptions): number[] {
  const out: number[] = [];
  for (let v = from; v <= to + 1e-9 && out.length <= MAX_LEVELS; v *= factor) {
    const value = normalize(v, options);
    if (out.at(-1) !== value) out.push(value);
  }
  return out;
}

function normalize(value: number, options: LevelListOptions): number {
  return options.isInteger ? Math.round(value) : Math.round(value * 1e6) / 1e6;
}

function parseLevel(text: string, options: LevelListOptions): number {
  const value = Number(text);
  const kind = options.isInteger ? 'an integer' : 'a number';
  if (text.trim() === '' || !Number.isFinite(value) || (options.isInteger && !Number.isInteger(value))) {
    throw usageError(`Expected each ${options.flag} value to be ${kind} from 1 to ${options.max}: got '${text}'`);
  }
  if (value <= 0 || value > options.max || (options.isInteger && value < 1)) {
    throw usageError(`Expected each ${options.flag} value to be ${kind} from 1 to ${options.max}: got ${value}`);
  }
  return value;
}

/**
 * Latency metrics in milliseconds over all measured requests, then time to first byte, then error
 * rate, then the share of streamed-audio calls with a stall (speech).
 */
export const SLO_METRICS = [
  'mean',
  'p50',
  'p90',
  'p95',
  'p99',
  'max',
  'ttfb_p50',
  'ttfb_p90',
  'ttfb_p95',
  'ttfb_p99',
  'error_rate',
  'stalls',
] as const;
export type SloMetric = (typeof SLO_METRICS)[number];

export interface SloClause {
  metric: SloMetric;
  op: '<=' | '<';
  /** Milliseconds for latency metrics; a fraction from 0 to 1 for error_rate and stalls. */
  threshold: number;
  /** The clause as written, normalized: `p95<=1000ms`. */
  text: string;
}

/** The error-rate bound that applies when an SLO names none: a step that sheds load is not capacity. */
export const DEFAULT_MAX_ERROR_RATE = 0.01;

/**
 * Parses an SLO: clauses joined by commas, each `metric<=value` or `metric<value`. Latency values
 * take `ms` or `s` (bare numbers are milliseconds); `errors` (or `error_rate`) and `stalls` (the
 * share of calls with a stall) take `%` or a fraction. When no error clause is given, `errors<=1%`
 * is added.
 * @example parseSlo('p95<=1000ms') // p95 at most 1000 ms and at most 1 % errors
 */
export function parseSlo(text: string): SloClause[] {
  const parts = text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
  if (parts.length === 0) throw usageError(`Expected --slo to hold at least one clause such as p95<=1000ms: got '${text}'`);
  const clauses = parts.map(parseSloClause);
  if (!clauses.some((clause) => clause.metric === 'error_rate')) {
    clauses.push({ metric: 'error_rate', op: '<=', threshold: DEFAULT_MAX_ERROR_RATE, text: 'errors<=1%' });
  }
  return clauses;
}

function parseSloClause(text: string): SloClause {
  const match = /^([a-z0-9_]+)\s*(<=|<)\s*([0-9]*\.?[0-9]+)\s*(ms|s|%)?$/i.exec(text);
  if (match === null) {
    throw usageError(`Expected an SLO clause such as p95<=1000ms or errors<=1%: got '${text}'`);
  }
  const name = match[1]!.toLowerCase();
  const op = match[2] as '<=' | '<';
  const value = Number(match[3]);
  const unit = match[4]?.toLowerCase();
  const metric: string = name === 'errors' ? 'error_rate' : name;
  if (!(SLO_METRICS as readonly string[]).includes(metric)) {
    throw usageError(`Expected an SLO metric among ${SLO_METRICS.join(', ')}, errors: got '${name}'`);
  }
  if (metric === 'error_rate' || metric === 'stalls') {
    const what = metric === 'stalls' ? 'a share of calls with a stall' : 'an error rate';
    if (unit === 'ms' || unit === 's') throw usageError(`Expected ${what} in % or as a fraction: got '${text}'`);
    const threshold = unit === '%' ? value / 100 : value;
    if (threshold > 1) throw usageError(`Expected ${what} of at most 100 %: got '${text}'`);
    return { metric, op, threshold, text: `${metric === 'stalls' ? 'stalls' : 'errors'}${op}${round(threshold * 100)}%` };
  }
  if (unit === '%') throw usageError(`Expected a latency in ms or s: got '${text}'`);
  const thresholdMs = unit === 's' ? value * 1000 : value;
  return { metric: metric as SloMetric, op, threshold: thresholdMs, text: `${metric}${op}${round(thresholdMs)}ms` };
}

function round(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

export interface RampPlanOptions {
  mode: LoadMode;
  /** Concurrency (closed loop) or offered requests per second (open loop), in the order to run. */
  levels: number[];
  reps: number;
  /** The measured window of each step. */
  durationMs: number;
  /** Time before each step's window during which requests run but are not measured. */
  warmupMs: number;
}

export interface PlannedStep {
  /** Position in the run, from 0. */
  index: number;
  /** Index of the load level, from 0: the steps of one level share it. */
  levelIndex: number;
  /** Concurrency or offered rate. */
  level: number;
  /** Repetition of this level, from 1. */
  rep: number;
}

/** Orders the steps: each level's repetitions back to back, levels in the given order. */
export function planSteps(options: RampPlanOptions): PlannedStep[] {
  const steps: PlannedStep[] = [];
  options.levels.forEach((level, levelIndex) => {
    for (let rep = 1; rep <= options.reps; rep += 1) steps.push({ index: steps.length, levelIndex, level, rep });
  });
  return steps;
}

/** A lower bound of the run's length (the drain after each window is not included). */
export function estimateRunMs(options: RampPlanOptions): number {
  return options.levels.length * options.reps * (options.durationMs + options.warmupMs);
}
