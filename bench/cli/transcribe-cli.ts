/**
 * `voxmux bench transcribe`: ramps load on a transcription endpoint level by level (closed loop:
 * clients; open loop: offered requests/s), and reports latency, throughput, capacity at an SLO and
 * cost per level, with the server's own metrics and the GPU's when they can be read.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { loadAudioInputs } from './audio-input.js';
import { exitCodeOf, usageError } from './bench-error.js';
import { createClientMonitor } from './client-monitor.js';
import { defineCommand, type FlagValues } from './command.js';
import { numberFlag, optionalNumber, parseExtraFields, readApiKey, redactArgv } from './flags.js';
import { createGpuSampler } from './gpu-sampler.js';
import { createHttpFetch } from './http-fetch.js';
import { readRunProvenance } from './machine-info.js';
import { createMetricsScraper } from './metrics-scraper.js';
import { slug, timestampForPath } from './output-dir.js';
import { renderPlotSvg, toPlotSeries } from './plot.js';
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
} from './report.js';
import { preflight, resolveTargetUrls } from './target.js';
import { createTranscribeWorkload } from './transcribe-workload.js';

const TRANSCRIBE_DEFAULTS = {
  concurrency: '1,2,4,8,16,32,64',
  reps: 1,
  durationS: 30,
  warmupS: 2,
  timeoutS: 60,
  maxRequests: 100_000,
  maxOutstanding: 1000,
  seed: 1,
  responseFormat: 'json',
  gpus: 1,
  scrapeIntervalS: 1,
  gpuSampleIntervalS: 0.5,
  preflightTimeoutS: 3,
} as const;

/** Hard bounds, whatever the flags say: every run stops by itself. */
const MAX_DURATION_S = 3600;
const MAX_REPS = 100;
// A request still unanswered after 5 minutes measures a hung server, not a latency.
const MAX_TIMEOUT_S = 300;
const MAX_REQUESTS_PER_STEP = 10_000_000;

export const BENCH_USAGE = `Usage:
  voxmux bench transcribe --url URL --model MODEL --audio FILE|DIR [--audio ...] [options]
  voxmux bench accuracy --url URL --model MODEL --manifest FILE [options]   (--help for its options)
  voxmux bench compare A.json B.json [...] [--out DIR]

transcribe options:
  --url URL                 server root, API base (.../v1) or the transcriptions endpoint
  --model MODEL             model name sent with every request
  --audio PATH              audio file or directory (repeatable; extra arguments are files too)
  --audio-seconds S         duration of non-WAV inputs, for audio-seconds per second and cost
  --concurrency LIST        closed loop levels: 1,2,4,8 | 1-16 | 1-64x2 | 1,2,4,...,100 (default ${TRANSCRIBE_DEFAULTS.concurrency})
  --rate LIST               open loop instead: offered requests/s, Poisson arrivals (same list syntax)
  --reps N                  repetitions of each level (default ${TRANSCRIBE_DEFAULTS.reps})
  --duration-s S            measured window of each step (default ${TRANSCRIBE_DEFAULTS.durationS})
  --warmup-s S              unmeasured time before each window (default ${TRANSCRIBE_DEFAULTS.warmupS})
  --timeout-s S             per-request timeout (default ${TRANSCRIBE_DEFAULTS.timeoutS})
  --max-requests N          at most N requests per step (default ${TRANSCRIBE_DEFAULTS.maxRequests})
  --max-outstanding N       open loop: cap on requests in flight; later arrivals are dropped (default ${TRANSCRIBE_DEFAULTS.maxOutstanding})
  --abandon-after-s S       abort requests still in flight S seconds after a step's window (they are not
                            measured); default: wait for them, which can take long above capacity
  --seed N                  open loop: arrival seed (default ${TRANSCRIBE_DEFAULTS.seed})
  --stream                  send stream=true and measure time to first delta (SSE)
  --response-format F       json | text | srt | verbose_json | vtt (default json)
  --field KEY=VALUE         extra multipart field, e.g. language=en (repeatable)
  --slo EXPR                capacity SLO, e.g. p95<=1000ms or p99<=2s,errors<=0.5%
  --gpu-hour-usd USD        price of one GPU-hour, for cost figures
  --gpus N                  GPUs behind the server (default ${TRANSCRIBE_DEFAULTS.gpus})
  --target-rps R            report the GPUs needed for R requests/s
  --out DIR                 output directory (default bench/out/<time>-<label>)
  --label TEXT              name of this run in plots and comparisons
  --metrics-url URL|off     Prometheus metrics on the same origin (default <origin>/metrics)
  --scrape-interval-s S     metrics scrape period (default ${TRANSCRIBE_DEFAULTS.scrapeIntervalS})
  --gpu auto|off            sample nvidia-smi when present (default auto)
  --api-key-file PATH       file holding the API key (sent as a bearer token)
  --api-key KEY             the API key itself (kept out of the results file)
`;

const TRANSCRIBE_FLAGS = {
  url: { type: 'string' },
  model: { type: 'string' },
  audio: { type: 'string', multiple: true },
  'audio-seconds': { type: 'string' },
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
  stream: { type: 'boolean' },
  'response-format': { type: 'string' },
  field: { type: 'string', multiple: true },
  slo: { type: 'string', multiple: true },
  'gpu-hour-usd': { type: 'string' },
  gpus: { type: 'string' },
  'target-rps': { type: 'string' },
  out: { type: 'string' },
  label: { type: 'string' },
  'metrics-url': { type: 'string' },
  'scrape-interval-s': { type: 'string' },
  gpu: { type: 'string' },
  'api-key-file': { type: 'string' },
  'api-key': { type: 'string' },
  'preflight-timeout-s': { type: 'string' },
} as const;

export const transcribeCommand = defineCommand({
  name: 'transcribe',
  // The general usage: it lists the transcribe options.
  usage: BENCH_USAGE,
  flags: TRANSCRIBE_FLAGS,
  hasPositionals: true,
  run: async ({ values, positionals, args, io, deps, cwd, clock, outputDir, interruptibly }) => {
    const fetchFn = deps.fetch ?? createHttpFetch();
    const config = await toTranscribeConfig(values, positionals, cwd);
    const urls = resolveTargetUrls(config.url, config.metricsUrl === undefined ? {} : { metricsUrl: config.metricsUrl });
    const inputs = await loadAudioInputs({
      paths: config.audioPaths,
      ...(config.audioSeconds === undefined ? {} : { fallbackAudioSeconds: config.audioSeconds }),
    });
    const label = config.label ?? `${config.model} @ ${new URL(urls.origin).host}${config.isStreaming ? ' (stream)' : ''}`;
    const startedAtMs = clock.wallMs();
    // Fail before sending anything when the results could not be written afterwards.
    const outDir = await outputDir(values.out, `${timestampForPath(startedAtMs)}-${slug(label)}`);

    const found = await preflight(
      { urls, timeoutMs: config.preflightTimeoutMs, ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }) },
      { fetch: fetchFn, clock },
    );
    if (found.models !== undefined && !found.models.includes(config.model)) {
      io.stderr.write(
        `Warning: the server does not list model '${config.model}' (it lists: ${found.models.slice(0, 10).join(', ') || 'none'})\n`,
      );
    }

    const workload = createTranscribeWorkload(
      {
        endpoint: urls.transcriptions,
        model: config.model,
        inputs,
        isStreaming: config.isStreaming,
        responseFormat: config.responseFormat,
        extraFields: config.extraFields,
        ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }),
      },
      { fetch: fetchFn },
    );
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
          { intervalMs: TRANSCRIBE_DEFAULTS.gpuSampleIntervalS * 1000 },
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
      `Bench ${label}: ${config.mode === 'closed' ? 'concurrency' : 'rate'} ${config.levels.join(',')} x ${config.reps} rep(s), ${config.durationMs / 1000} s + ${config.warmupMs / 1000} s warmup per step, against ${urls.transcriptions}\n`,
    );

    const run = await interruptibly(
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
            cost: { gpus: config.gpus, ...(config.gpuHourUsd === undefined ? {} : { gpuHourUsd: config.gpuHourUsd }) },
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
    );

    const capacityOptions = {
      ...(config.slo === undefined ? {} : { slo: config.slo }),
      cost: { gpus: config.gpus, ...(config.gpuHourUsd === undefined ? {} : { gpuHourUsd: config.gpuHourUsd }) },
      ...(config.targetRps === undefined ? {} : { targetRps: config.targetRps }),
    };
    const capacity = decideCapacity(run.steps, capacityOptions);
    const peak = findPeak(run.steps, capacityOptions);
    const provenance = await readRunProvenance({
      cwd,
      command: ['voxmux', 'bench', ...redactArgv(['transcribe', ...args])],
      startedAtMs,
      endedAtMs: clock.wallMs(),
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
        ...(config.mode === 'open' ? { maxOutstanding: config.maxOutstanding, seed: config.seed } : {}),
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
      notes: [...(run.isInterrupted ? ['The run was interrupted; the last level may hold fewer reps.'] : []), ...collectNotes(run.steps)],
    };

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
      io.stderr.write(`Bench failed: no request succeeded against ${urls.transcriptions}: ${run.stoppedEarly ?? 'no step ran'}\n`);
      return exitCodeOf('all_failed');
    }
    if (run.stoppedEarly !== undefined) io.stderr.write(`Stopped early: ${run.stoppedEarly}\n`);
    return 0;
  },
});

interface TranscribeConfig {
  url: string;
  model: string;
  audioPaths: string[];
  audioSeconds?: number;
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
  isStreaming: boolean;
  responseFormat: string;
  extraFields: Array<[string, string]>;
  slo?: SloClause[];
  gpuHourUsd?: number;
  gpus: number;
  targetRps?: number;
  label?: string;
  metricsUrl?: string;
  scrapeIntervalMs: number;
  isGpuSampling: boolean;
  apiKey?: string;
  preflightTimeoutMs: number;
}

async function toTranscribeConfig(
  values: FlagValues<typeof TRANSCRIBE_FLAGS>,
  positionals: string[],
  cwd: string,
): Promise<TranscribeConfig> {
  if (values.url === undefined) throw usageError('Missing required flag: --url');
  if (values.model === undefined || values.model === '') throw usageError('Missing required flag: --model');
  const audioPaths = [...(values.audio ?? []), ...positionals].map((path) => resolve(cwd, path));
  if (audioPaths.length === 0) throw usageError('Missing required flag: --audio');
  if (values.rate !== undefined && values.concurrency !== undefined) {
    throw usageError('Expected either --concurrency (closed loop) or --rate (open loop): got both');
  }
  const mode: LoadMode = values.rate === undefined ? 'closed' : 'open';
  const levels =
    mode === 'closed'
      ? parseLevelList(values.concurrency ?? TRANSCRIBE_DEFAULTS.concurrency, {
          flag: '--concurrency',
          isInteger: true,
          max: MAX_CONCURRENCY,
        })
      : parseLevelList(values.rate!, { flag: '--rate', isInteger: false, max: MAX_RATE_RPS });
  const extraFields = parseExtraFields(values.field ?? [], ['file', 'model', 'stream', 'response_format']);
  const gpuMode = values.gpu ?? 'auto';
  if (gpuMode !== 'auto' && gpuMode !== 'off') throw usageError(`Expected --gpu to be auto or off: got '${gpuMode}'`);
  const apiKey = await readApiKey(values, cwd);
  const sloText = values.slo?.join(',');
  const audioSeconds = optionalNumber(values['audio-seconds'], '--audio-seconds', { min: 0.001, max: 86_400 });
  const gpuHourUsd = optionalNumber(values['gpu-hour-usd'], '--gpu-hour-usd', { min: 0, max: 1_000_000 });
  const targetRps = optionalNumber(values['target-rps'], '--target-rps', { min: 0.000001, max: 1e9 });
  const abandonAfterS = optionalNumber(values['abandon-after-s'], '--abandon-after-s', { min: 0, max: MAX_TIMEOUT_S });
  return {
    url: values.url,
    model: values.model,
    audioPaths,
    ...(audioSeconds === undefined ? {} : { audioSeconds }),
    mode,
    levels,
    reps: numberFlag(values.reps, '--reps', TRANSCRIBE_DEFAULTS.reps, { min: 1, max: MAX_REPS, isInteger: true }),
    durationMs: 1000 * numberFlag(values['duration-s'], '--duration-s', TRANSCRIBE_DEFAULTS.durationS, { min: 0.1, max: MAX_DURATION_S }),
    warmupMs: 1000 * numberFlag(values['warmup-s'], '--warmup-s', TRANSCRIBE_DEFAULTS.warmupS, { min: 0, max: MAX_DURATION_S }),
    timeoutMs: 1000 * numberFlag(values['timeout-s'], '--timeout-s', TRANSCRIBE_DEFAULTS.timeoutS, { min: 0.01, max: MAX_TIMEOUT_S }),
    maxRequests: numberFlag(values['max-requests'], '--max-requests', TRANSCRIBE_DEFAULTS.maxRequests, {
      min: 1,
      max: MAX_REQUESTS_PER_STEP,
      isInteger: true,
    }),
    maxOutstanding: numberFlag(values['max-outstanding'], '--max-outstanding', TRANSCRIBE_DEFAULTS.maxOutstanding, {
      min: 1,
      max: MAX_CONCURRENCY,
      isInteger: true,
    }),
    ...(abandonAfterS === undefined ? {} : { abandonAfterMs: 1000 * abandonAfterS }),
    seed: numberFlag(values.seed, '--seed', TRANSCRIBE_DEFAULTS.seed, { min: 0, max: 2 ** 32 - 1, isInteger: true }),
    isStreaming: values.stream === true,
    responseFormat: values['response-format'] ?? TRANSCRIBE_DEFAULTS.responseFormat,
    extraFields,
    ...(sloText === undefined ? {} : { slo: parseSlo(sloText) }),
    ...(gpuHourUsd === undefined ? {} : { gpuHourUsd }),
    gpus: numberFlag(values.gpus, '--gpus', TRANSCRIBE_DEFAULTS.gpus, { min: 0.01, max: 100_000 }),
    ...(targetRps === undefined ? {} : { targetRps }),
    ...(values.label === undefined ? {} : { label: values.label }),
    ...(values['metrics-url'] === undefined ? {} : { metricsUrl: values['metrics-url'] }),
    scrapeIntervalMs:
      1000 * numberFlag(values['scrape-interval-s'], '--scrape-interval-s', TRANSCRIBE_DEFAULTS.scrapeIntervalS, { min: 0.05, max: 3600 }),
    isGpuSampling: gpuMode === 'auto',
    ...(apiKey === undefined ? {} : { apiKey }),
    preflightTimeoutMs:
      1000 *
      numberFlag(values['preflight-timeout-s'], '--preflight-timeout-s', TRANSCRIBE_DEFAULTS.preflightTimeoutS, { min: 0.05, max: 120 }),
  };
}

async function writeRunOutputs(outDir: string, results: BenchResults): Promise<void> {
  await mkdir(outDir, { recursive: true });
  const p95Slo = results.options.slo?.map((text) => /^p95<=?([\d.]+)ms$/.exec(text)?.[1]).find((value) => value !== undefined);
  const svg = renderPlotSvg({
    title: `${results.label}: ${results.workload.kind}, ${results.startedAt}`,
    xLabel: results.mode === 'closed' ? 'concurrency' : 'offered rate (requests / s)',
    series: [toPlotSeries(results)],
    ...(p95Slo === undefined ? {} : { sloP95Ms: Number(p95Slo) }),
  });
  await writeFile(join(outDir, 'results.json'), toJson(results));
  await writeFile(join(outDir, 'results.csv'), toCsv(results));
  await writeFile(join(outDir, 'plot.svg'), svg);
  await writeFile(join(outDir, 'summary.md'), toMarkdownSummary(results));
}
