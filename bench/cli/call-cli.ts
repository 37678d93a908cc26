/**
 * `voxmux bench call`: ramps concurrent voice calls on the OpenAI Realtime WebSocket
 * (`/v1/realtime`) with scripted callers (call-workload.ts), and reports per level each turn's
 * stages from the end of the caller's speech (transcript, the LLM's first token, first audio byte,
 * first audio byte less the LLM's time), stalls of the answer's audio, the most concurrent calls
 * that meet the SLO, and the cost of a 5- and a 20-minute call. The callers' utterances are
 * synthesized once, before the ramp, by the server's own /v1/audio/speech in several voices, or read
 * from a folder an earlier run saved them to (call-utterances.ts).
 * With --fake-llm the bench runs a local OpenAI-compatible LLM with a set first-token delay and
 * token rate (fake-llm.ts): point the server's `realtime.llm.baseUrl` at it, and the LLM's time is
 * measured apart from the server's.
 */
import { resolve } from 'node:path';
import { usageError } from './bench-error.js';
import { loadUtterances, saveUtterances, synthesizeUtterances } from './call-utterances.js';
import { createCallWorkload, type CallTotals } from './call-workload.js';
import { defineCommand, type FlagValues } from './command.js';
import { startFakeLlm, type FakeLlm } from './fake-llm.js';
import { numberFlag, optionalNumber } from './flags.js';
import { createHttpFetch } from './http-fetch.js';
import { RAMP_FLAGS, runRampCommand, toRampConfig, type RampConfig, type RampDefaults } from './ramp-command.js';
import type { BenchResults } from './report.js';
import { readTextFile } from './speech-texts.js';
import { resolveTargetUrls } from './target.js';

const CALL_DEFAULTS: RampDefaults = {
  concurrency: '1,2,4,8,16,32',
  reps: 1,
  durationS: 60,
  warmupS: 10,
  timeoutS: 60,
  maxRequests: 100_000,
  maxOutstanding: 1000,
  seed: 1,
  gpus: 1,
  scrapeIntervalS: 1,
  preflightTimeoutS: 3,
  slo: 'ttfb_p50<=300ms,ttfb_p95<=600ms,stalls<=0%',
};

/** What the scripted callers say, when no --text-file is given. */
export const CALLER_SENTENCES: readonly string[] = [
  'Hello, I would like to book a table for two people tomorrow evening.',
  'Can you tell me when my order will arrive?',
  'I need to change the address on my account.',
  'What time does the store open on Saturday?',
  'Please cancel my appointment for next week.',
  'I would like to speak to someone about my bill.',
  'Is there a pharmacy near the train station?',
  'My internet has not been working since this morning.',
];
const DEFAULT_REPLY = 'Sure, I can help with that. Let me check the details for you now. Is there anything else you need today?';

export const CALL_USAGE = `Usage:
  voxmux bench call --url URL [--fake-llm [HOST:]PORT] [options]

Each of N concurrent callers holds a call on /v1/realtime?model=MODEL (server VAD): it pauses,
speaks an utterance in real time in 20 ms frames of 24 kHz pcm16, and listens to the answer to its
end; one request is one turn, and a call hangs up after --turns-per-call turns. Turns are timed from
the end of the caller's speech; ttfb is the first audio byte, less the LLM's own time when the
server's LLM is this bench's --fake-llm.

call options:
  --url URL                 server root or API base (.../v1); ws:// or wss:// follows http(s)
  --model MODEL             the realtime model query (default voxmux-realtime)
  --speech-model MODEL      synthesizes the callers' utterances, before the ramp (default tts-1)
  --voices LIST             callers' voices, comma-separated (default alloy,ash,echo)
  --text-file FILE          utterances, one per line (default 8 built-in caller sentences)
  --save-utterances DIR     also write the synthesized utterances to DIR (raw pcm16 + utterances.json)
  --utterances DIR          read the utterances from DIR instead of synthesizing them (a server
                            without caller voices: save them with another server's speech first)
  --turns-per-call N        turns before a caller hangs up and calls again (default 10)
  --think-ms MIN-MAX        a caller's pause before speaking (default 400-1200)
  --silence-ms MS           server VAD silence_duration_ms (default 500)
  --assistant-voice V       the answer's voice (default alloy)
  --instructions TEXT       the assistant's instructions
  --fake-llm [HOST:]PORT    run a fake OpenAI-compatible LLM there for the server (realtime.llm.baseUrl
                            http://HOST:PORT/v1); without it the server's own LLM answers
  --llm-first-token-ms MS   the fake LLM's delay to its first token (default 150)
  --llm-tokens-per-s N      the fake LLM's token rate (default 50)
  --llm-reply TEXT          the fake LLM's answer (default two short sentences)
  --llm-input-usd-per-m P   LLM input price per million tokens, for the cost per call (default 0)
  --llm-output-usd-per-m P  LLM output price per million tokens (default 0)
  --call-minutes LIST       call lengths priced (default 5,20)
  --concurrency LIST        concurrent calls per level (default ${CALL_DEFAULTS.concurrency})
  --duration-s S            measured window of each level (default ${CALL_DEFAULTS.durationS})
  --warmup-s S              unmeasured time before each window (default ${CALL_DEFAULTS.warmupS})
  --timeout-s S             per-turn timeout (default ${CALL_DEFAULTS.timeoutS})
  --slo EXPR                capacity SLO (default ${CALL_DEFAULTS.slo}, plus errors<=1%)
  --gpu-hour-usd USD        price of one GPU-hour, for the cost per call
  --gpus N                  GPUs behind the server (default ${CALL_DEFAULTS.gpus})
  --seed N                  seed of the utterance and pause draws (default ${CALL_DEFAULTS.seed})
  --reps, --out, --label, --commit, --metrics-url, --scrape-interval-s, --gpu, --api-key-file, --api-key:
                            as for bench transcribe
`;

const CALL_FLAGS = {
  ...RAMP_FLAGS,
  'speech-model': { type: 'string' },
  voices: { type: 'string' },
  'text-file': { type: 'string' },
  'save-utterances': { type: 'string' },
  utterances: { type: 'string' },
  'turns-per-call': { type: 'string' },
  'think-ms': { type: 'string' },
  'silence-ms': { type: 'string' },
  'assistant-voice': { type: 'string' },
  instructions: { type: 'string' },
  'fake-llm': { type: 'string' },
  'llm-first-token-ms': { type: 'string' },
  'llm-tokens-per-s': { type: 'string' },
  'llm-reply': { type: 'string' },
  'llm-input-usd-per-m': { type: 'string' },
  'llm-output-usd-per-m': { type: 'string' },
  'call-minutes': { type: 'string' },
} as const;

interface CallConfig extends RampConfig {
  speechModel: string;
  voices: string[];
  texts: readonly string[];
  /** Where to read the utterances from instead of synthesizing them. */
  utterancesDir?: string;
  saveUtterancesDir?: string;
  turnsPerCall: number;
  thinkMs: [number, number];
  silenceMs: number;
  assistantVoice: string;
  instructions: string;
  fakeLlm?: { host: string; port: number; firstTokenMs: number; tokensPerSecond: number; reply: string };
  llmUsdPerMillion: { input: number; output: number };
  callMinutes: number[];
}

export const callCommand = defineCommand({
  name: 'call',
  usage: CALL_USAGE,
  flags: CALL_FLAGS,
  run: async (context) => {
    const { values, deps, cwd, io } = context;
    const fetchFn = deps.fetch ?? createHttpFetch();
    const config = await toCallConfig(values, cwd);
    const urls = resolveTargetUrls(config.url, config.metricsUrl === undefined ? {} : { metricsUrl: config.metricsUrl });
    const realtimeUrl = `${urls.origin.replace(/^http/, 'ws')}/v1/realtime?model=${encodeURIComponent(config.model)}`;
    let utterances;
    if (config.utterancesDir !== undefined) {
      utterances = await loadUtterances(config.utterancesDir);
      io.stdout.write(`Read ${utterances.length} caller utterances from ${config.utterancesDir}\n`);
    } else {
      io.stdout.write(`Synthesizing ${config.voices.length} x ${config.texts.length} caller utterances with ${config.speechModel}\n`);
      utterances = await synthesizeUtterances(config, urls.speech, fetchFn);
      if (config.saveUtterancesDir !== undefined) await saveUtterances(config.saveUtterancesDir, utterances);
    }
    let fakeLlm: FakeLlm | undefined;
    if (config.fakeLlm !== undefined) {
      const { host, port } = config.fakeLlm;
      fakeLlm = await startFakeLlm({
        reply: config.fakeLlm.reply,
        firstTokenDelayMs: config.fakeLlm.firstTokenMs,
        tokenDelayMs: 1000 / config.fakeLlm.tokensPerSecond,
        host,
        port,
        nowMs: () => context.clock.nowMs(),
      }).catch((err: unknown) => {
        const code = (err as { code?: unknown }).code;
        throw usageError(`Expected --fake-llm ${host}:${port} to be free to listen on: ${typeof code === 'string' ? code : String(err)}`);
      });
      io.stdout.write(
        `Fake LLM at ${fakeLlm.baseUrl} (first token ${config.fakeLlm.firstTokenMs} ms, ${config.fakeLlm.tokensPerSecond} tokens/s)\n`,
      );
    }
    const workload = createCallWorkload({
      realtimeUrl,
      model: config.model,
      utterances,
      seed: config.seed,
      turnsPerCall: config.turnsPerCall,
      thinkMs: config.thinkMs,
      instructions: config.instructions,
      voice: config.assistantVoice,
      silenceMs: config.silenceMs,
      ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }),
      ...(fakeLlm === undefined ? {} : { fakeLlm }),
    });
    const label = config.label ?? `calls @ ${new URL(urls.origin).host}`;
    try {
      return await runRampCommand(
        {
          commandName: 'call',
          config,
          urls,
          endpoint: realtimeUrl,
          workload,
          label,
          capacityRankedBy: 'level',
          isListedModel: false,
          notesFromResults: (results) => callNotes(results, workload.totals(), config),
        },
        context,
        fetchFn,
      );
    } finally {
      await fakeLlm?.close();
    }
  },
});

async function toCallConfig(values: FlagValues<typeof CALL_FLAGS>, cwd: string): Promise<CallConfig> {
  const ramp = await toRampConfig({ ...values, model: values.model ?? 'voxmux-realtime' }, CALL_DEFAULTS, cwd);
  if (values.utterances !== undefined) {
    const clashing = (['speech-model', 'voices', 'text-file', 'save-utterances'] as const).filter((f) => values[f] !== undefined);
    if (clashing.length > 0)
      throw usageError(`Expected --utterances without --${clashing.join(', --')}: the saved utterances are used as they are`);
  }
  const voices = (values.voices ?? 'alloy,ash,echo').split(',').map((v) => v.trim());
  if (voices.some((v) => v === '')) throw usageError(`Expected --voices to be a comma-separated list of voices: got '${values.voices}'`);
  const texts = values['text-file'] === undefined ? CALLER_SENTENCES : await readLines(resolve(cwd, values['text-file']));
  const think = /^(\d+)-(\d+)$/.exec(values['think-ms'] ?? '400-1200');
  if (think === null || Number(think[1]) > Number(think[2]) || Number(think[2]) > 60_000)
    throw usageError(`Expected --think-ms to be MIN-MAX milliseconds, at most 60000: got '${values['think-ms']}'`);
  const callMinutes = (values['call-minutes'] ?? '5,20').split(',').map((m) => Number(m));
  if (callMinutes.some((m) => !Number.isFinite(m) || m <= 0 || m > 24 * 60))
    throw usageError(`Expected --call-minutes to be a list of minutes: got '${values['call-minutes']}'`);
  let fakeLlm: CallConfig['fakeLlm'];
  if (values['fake-llm'] !== undefined) {
    const match = /^(?:([^:]+):)?(\d+)$/.exec(values['fake-llm']);
    const port = Number(match?.[2]);
    if (match === null || port < 1 || port > 65_535) throw usageError(`Expected --fake-llm to be [HOST:]PORT: got '${values['fake-llm']}'`);
    fakeLlm = {
      host: match[1] ?? '127.0.0.1',
      port,
      firstTokenMs: numberFlag(values['llm-first-token-ms'], '--llm-first-token-ms', 150, { min: 0, max: 60_000 }),
      tokensPerSecond: numberFlag(values['llm-tokens-per-s'], '--llm-tokens-per-s', 50, { min: 0.1, max: 100_000 }),
      reply: values['llm-reply'] ?? DEFAULT_REPLY,
    };
  } else if (values['llm-first-token-ms'] !== undefined || values['llm-tokens-per-s'] !== undefined || values['llm-reply'] !== undefined) {
    throw usageError('Expected --llm-first-token-ms, --llm-tokens-per-s and --llm-reply only with --fake-llm');
  }
  return {
    ...ramp,
    speechModel: values['speech-model'] ?? 'tts-1',
    voices,
    texts,
    ...(values.utterances === undefined ? {} : { utterancesDir: resolve(cwd, values.utterances) }),
    ...(values['save-utterances'] === undefined ? {} : { saveUtterancesDir: resolve(cwd, values['save-utterances']) }),
    turnsPerCall: numberFlag(values['turns-per-call'], '--turns-per-call', 10, { min: 1, max: 10_000, isInteger: true }),
    thinkMs: [Number(think[1]), Number(think[2])],
    silenceMs: numberFlag(values['silence-ms'], '--silence-ms', 500, { min: 100, max: 10_000, isInteger: true }),
    assistantVoice: values['assistant-voice'] ?? 'alloy',
    instructions: values.instructions ?? 'You are a helpful voice assistant. Answer briefly.',
    ...(fakeLlm === undefined ? {} : { fakeLlm }),
    llmUsdPerMillion: {
      input: optionalNumber(values['llm-input-usd-per-m'], '--llm-input-usd-per-m', { min: 0, max: 1e6 }) ?? 0,
      output: optionalNumber(values['llm-output-usd-per-m'], '--llm-output-usd-per-m', { min: 0, max: 1e6 }) ?? 0,
    },
    callMinutes,
  };
}

async function readLines(path: string): Promise<string[]> {
  const texts = await readTextFile(path);
  return texts.kind === 'lines' ? [...texts.lines] : [...texts.sentences];
}

const usd = (value: number) => `$${value < 0.01 ? value.toFixed(5) : value.toFixed(4)}`;

/** The calls held at the SLO, the cost of each priced call length, and the transcripts' WER. */
export function callNotes(
  results: BenchResults,
  totals: CallTotals,
  config: Pick<CallConfig, 'callMinutes' | 'llmUsdPerMillion'>,
): string[] {
  const notes: string[] = [];
  if (totals.words > 0)
    notes.push(
      `Transcripts of the callers' speech: WER ${((100 * totals.wordErrors) / totals.words).toFixed(1)} % over ${totals.turns} turns (${totals.callsOpened} calls opened)`,
    );
  const capacity = results.capacity;
  const held = capacity?.basis === 'slo' ? capacity.level : undefined;
  if (held === undefined) {
    notes.push('Calls held at the SLO: none of the levels met it');
    return notes;
  }
  const step = results.steps.find((s) => s.level === held);
  notes.push(`Calls held at the SLO: ${held} concurrent call(s) on ${results.options.gpus} GPU(s)`);
  const turnsPerCallMinute = step === undefined || held === 0 ? 0 : (step.requestsPerSecond * 60) / held;
  const llmPerTurn =
    totals.llmTurns === 0
      ? 0
      : ((totals.promptTokens / totals.llmTurns) * config.llmUsdPerMillion.input +
          (totals.completionTokens / totals.llmTurns) * config.llmUsdPerMillion.output) /
        1e6;
  const gpuHourUsd = results.options.gpuHourUsd;
  for (const minutes of config.callMinutes) {
    const gpu = gpuHourUsd === undefined ? undefined : (gpuHourUsd * results.options.gpus * minutes) / 60 / held;
    const llm = llmPerTurn * turnsPerCallMinute * minutes;
    notes.push(
      `Cost of a ${minutes}-minute call: ${gpu === undefined ? 'GPU share unknown (no --gpu-hour-usd)' : `GPU ${usd(gpu)} (${results.options.gpus} GPU(s) at $${gpuHourUsd}/h shared by ${held} calls)`}, LLM ${usd(llm)} (${turnsPerCallMinute.toFixed(1)} turns a minute)${gpu === undefined ? '' : `, total ${usd(gpu + llm)}`}`,
    );
  }
  return notes;
}
