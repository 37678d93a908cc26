/**
 * `voxmux bench speech`: ramps concurrent speech streams (closed loop: each stream a loop of
 * calls) on an OpenAI-compatible /v1/audio/speech endpoint, with a seeded voice mix, and reports
 * per level the time to the first audio byte, the real-time factor, playback stalls, the audio
 * produced per second, the server's voice loads from disk and from host memory, errors and GPU
 * memory; its capacity is the most concurrent streams that meet the SLO (by default: no stalls
 * and first byte p95 <= 250 ms).
 */
import { resolve } from 'node:path';
import { usageError } from './bench-error.js';
import { defineCommand, type FlagValues } from './command.js';
import { numberFlag, optionalNumber } from './flags.js';
import { createHttpFetch } from './http-fetch.js';
import { RAMP_FLAGS, runRampCommand, toRampConfig, type RampConfig, type RampDefaults } from './ramp-command.js';
import { createSpeechWorkload, type SpeechPace } from './speech-workload.js';
import { BUILT_IN_SENTENCES, readTextFile, type SpeechTexts } from './speech-texts.js';
import { resolveTargetUrls } from './target.js';
import { createVoiceMix, toVoiceList, type VoiceMix, type VoiceMixKind } from './voice-mix.js';

const SPEECH_DEFAULTS: RampDefaults = {
  concurrency: '1,2,4,8,16,32,64,128',
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
  slo: 'ttfb_p95<=250ms,stalls<=0%',
};
const DEFAULT_ZIPF_S = 1.1;
const MAX_VOICES = 100_000;

export const SPEECH_USAGE = `Usage:
  voxmux bench speech --url URL --model MODEL [options]

Each of N concurrent streams sends one POST /v1/audio/speech after another (response_format pcm,
stream_format audio) and plays the answer as it arrives: a stall is audio arriving later than the
audio already received takes to play.

speech options:
  --url URL                 server root, API base (.../v1) or the speech endpoint
  --model MODEL             model name sent with every call
  --voices LIST             voices, comma-separated, most asked-for first (default alloy)
  --voice-prefix P          voices P0, P1, ... P(N-1), with --voice-count N (e.g. vits- and 64)
  --voice-count N           number of voices with --voice-prefix
  --mix uniform|zipf        voice mix over the voices (default uniform)
  --zipf-s S                Zipf exponent: voice k is asked for in proportion to 1/k^S (default ${DEFAULT_ZIPF_S})
  --seed N                  seed of the voice and text draws (default ${SPEECH_DEFAULTS.seed})
  --text-file FILE          inputs, one call per line (default: 1 to 3 built-in sentences per call)
  --speed X                 speed sent with every call, 0.25 to 4
  --pace none|playback      playback: a stream asks again only once the last answer would have
                            finished playing, like a caller (default none: as soon as it arrived)
  --concurrency LIST        concurrent streams per level: 1,2,4,...,128 | 1-128x2 (default ${SPEECH_DEFAULTS.concurrency})
  --rate LIST               open loop instead: offered calls/s, Poisson arrivals
  --reps N                  repetitions of each level (default ${SPEECH_DEFAULTS.reps})
  --duration-s S            measured window of each step (default ${SPEECH_DEFAULTS.durationS})
  --warmup-s S              unmeasured time before each window (default ${SPEECH_DEFAULTS.warmupS})
  --timeout-s S             per-call timeout (default ${SPEECH_DEFAULTS.timeoutS})
  --max-requests N          at most N calls per step (default ${SPEECH_DEFAULTS.maxRequests})
  --max-outstanding N       open loop: cap on calls in flight (default ${SPEECH_DEFAULTS.maxOutstanding})
  --abandon-after-s S       abort calls still in flight S seconds after a step's window
  --slo EXPR                capacity SLO (default ${SPEECH_DEFAULTS.slo}, plus errors<=1%);
                            metrics: ttfb_p50..ttfb_p99, p50..max (whole call), stalls, errors
  --gpu-hour-usd USD        price of one GPU-hour, for cost figures
  --gpus N                  GPUs behind the server (default ${SPEECH_DEFAULTS.gpus})
  --target-rps R            report the GPUs needed for R calls/s
  --out DIR                 output directory (default bench/out/<time>-<label>)
  --label TEXT              name of this run in plots and comparisons
  --commit SHA              the commit the results record (default: the repository's HEAD)
  --metrics-url URL|off     Prometheus metrics on the same origin (default <origin>/metrics)
  --scrape-interval-s S     metrics scrape period (default ${SPEECH_DEFAULTS.scrapeIntervalS})
  --gpu auto|off            sample nvidia-smi when present (default auto)
  --api-key-file PATH       file holding the API key (sent as a bearer token)
  --api-key KEY             the API key itself (kept out of the results file)
`;

const SPEECH_FLAGS = {
  ...RAMP_FLAGS,
  voices: { type: 'string' },
  'voice-prefix': { type: 'string' },
  'voice-count': { type: 'string' },
  mix: { type: 'string' },
  'zipf-s': { type: 'string' },
  'text-file': { type: 'string' },
  speed: { type: 'string' },
  pace: { type: 'string' },
} as const;

export const speechCommand = defineCommand({
  name: 'speech',
  usage: SPEECH_USAGE,
  flags: SPEECH_FLAGS,
  run: async (context) => {
    const { values, deps, cwd } = context;
    const fetchFn = deps.fetch ?? createHttpFetch();
    const config = await toSpeechConfig(values, cwd);
    const urls = resolveTargetUrls(config.url, config.metricsUrl === undefined ? {} : { metricsUrl: config.metricsUrl });
    const voiceCount = config.voiceMix.voices.length;
    const label =
      config.label ??
      `${config.model} @ ${new URL(urls.origin).host}, ${voiceCount} voice${voiceCount === 1 ? '' : 's'} ${config.voiceMix.kind}`;
    const workload = createSpeechWorkload(
      {
        endpoint: urls.speech,
        model: config.model,
        voiceMix: config.voiceMix,
        texts: config.texts,
        seed: config.seed,
        ...(config.speed === undefined ? {} : { speed: config.speed }),
        pace: config.pace,
        ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }),
      },
      { fetch: fetchFn },
    );
    return runRampCommand(
      { commandName: 'speech', config, urls, endpoint: urls.speech, workload, label, capacityRankedBy: 'level' },
      context,
      fetchFn,
    );
  },
});

interface SpeechConfig extends RampConfig {
  voiceMix: VoiceMix;
  texts: SpeechTexts;
  speed?: number;
  pace: SpeechPace;
}

async function toSpeechConfig(values: FlagValues<typeof SPEECH_FLAGS>, cwd: string): Promise<SpeechConfig> {
  const ramp = await toRampConfig(values, SPEECH_DEFAULTS, cwd);
  const mix = values.mix ?? 'uniform';
  if (mix !== 'uniform' && mix !== 'zipf') throw usageError(`Expected --mix to be uniform or zipf: got '${mix}'`);
  if (values['zipf-s'] !== undefined && mix !== 'zipf') throw usageError('Expected --zipf-s only with --mix zipf');
  const voiceCount = optionalNumber(values['voice-count'], '--voice-count', { min: 1, max: MAX_VOICES, isInteger: true });
  if (values['voice-prefix'] === '') throw usageError("Expected --voice-prefix to be non-empty: got ''");
  const voices = toVoiceList({
    ...(values.voices === undefined ? {} : { voices: values.voices }),
    ...(values['voice-prefix'] === undefined ? {} : { voicePrefix: values['voice-prefix'] }),
    ...(voiceCount === undefined ? {} : { voiceCount }),
  });
  const voiceMix = createVoiceMix({
    voices,
    kind: mix as VoiceMixKind,
    zipfS: numberFlag(values['zipf-s'], '--zipf-s', DEFAULT_ZIPF_S, { min: 0, max: 10 }),
  });
  const texts: SpeechTexts =
    values['text-file'] === undefined
      ? { kind: 'sentences', sentences: BUILT_IN_SENTENCES }
      : await readTextFile(resolve(cwd, values['text-file']));
  const speed = optionalNumber(values.speed, '--speed', { min: 0.25, max: 4 });
  const pace = values.pace ?? 'none';
  if (pace !== 'none' && pace !== 'playback') throw usageError(`Expected --pace to be none or playback: got '${pace}'`);
  return { ...ramp, voiceMix, texts, pace, ...(speed === undefined ? {} : { speed }) };
}
