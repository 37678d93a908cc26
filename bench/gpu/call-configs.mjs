// The voice-call benchmark's two server configurations (bench/gpu/run-call.sh), as voxmux config files:
//   call-a-naive:  one engine each, one thing at a time: Parakeet-shaped ASR at batch 1, eager; VITS
//                  speech, one stream at a time with room for one voice;
//   call-b-voxmux: ASR batched (up to 32) with CUDA graphs per length bucket; speech in 4 instances
//                  under MPS with 16 voices resident each and voice-affinity routing.
// Both answer with the bench's fake LLM (realtime.llm.baseUrl, FAKE_LLM_PORT) and voice the scripted
// callers with the CPU's Debian voices (flite), whose speech Silero VAD hears; random ASR weights
// give arbitrary transcripts, which the fake LLM answers all the same. With CALL_BENCH_UTTERANCES set
// (callers' speech saved elsewhere with `bench call --save-utterances`, for a machine without the
// Debian voices) the configurations leave the Debian voices out.
// Usage: node bench/gpu/call-configs.mjs OUT_DIR HOST_PATH  (CALL_BENCH_DEVICE=cpu and
// CALL_BENCH_MODEL_CONFIG=tiny write configurations for a CPU dry run)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [outDir, hostPath] = process.argv.slice(2);
const env = (name, fallback) => process.env[`CALL_BENCH_${name}`] ?? fallback;
export const FAKE_LLM_PORT = Number(env('FAKE_LLM_PORT', '8799'));
/** Realtime utterances are seconds long: graphs for these lengths of audio. */
const BUCKETS_MS = [4_000, 8_000, 16_000, 32_000];
const VOICES = 16;
// A Piper "medium" voice in fp32 (docs/adapters.md); budgets hold whole voices plus half a voice.
const VOICE_BYTES = 63_088_864;
const budgetFor = (count) => Math.round((count + 0.5) * VOICE_BYTES);

export function config({ asrBatch, graphs, speechInstances, streamsPerInstance, residentVoices, mps, host = hostPath }) {
  const device = env('DEVICE', 'cuda');
  const onGpu = device === 'cpu' ? {} : { gpus: [0] };
  return {
    gateway: { requestTimeoutMs: 120_000 },
    scheduler: { maxQueuedRequests: 4096, lengthBucketsMs: BUCKETS_MS },
    supervisor: {
      hostPath: host,
      heartbeatIntervalMs: 2000,
      heartbeatMissLimit: 30,
      loadTimeoutMs: 600_000,
      ...(mps && device !== 'cpu' ? { mps: { enabled: true } } : {}),
    },
    models: {
      parakeet: {
        adapter: 'parakeet',
        instances: 1,
        ...onGpu,
        maxBatchSize: asrBatch,
        maxQueueDelayMs: asrBatch === 1 ? 0 : 2,
        dispatchWhenIdle: true,
        exclusiveWarmup: graphs,
        options: {
          config: env('MODEL_CONFIG', 'full'),
          device,
          cudaGraphs: graphs,
          batchSizes: graphs ? [1, 2, 4, 8, 16, 32].filter((b) => b <= asrBatch) : [1],
          lengthBucketsMs: BUCKETS_MS,
        },
      },
      'vits-call': {
        adapter: 'vits',
        instances: speechInstances,
        ...onGpu,
        maxStreamsPerInstance: streamsPerInstance,
        options: {
          device,
          // The GPU machine has no espeak-ng: the text's characters are the symbols (random voices either way).
          phonemizer: env('PHONEMIZER', 'text'),
          randomVoices: VOICES,
          residentBudgetBytes: budgetFor(residentVoices),
          hostBudgetBytes: residentVoices >= VOICES ? 0 : budgetFor(VOICES),
          preloadVoices: residentVoices >= VOICES ? Array.from({ length: VOICES }, (_, i) => `vits-${i}`) : [],
        },
      },
      // The callers' voices only: the bench synthesizes its utterances here before the ramp.
      ...(env('UTTERANCES', '') === '' ? { 'voxmux-speech-cpu': { adapter: 'debian-voices', instances: 1 } } : {}),
    },
    realtime: {
      transcriptionModel: 'parakeet',
      speechModel: 'vits-call',
      partialIntervalMs: 0,
      maxSessions: 1024,
      gpuHourUsd: Number(env('GPU_HOUR_USD', '3.5')),
      llm: { baseUrl: `http://127.0.0.1:${FAKE_LLM_PORT}/v1`, model: 'fake-llm' },
    },
  };
}

export const CONFIGS = {
  'call-a-naive': config({ asrBatch: 1, graphs: false, speechInstances: 1, streamsPerInstance: 1, residentVoices: 1, mps: false }),
  'call-b-voxmux': config({ asrBatch: 32, graphs: true, speechInstances: 4, streamsPerInstance: 16, residentVoices: VOICES, mps: true }),
};

if (outDir !== undefined) {
  mkdirSync(outDir, { recursive: true });
  for (const [name, value] of Object.entries(CONFIGS)) writeFileSync(join(outDir, `${name}.json`), `${JSON.stringify(value, null, 2)}\n`);
}
