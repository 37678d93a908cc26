/**
 * Scrapes the server's Prometheus /metrics during a run: queue depth, running requests, batch
 * size, the time to send a batch to an instance, the server's own CPU (its event loop's busy
 * share, its process's CPU time), and resource residency (voice weights loaded from disk or from
 * host memory, hits, misses, evictions, resident and budget bytes). A server without some or all
 * of these metrics (any non-voxmux server, or one whose models hold no resources) is tolerated:
 * the report leaves those figures out, or says that server metrics were not available.
 */
import type { Clock, TimerHandle } from '../../src/core/clock.js';

export interface PromSample {
  name: string;
  labels: Readonly<Record<string, string>>;
  value: number;
}

/**
 * Parses the Prometheus text exposition format (version 0.0.4): comment lines are skipped,
 * label values are unescaped, timestamps are ignored. Malformed lines are skipped.
 */
export function parsePrometheusText(text: string): PromSample[] {
  const samples: PromSample[] = [];
  for (const rawLine of text.split('\n')) {
    const line = rawLine.trim();
    if (line === '' || line.startsWith('#')) continue;
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (nameMatch === null) continue;
    const name = nameMatch[0];
    let rest = line.slice(name.length);
    const labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      const parsed = parseLabels(rest);
      if (parsed === undefined) continue;
      Object.assign(labels, parsed.labels);
      rest = rest.slice(parsed.length);
    }
    const valueText = rest.trim().split(/\s+/)[0];
    if (valueText === undefined || valueText === '') continue;
    const value = parsePromNumber(valueText);
    if (value === undefined) continue;
    samples.push({ name, labels, value });
  }
  return samples;
}

function parseLabels(text: string): { labels: Record<string, string>; length: number } | undefined {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    while (text[i] === ' ' || text[i] === ',') i += 1;
    if (text[i] === '}') return { labels, length: i + 1 };
    const keyMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i));
    if (keyMatch === null) return undefined;
    i += keyMatch[0].length;
    while (text[i] === ' ') i += 1;
    if (text[i] !== '=') return undefined;
    i += 1;
    while (text[i] === ' ') i += 1;
    if (text[i] !== '"') return undefined;
    i += 1;
    let value = '';
    for (;;) {
      const ch = text[i];
      if (ch === undefined) return undefined;
      if (ch === '"') break;
      if (ch === '\\') {
        const next = text[i + 1];
        value += next === 'n' ? '\n' : (next ?? '');
        i += 2;
        continue;
      }
      value += ch;
      i += 1;
    }
    i += 1;
    labels[keyMatch[0]] = value;
  }
}

function parsePromNumber(text: string): number | undefined {
  if (text === '+Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  if (text === 'NaN') return Number.NaN;
  const value = Number(text);
  return Number.isNaN(value) ? undefined : value;
}

/**
 * The metrics read, in order of preference: a name, or a name with label matchers
 * (`name{source="disk"}`) that keep only the series carrying those labels. voxmux's names come first.
 */
export const SERVER_METRIC_NAMES = {
  queued: ['voxmux_scheduler_requests_queued'],
  running: ['voxmux_scheduler_requests_running'],
  batchSizeSum: ['voxmux_scheduler_batch_size_sum'],
  batchSizeCount: ['voxmux_scheduler_batch_size_count'],
  inferences: ['voxmux_instance_inferences_total'],
  executions: ['voxmux_instance_executions_total'],
  loopBusySeconds: ['voxmux_event_loop_busy_seconds_total'],
  cpuSeconds: ['voxmux_process_process_cpu_seconds_total'],
  batchSendSum: ['voxmux_instance_batch_send_seconds_sum'],
  batchSendCount: ['voxmux_instance_batch_send_seconds_count'],
  resourceLoadsFromDisk: ['voxmux_instance_resource_loads_total{source="disk"}'],
  resourceLoadsFromHost: ['voxmux_instance_resource_loads_total{source="host"}'],
  resourceDiskLoadSeconds: ['voxmux_instance_resource_load_seconds_total{source="disk"}'],
  resourceHostLoadSeconds: ['voxmux_instance_resource_load_seconds_total{source="host"}'],
  resourceHits: ['voxmux_instance_resource_hits_total'],
  resourceMisses: ['voxmux_instance_resource_misses_total'],
  resourceEvictions: ['voxmux_instance_resource_evictions_total'],
  resourceResidentBytes: ['voxmux_instance_resource_resident_bytes'],
  resourceBudgetBytes: ['voxmux_instance_resource_budget_bytes'],
} as const;

/**
 * Counters that a server creates only when first incremented (a labelled prom-client counter has
 * no series before): absent in one scrape and present in a later one, they count from zero.
 */
type CounterFromZero = Extract<
  ServerMetricField,
  | 'resourceLoadsFromDisk'
  | 'resourceLoadsFromHost'
  | 'resourceDiskLoadSeconds'
  | 'resourceHostLoadSeconds'
  | 'resourceHits'
  | 'resourceMisses'
  | 'resourceEvictions'
>;

interface MetricSelector {
  name: string;
  labels: ReadonlyArray<readonly [string, string]>;
}

/** `name` or `name{key="value",...}`. */
export function parseMetricSelector(text: string): MetricSelector {
  const brace = text.indexOf('{');
  if (brace === -1) return { name: text, labels: [] };
  const labels = [...text.slice(brace).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!] as const);
  return { name: text.slice(0, brace), labels };
}

const SELECTORS = Object.fromEntries(
  Object.entries(SERVER_METRIC_NAMES).map(([field, names]) => [field, names.map(parseMetricSelector)]),
) as Record<ServerMetricField, MetricSelector[]>;

export type ServerMetricField = keyof typeof SERVER_METRIC_NAMES;

/** One scrape, reduced to the figures the report uses; absent metrics are undefined. */
export type ServerMetricsSnapshot = { atMs: number } & Partial<Record<ServerMetricField, number>>;

/**
 * Sums each metric over its label sets. When some series carry a `model` label equal to `model`,
 * only those are summed, so that a server serving several models reports on the one benched.
 */
export function toServerSnapshot(samples: readonly PromSample[], options: { atMs: number; model?: string }): ServerMetricsSnapshot {
  const { atMs, model } = options;
  const snapshot: ServerMetricsSnapshot = { atMs };
  for (const field of Object.keys(SERVER_METRIC_NAMES) as ServerMetricField[]) {
    for (const selector of SELECTORS[field]) {
      const family = samples.filter((sample) => sample.name === selector.name && Number.isFinite(sample.value));
      if (family.length === 0) continue;
      const series = family.filter((sample) => selector.labels.every(([key, value]) => sample.labels[key] === value));
      // Whether the benched model is labelled is decided on the whole family, so that a series
      // it does not have yet (no disk load so far) is absent, not another model's.
      const isModelLabelled = model !== undefined && family.some((sample) => sample.labels.model === model);
      const chosen = isModelLabelled ? series.filter((sample) => sample.labels.model === model) : series;
      if (chosen.length === 0) continue;
      snapshot[field] = chosen.reduce((sum, sample) => sum + sample.value, 0);
      break;
    }
  }
  return snapshot;
}

export interface ServerStepMetrics {
  queuedMean?: number;
  queuedMax?: number;
  runningMean?: number;
  /** Mean requests per batch executed during the step. */
  batchSizeMean?: number;
  /** The server's main thread: busy time over wall time, in percent (100: saturated). */
  loopBusyPercent?: number;
  /** The server process, all threads: CPU time over wall time, in percent of one core. */
  cpuPercent?: number;
  /** Mean time to write one batch into its instance's socket, in ms. */
  batchSendMsMean?: number;
  /** Resources (voices) loaded from disk during the window, over all instances. */
  resourceLoadsFromDisk?: number;
  /** Resources copied from host memory during the window. */
  resourceLoadsFromHost?: number;
  /** Mean time of one load from disk, and from host memory, in ms. */
  resourceDiskLoadMsMean?: number;
  resourceHostLoadMsMean?: number;
  /** Requests whose resource was resident, and those that had to load it, during the window. */
  resourceHits?: number;
  resourceMisses?: number;
  resourceEvictions?: number;
  /** The most bytes held resident (all instances together) in any scrape of the window. */
  resourceResidentBytesMax?: number;
  /** The resident budget, all instances together. */
  resourceBudgetBytes?: number;
  /** Scrapes that fell in the step. */
  scrapes: number;
}

/**
 * Summarizes the scrapes in a window (both ends included): gauges are averaged; the mean batch size is
 * the growth of the batch-size histogram's sum over the growth of its count (or of inferences over
 * executions) between the first and last scrape, and the mean send time likewise from its
 * histogram; the event loop's busy share and the process's CPU are the growth of their seconds
 * counters over the time between those scrapes.
 */
export function summarizeServerMetrics(
  snapshots: readonly ServerMetricsSnapshot[],
  window: { fromMs: number; toMs: number },
): ServerStepMetrics | undefined {
  const inWindow = snapshots.filter((s) => s.atMs >= window.fromMs && s.atMs <= window.toMs);
  if (inWindow.length === 0) return undefined;
  const out: ServerStepMetrics = { scrapes: inWindow.length };
  const queued = inWindow.map((s) => s.queued).filter((v): v is number => v !== undefined);
  if (queued.length > 0) {
    out.queuedMean = round2(mean(queued));
    out.queuedMax = Math.max(...queued);
  }
  const running = inWindow.map((s) => s.running).filter((v): v is number => v !== undefined);
  if (running.length > 0) out.runningMean = round2(mean(running));
  const first = inWindow[0]!;
  const last = inWindow.at(-1)!;
  const ratio =
    growthRatio(first.batchSizeSum, last.batchSizeSum, first.batchSizeCount, last.batchSizeCount) ??
    growthRatio(first.inferences, last.inferences, first.executions, last.executions);
  if (ratio !== undefined) out.batchSizeMean = round2(ratio);
  const elapsedS = (last.atMs - first.atMs) / 1000;
  const loopBusy = growthRatio(first.loopBusySeconds, last.loopBusySeconds, 0, elapsedS);
  if (loopBusy !== undefined) out.loopBusyPercent = round1(loopBusy * 100);
  const cpu = growthRatio(first.cpuSeconds, last.cpuSeconds, 0, elapsedS);
  if (cpu !== undefined) out.cpuPercent = round1(cpu * 100);
  const send = growthRatio(first.batchSendSum, last.batchSendSum, first.batchSendCount, last.batchSendCount);
  if (send !== undefined) out.batchSendMsMean = round1(send * 1000);
  const growth = (field: CounterFromZero): number | undefined => {
    const end = last[field];
    if (end === undefined) return undefined;
    return Math.max(0, end - (first[field] ?? 0));
  };
  const counters = {
    resourceLoadsFromDisk: growth('resourceLoadsFromDisk'),
    resourceLoadsFromHost: growth('resourceLoadsFromHost'),
    resourceHits: growth('resourceHits'),
    resourceMisses: growth('resourceMisses'),
    resourceEvictions: growth('resourceEvictions'),
  };
  for (const [key, value] of Object.entries(counters)) if (value !== undefined) out[key as keyof typeof counters] = value;
  const diskSeconds = growth('resourceDiskLoadSeconds');
  if (diskSeconds !== undefined && counters.resourceLoadsFromDisk !== undefined && counters.resourceLoadsFromDisk > 0) {
    out.resourceDiskLoadMsMean = round1((diskSeconds * 1000) / counters.resourceLoadsFromDisk);
  }
  const hostSeconds = growth('resourceHostLoadSeconds');
  if (hostSeconds !== undefined && counters.resourceLoadsFromHost !== undefined && counters.resourceLoadsFromHost > 0) {
    out.resourceHostLoadMsMean = round1((hostSeconds * 1000) / counters.resourceLoadsFromHost);
  }
  const resident = inWindow.map((s) => s.resourceResidentBytes).filter((v): v is number => v !== undefined);
  if (resident.length > 0) out.resourceResidentBytesMax = Math.max(...resident);
  const budgets = inWindow.map((s) => s.resourceBudgetBytes).filter((v): v is number => v !== undefined);
  if (budgets.length > 0) out.resourceBudgetBytes = Math.max(...budgets);
  const hasAny = Object.keys(out).some((key) => key !== 'scrapes');
  return hasAny ? out : undefined;
}

function growthRatio(
  numFirst: number | undefined,
  numLast: number | undefined,
  denFirst: number | undefined,
  denLast: number | undefined,
): number | undefined {
  if (numFirst === undefined || numLast === undefined || denFirst === undefined || denLast === undefined) return undefined;
  const den = denLast - denFirst;
  return den > 0 ? (numLast - numFirst) / den : undefined;
}

function mean(values: readonly number[]): number {
  return values.reduce((sum, v) => sum + v, 0) / values.length;
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

export type ScraperState = 'unknown' | 'ok' | 'unavailable';

export interface MetricsScraper {
  /** Starts periodic scraping. */
  start(): void;
  /** Scrapes once now (at a step's window edges); undefined when the metrics are unavailable. */
  scrapeNow(): Promise<ServerMetricsSnapshot | undefined>;
  /** Stops periodic scraping and waits for a scrape in progress. */
  stop(): Promise<void>;
  snapshots(): readonly ServerMetricsSnapshot[];
  state(): ScraperState;
  /** Why the metrics are unavailable, for the report. */
  note(): string | undefined;
}

export interface MetricsScraperOptions {
  url: string;
  intervalMs: number;
  /** Each scrape is abandoned after this long. */
  timeoutMs: number;
  /** Model label to prefer when summing series. */
  model?: string;
  /** Sent as a bearer token; /metrics is often behind the same key as the API. */
  apiKey?: string;
}

export interface MetricsScraperDeps {
  fetch: typeof globalThis.fetch;
  clock: Clock;
}

/** Snapshots kept at most, so that a long run at a short interval stays bounded in memory. */
const MAX_SNAPSHOTS = 100_000;

export function createMetricsScraper(options: MetricsScraperOptions, deps: MetricsScraperDeps): MetricsScraper {
  const snapshots: ServerMetricsSnapshot[] = [];
  let state: ScraperState = 'unknown';
  let note: string | undefined;
  let timer: TimerHandle | undefined;
  let inFlight: Promise<ServerMetricsSnapshot | undefined> | undefined;
  let isRunning = false;

  const markUnavailable = (why: string): undefined => {
    // A server that answered once and then failed a scrape keeps its earlier data; only a
    // server that never answered is marked unavailable.
    if (state !== 'ok') {
      state = 'unavailable';
      note = why;
    }
    return undefined;
  };

  async function scrape(): Promise<ServerMetricsSnapshot | undefined> {
    if (state === 'unavailable') return undefined;
    const controller = new AbortController();
    const timeout = deps.clock.setTimeout(() => controller.abort(), options.timeoutMs);
    try {
      const response = await deps.fetch(options.url, {
        signal: controller.signal,
        redirect: 'manual',
        headers: options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` },
      });
      const text = await response.text();
      if (!response.ok) return markUnavailable(`GET ${options.url} answered ${response.status}`);
      const snapshot = toServerSnapshot(parsePrometheusText(text), {
        atMs: deps.clock.nowMs(),
        ...(options.model === undefined ? {} : { model: options.model }),
      });
      if (Object.keys(snapshot).length === 1) return markUnavailable(`${options.url} has none of the known metrics`);
      state = 'ok';
      if (snapshots.length < MAX_SNAPSHOTS) snapshots.push(snapshot);
      return snapshot;
    } catch (err) {
      if (state === 'ok') return undefined;
      const reason = (err as { cause?: { code?: unknown } }).cause?.code ?? (controller.signal.aborted ? 'timeout' : 'error');
      return markUnavailable(`GET ${options.url} failed: ${String(reason)}`);
    } finally {
      timeout.cancel();
    }
  }

  function scrapeOnce(): Promise<ServerMetricsSnapshot | undefined> {
    inFlight ??= scrape().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  }

  const tick = (): void => {
    timer = undefined;
    if (!isRunning) return;
    void scrapeOnce().then(() => {
      if (isRunning && state !== 'unavailable') timer = deps.clock.setTimeout(tick, options.intervalMs);
    });
  };

  return {
    start() {
      if (isRunning) return;
      isRunning = true;
      tick();
    },
    scrapeNow: scrapeOnce,
    async stop() {
      isRunning = false;
      timer?.cancel();
      timer = undefined;
      await inFlight;
    },
    snapshots: () => snapshots,
    state: () => state,
    note: () => note,
  };
}
