/**
 * What every load-ramp command (`bench transcribe`, `bench speech`) shares: the ramp, SLO, cost,
 * metrics and key flags and their parsing, and the run itself: preflight, metrics scraping, GPU
 * sampling, progress, the ramp, capacity, provenance, the output files and the exit code. A
 * command adds its own flags and builds its Workload.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exitCodeOf, usageError } from './bench-error.js';
import { createClientMonitor } from './client-monitor.js';
import type { CommandContext, FlagValues } from './command.js';
import { numberFlag, optionalNumber, readApiKey, redactArgv } from './flags.js';
import { createGpuSampler } from './gpu-sampler.js';
import { readRunProvenance } from './machine-info.js';
import { createMetricsScraper } from './metrics-scraper.js';
import { slug, timestampForPath } from './output-dir.js';
import { plotPanelsFor, renderPlotSvg, toPlotSeries } from './plot.js';
import { createProgressReporter } from './progress.js';
import { MAX_CONCURRENCY, MAX_RATE_RPS, parseLevelList, parseSlo, type LoadMode, type SloClause } from './ramp-plan.js';
import { runRamp } from './ramp-runner.js';
import {
  RESULTS_SCHEMA,
  capacityLines,
  collectNotes,
  countSuccesses,
  decideCapacity,
  findPeak,
  formatStepTable,
  toCsv,
  toJson,
  toMarkdownSummary,
  type BenchResults,
  type CapacityRank,
} from './report.js';
import { preflight, type TargetUrls } from './target.js';
import type { Workload } from './workload.js';

/** Hard bounds, whatever the flags say: every run stops by itself. */
const MAX_DURATION_S = 3600;
const MAX_REPS = 100;
// A request still unanswered after 5 minutes measures a hung server, not a latency.
export const MAX_TIMEOUT_S = 300;
const MAX_REQUESTS_PER_STEP = 10_000_000;
const GPU_SAMPLE_INTERVAL_MS = 500;

/** The flags every ramp command takes. */
export const RAMP_FLAGS = {
  url: { type: 'string' },
  model: { type: 'string' },
  concurrency: { type: 'string' },
  rate: { type: 'string' },
  reps: { type: 'string' },
  'duration-s': { type: 'string' },
  'warmup-s': { type: 'string' },
  'timeout-s': { type: 'string' },
  'max-requests': { type: 'string' },
  'max-outstanding': { type: 'string' },
  'abandon-after-s': { type: 'string' },
  seed: { type: 'string' },
  slo: { type: 'string', multiple: true },
  'gpu-hour-usd': { type: 'string' },
  gpus: { type: 'string' },
  'target-rps': { type: 'string' },
  out: { type: 'string' },
  label: { type: 'string' },
  commit: { type: 'string' },
  'metrics-url': { type: 'string' },
  'scrape-interval-s': { type: 'string' },
  gpu: { type: 'string' },
  'api-key-file': { type: 'string' },
  'api-key': { type: 'string' },
  'preflight-timeout-s': { type: 'string' },
} as const;

/** The defaults a command chooses for the shared flags. */
export interface RampDefaults {
  concurrency: string;
  reps: number;
  durationS: number;
  warmupS: number;
  timeoutS: number;
  maxRequests: number;
  maxOutstanding: number;
  seed: number;
  gpus: number;
  scrapeIntervalS: number;
  preflightTimeoutS: number;
  /** SLO used when --slo is not given; none by default. */
  slo?: string;
}

export interface RampConfig {
  url: string;
  model: string;
  mode: LoadMode;
  levels: number[];
  reps: number;
  durationMs: number;
  warmupMs: number;
  timeoutMs: number;
  maxRequests: number;
  maxOutstanding: number;
  abandonAfterMs?: number;
  seed: number;
  slo?: SloClause[];
  gpuHourUsd?: number;
  gpus: number;
  targetRps?: number;
  label?: string;
  /** The commit the results record (default: the repository's HEAD). */
  commit?: string;
  metricsUrl?: string;
  scrapeIntervalMs: number;
  isGpuSampling: boolean;
  apiKey?: string;
  preflightTimeoutMs: number;
}

export async function toRampConfig(values: FlagValues<typeof RAMP_FLAGS>, defaults: RampDefaults, cwd: string): Promise<RampConfig> {
  if (values.url === undefined) throw usageError('Missing required flag: --url');
  if (values.model === undefined || values.model === '') throw usageError('Missing required flag: --model');
  if (values.rate !== undefined && values.concurrency !== undefined) {
    throw usageError('Expected either --concurrency (closed loop) or --rate (open loop): got both');
  }
  const mode: LoadMode = values.rate === undefined ? 'closed' : 'open';
  const levels =
    mode === 'closed'
      ? parseLevelList(values.concurrency ?? defaults.concurrency, { flag: '--concurrency', isInteger: true, max: MAX_CONCURRENCY })
      : parseLevelList(values.rate!, { flag: '--rate', isInteger: false, max: MAX_RATE_RPS });
  const gpuMode = values.gpu ?? 'auto';
  if (gpuMode !== 'auto' && gpuMode !== 'off') throw usageError(`Expected --gpu to be auto or off: got '${gpuMode}'`);
  const apiKey = await readApiKey(values, cwd);
  const sloText = values.slo?.join(',') ?? defaults.slo;
  const gpuHourUsd = optionalNumber(values['gpu-hour-usd'], '--gpu-hour-usd', { min: 0, max: 1_000_000 });
  const targetRps = optionalNumber(values['target-rps'], '--target-rps', { min: 0.000001, max: 1e9 });
  const abandonAfterS = optionalNumber(values['abandon-after-s'], '--abandon-after-s', { min: 0, max: MAX_TIMEOUT_S });
  return {
    url: values.url,
    model: values.model,
    mode,
    levels,
    reps: numberFlag(values.reps, '--reps', defaults.reps, { min: 1, max: MAX_REPS, isInteger: true }),
    durationMs: 1000 * numberFlag(values['duration-s'], '--duration-s', defaults.durationS, { min: 0.1, max: MAX_DURATION_S }),
    warmupMs: 1000 * numberFlag(values['warmup-s'], '--warmup-s', defaults.warmupS, { min: 0, max: MAX_DURATION_S }),
    timeoutMs: 1000 * numberFlag(values['timeout-s'], '--timeout-s', defaults.timeoutS, { min: 0.01, max: MAX_TIMEOUT_S }),
    maxRequests: numberFlag(values['max-requests'], '--max-requests', defaults.maxRequests, {
      min: 1,
      max: MAX_REQUESTS_PER_STEP,
      isInteger: true,
    }),
    maxOutstanding: numberFlag(values['max-outstanding'], '--max-outstanding', defaults.maxOutstanding, {
      min: 1,
      max: MAX_CONCURRENCY,
      isInteger: true,
    }),
    ...(abandonAfterS === undefined ? {} : { abandonAfterMs: 1000 * abandonAfterS }),
    seed: numberFlag(values.seed, '--seed', defaults.seed, { min: 0, max: 2 ** 32 - 1, isInteger: true }),
    ...(sloText === undefined ? {} : { slo: parseSlo(sloText) }),
    ...(gpuHourUsd === undefined ? {} : { gpuHourUsd }),
    gpus: numberFlag(values.gpus, '--gpus', defaults.gpus, { min: 0.01, max: 100_000 }),
    ...(targetRps === undefined ? {} : { targetRps }),
    ...(values.label === undefined ? {} : { label: values.label }),
    ...(values.commit === undefined ? {} : { commit: toCommit(values.commit) }),
    ...(values['metrics-url'] === undefined ? {} : { metricsUrl: values['metrics-url'] }),
    scrapeIntervalMs:
      1000 * numberFlag(values['scrape-interval-s'], '--scrape-interval-s', defaults.scrapeIntervalS, { min: 0.05, max: 3600 }),
    isGpuSampling: gpuMode === 'auto',
    ...(apiKey === undefined ? {} : { apiKey }),
    preflightTimeoutMs:
      1000 * numberFlag(values['preflight-timeout-s'], '--preflight-timeout-s', defaults.preflightTimeoutS, { min: 0.05, max: 120 }),
  };
}

function toCommit(text: string): string {
  if (!/^[0-9a-f]{7,64}$/.test(text)) throw usageError(`Expected --commit to be a commit hash (7 to 64 hex digits): got '${text}'`);
  return text;
}

export interface RampRunRequest {
  /** The command's name, for the recorded command line. */
  commandName: string;
  config: RampConfig;
  urls: TargetUrls;
  /** The endpoint the workload sends to, for messages. */
  endpoint: string;
  workload: Workload;
  label: string;
  /** How the capacity step is chosen among those meeting the SLO. @default 'throughput' */
  capacityRankedBy?: CapacityRank;
  /** Written to the results' notes, after the run's own. */
  notes?: readonly string[];
  /** Whether the model should be one the server lists in /v1/models (a realtime model name need not). @default true */
  isListedModel?: boolean;
  /** More notes drawn from the finished results (a voice call's cost per call). */
  notesFromResults?: (results: BenchResults) => readonly string[];
}

/** Runs the ramp and writes its results; returns the command's exit code. */
export async function runRampCommand(
  request: RampRunRequest,
  context: Pick<CommandContext<typeof RAMP_FLAGS>, 'values' | 'args' | 'io' | 'deps' | 'cwd' | 'clock' | 'outputDir' | 'interruptibly'>,
  fetchFn: typeof globalThis.fetch,
): Promise<number> {
  const { config, urls, workload, label } = request;
  const { io, deps, clock } = context;
  const startedAtMs = clock.wallMs();
  // Fail before sending anything when the results could not be written afterwards.
  const outDir = await context.outputDir(context.values.out, `${timestampForPath(startedAtMs)}-${slug(label)}`);

  const found = await preflight(
    { urls, timeoutMs: config.preflightTimeoutMs, ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }) },
    { fetch: fetchFn, clock },
  );
  if (request.isListedModel !== false && found.models !== undefined && !found.models.includes(config.model)) {
    io.stderr.write(
      `Warning: the server does not list model '${config.model}' (it lists: ${found.models.slice(0, 10).join(', ') || 'none'})\n`,
    );
  }

  const scraper =
    urls.metrics === undefined
      ? undefined
      : createMetricsScraper(
          {
            url: urls.metrics,
            intervalMs: config.scrapeIntervalMs,
            timeoutMs: Math.min(2000, Math.max(200, config.scrapeIntervalMs)),
            model: config.model,
            ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }),
          },
          { fetch: fetchFn, clock },
        );
  const gpu = config.isGpuSampling
    ? createGpuSampler(
        { intervalMs: GPU_SAMPLE_INTERVAL_MS },
        { clock, ...(deps.spawnGpuSampler === undefined ? {} : { spawn: deps.spawnGpuSampler }) },
      )
    : undefined;
  const progress = createProgressReporter(
    {
      isTTY: io.isTTY,
      mode: config.mode,
      totalSteps: config.levels.length * config.reps,
      reps: config.reps,
      stepMs: config.durationMs + config.warmupMs,
    },
    { out: io.stdout, clock },
  );

  io.stdout.write(
    `Bench ${label}: ${config.mode === 'closed' ? 'concurrency' : 'rate'} ${config.levels.join(',')} x ${config.reps} rep(s), ${config.durationMs / 1000} s + ${config.warmupMs / 1000} s warmup per step, against ${request.endpoint}\n`,
  );

  const cost = { gpus: config.gpus, ...(config.gpuHourUsd === undefined ? {} : { gpuHourUsd: config.gpuHourUsd }) };
  const run = await context
    .interruptibly(
      () => progress.message('Interrupted: stopping (results so far will be written)'),
      (signal) =>
        runRamp(
          {
            plan: { mode: config.mode, levels: config.levels, reps: config.reps, durationMs: config.durationMs, warmupMs: config.warmupMs },
            timeoutMs: config.timeoutMs,
            maxRequestsPerStep: config.maxRequests,
            maxOutstanding: config.maxOutstanding,
            ...(config.abandonAfterMs === undefined ? {} : { abandonAfterMs: config.abandonAfterMs }),
            seed: config.seed,
            ...(config.slo === undefined ? {} : { slo: config.slo }),
            cost,
          },
          {
            workload,
            clock,
            progress,
            clientMonitor: deps.clientMonitor ?? createClientMonitor(),
            ...(scraper === undefined ? {} : { scraper }),
            ...(gpu === undefined ? {} : { gpu }),
            signal,
          },
        ),
    )
    .finally(() => workload.close?.());

  const capacityOptions = {
    ...(config.slo === undefined ? {} : { slo: config.slo }),
    cost,
    ...(config.targetRps === undefined ? {} : { targetRps: config.targetRps }),
    ...(request.capacityRankedBy === undefined ? {} : { rankedBy: request.capacityRankedBy }),
  };
  const capacity = decideCapacity(run.steps, capacityOptions);
  const peak = findPeak(run.steps, capacityOptions);
  const provenance = await readRunProvenance({
    cwd: context.cwd,
    command: ['voxmux', 'bench', ...redactArgv([request.commandName, ...context.args])],
    startedAtMs,
    endedAtMs: clock.wallMs(),
    ...(config.commit === undefined ? {} : { gitCommit: config.commit }),
  });
  const results: BenchResults = {
    schema: RESULTS_SCHEMA,
    label,
    mode: config.mode,
    workload: workload.info,
    ...provenance,
    options: {
      levels: config.levels,
      reps: config.reps,
      durationMs: config.durationMs,
      warmupMs: config.warmupMs,
      timeoutMs: config.timeoutMs,
      maxRequestsPerStep: config.maxRequests,
      ...(config.mode === 'open' ? { maxOutstanding: config.maxOutstanding } : {}),
      ...(config.mode === 'open' || workload.info.kind === 'speech' ? { seed: config.seed } : {}),
      ...(config.abandonAfterMs === undefined ? {} : { abandonAfterMs: config.abandonAfterMs }),
      ...(config.slo === undefined ? {} : { slo: config.slo.map((clause) => clause.text) }),
      ...(config.gpuHourUsd === undefined ? {} : { gpuHourUsd: config.gpuHourUsd }),
      gpus: config.gpus,
      ...(config.targetRps === undefined ? {} : { targetRps: config.targetRps }),
    },
    serverMetrics:
      scraper === undefined
        ? { state: 'off' }
        : {
            state: scraper.state() === 'ok' ? 'ok' : 'unavailable',
            ...(urls.metrics === undefined ? {} : { url: urls.metrics }),
            ...(scraper.note() === undefined ? {} : { note: scraper.note()! }),
          },
    gpuMetrics:
      gpu === undefined
        ? { state: 'off' }
        : { state: gpu.isAvailable() ? 'ok' : 'unavailable', ...(gpu.note() === undefined ? {} : { note: gpu.note()! }) },
    steps: run.steps,
    ...(peak === undefined ? {} : { peak }),
    ...(capacity === undefined ? {} : { capacity }),
    ...(run.stoppedEarly === undefined ? {} : { stoppedEarly: run.stoppedEarly }),
    notes: [
      ...(run.isInterrupted ? ['The run was interrupted; the last level may hold fewer reps.'] : []),
      ...collectNotes(run.steps),
      ...(request.notes ?? []),
    ],
  };
  results.notes.push(...(request.notesFromResults?.(results) ?? []));

  if (run.steps.length > 0) {
    await writeRunOutputs(outDir, results);
    io.stdout.write(`\n${formatStepTable(results)}\n\n`);
    for (const line of capacityLines(results)) io.stdout.write(`${line}\n`);
    for (const note of results.notes) io.stdout.write(`Note: ${note}\n`);
    io.stdout.write(`Wrote ${join(outDir, 'results.json')}, results.csv, plot.svg, summary.md\n`);
  }

  if (run.isInterrupted) {
    io.stderr.write('Bench interrupted\n');
    return exitCodeOf('interrupted');
  }
  if (!run.steps.some((step) => countSuccesses(step) > 0)) {
    io.stderr.write(`Bench failed: no request succeeded against ${request.endpoint}: ${run.stoppedEarly ?? 'no step ran'}\n`);
    return exitCodeOf('all_failed');
  }
  if (run.stoppedEarly !== undefined) io.stderr.write(`Stopped early: ${run.stoppedEarly}\n`);
  return 0;
}

async function writeRunOutputs(outDir: string, results: BenchResults): Promise<void> {
  await mkdir(outDir, { recursive: true });
  const sloText = results.options.slo ?? [];
  // The latency panel's SLO line: the first-byte p95 clause for streamed audio, else the p95 clause.
  const isSpeech = results.workload.kind === 'speech';
  const pattern = isSpeech ? /^ttfb_p95<=?([\d.]+)ms$/ : /^p95<=?([\d.]+)ms$/;
  const p95Slo = sloText.map((text) => pattern.exec(text)?.[1]).find((value) => value !== undefined);
  const svg = renderPlotSvg({
    title: `${results.label}: ${results.workload.kind}, ${results.startedAt}`,
    xLabel: results.mode === 'closed' ? (isSpeech ? 'concurrent streams' : 'concurrency') : 'offered rate (requests / s)',
    series: [toPlotSeries(results)],
    panels: plotPanelsFor(results),
    ...(p95Slo === undefined ? {} : { sloP95Ms: Number(p95Slo) }),
  });
  await writeFile(join(outDir, 'results.json'), toJson(results));
  await writeFile(join(outDir, 'results.csv'), toCsv(results));
  await writeFile(join(outDir, 'plot.svg'), svg);
  await writeFile(join(outDir, 'summary.md'), toMarkdownSummary(results));
}
