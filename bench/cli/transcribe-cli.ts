/**
 * `voxmux bench transcribe`: ramps load on a transcription endpoint level by level (closed loop:
 * clients; open loop: offered requests/s), and reports latency, throughput, capacity at an SLO and
 * cost per level, with the server's own metrics and the GPU's when they can be read.
 */
import { resolve } from 'node:path';
import { loadAudioInputs } from './audio-input.js';
import { usageError } from './bench-error.js';
import { defineCommand, type FlagValues } from './command.js';
import { optionalNumber, parseExtraFields } from './flags.js';
import { createHttpFetch } from './http-fetch.js';
import { RAMP_FLAGS, runRampCommand, toRampConfig, type RampConfig, type RampDefaults } from './ramp-command.js';
import { resolveTargetUrls } from './target.js';
import { createTranscribeWorkload } from './transcribe-workload.js';

const TRANSCRIBE_DEFAULTS: RampDefaults = {
  concurrency: '1,2,4,8,16,32,64',
  reps: 1,
  durationS: 30,
  warmupS: 2,
  timeoutS: 60,
  maxRequests: 100_000,
  maxOutstanding: 1000,
  seed: 1,
  gpus: 1,
  scrapeIntervalS: 1,
  preflightTimeoutS: 3,
};
const DEFAULT_RESPONSE_FORMAT = 'json';

export const BENCH_USAGE = `Usage:
  voxmux bench transcribe --url URL --model MODEL --audio FILE|DIR [--audio ...] [options]
  voxmux bench speech --url URL --model MODEL [options]                     (--help for its options)
  voxmux bench accuracy --url URL --model MODEL --manifest FILE [options]   (--help for its options)
  voxmux bench diarize --mode accuracy|load --url URL --model MODEL [options] (--help for its options)
  voxmux bench call --url URL [--fake-llm PORT] [options]                  (--help for its options)
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
  --commit SHA              the commit the results record (default: the repository's HEAD)
  --metrics-url URL|off     Prometheus metrics on the same origin (default <origin>/metrics)
  --scrape-interval-s S     metrics scrape period (default ${TRANSCRIBE_DEFAULTS.scrapeIntervalS})
  --gpu auto|off            sample nvidia-smi when present (default auto)
  --api-key-file PATH       file holding the API key (sent as a bearer token)
  --api-key KEY             the API key itself (kept out of the results file)
`;

const TRANSCRIBE_FLAGS = {
  ...RAMP_FLAGS,
  audio: { type: 'string', multiple: true },
  'audio-seconds': { type: 'string' },
  stream: { type: 'boolean' },
  'response-format': { type: 'string' },
  field: { type: 'string', multiple: true },
} as const;

export const transcribeCommand = defineCommand({
  name: 'transcribe',
  // The general usage: it lists the transcribe options.
  usage: BENCH_USAGE,
  flags: TRANSCRIBE_FLAGS,
  hasPositionals: true,
  run: async (context) => {
    const { values, positionals, deps, cwd } = context;
    const fetchFn = deps.fetch ?? createHttpFetch();
    const config = await toTranscribeConfig(values, positionals, cwd);
    const urls = resolveTargetUrls(config.url, config.metricsUrl === undefined ? {} : { metricsUrl: config.metricsUrl });
    const inputs = await loadAudioInputs({
      paths: config.audioPaths,
      ...(config.audioSeconds === undefined ? {} : { fallbackAudioSeconds: config.audioSeconds }),
    });
    const label = config.label ?? `${config.model} @ ${new URL(urls.origin).host}${config.isStreaming ? ' (stream)' : ''}`;
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
    return runRampCommand({ commandName: 'transcribe', config, urls, endpoint: urls.transcriptions, workload, label }, context, fetchFn);
  },
});

interface TranscribeConfig extends RampConfig {
  audioPaths: string[];
  audioSeconds?: number;
  isStreaming: boolean;
  responseFormat: string;
  extraFields: Array<[string, string]>;
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
  const ramp = await toRampConfig(values, TRANSCRIBE_DEFAULTS, cwd);
  const extraFields = parseExtraFields(values.field ?? [], ['file', 'model', 'stream', 'response_format']);
  const audioSeconds = optionalNumber(values['audio-seconds'], '--audio-seconds', { min: 0.001, max: 86_400 });
  return {
    ...ramp,
    audioPaths,
    ...(audioSeconds === undefined ? {} : { audioSeconds }),
    isStreaming: values.stream === true,
    responseFormat: values['response-format'] ?? DEFAULT_RESPONSE_FORMAT,
    extraFields,
  };
}
