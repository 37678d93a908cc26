// The Whisper serving benchmark's two sides, written as voxmux config files for bench/gpu/run-asr.sh
// (bench/gpu/run-whisper.sh runs both in one go):
//   whisper-a-naive:  what a plain PyTorch server does: batch 1, eager, one request at a time;
//   whisper-b-engine: voxmux's engine: up to 64 windows decoding together over the static key-value
//                     cache, finished windows replaced by waiting ones, CUDA graphs of the step; 4 host
//                     batches in flight, so requests that arrive mid-decode join it;
//   whisper-b0-one-batch: the same engine with one host batch in flight (requests join decoding only at
//                     host batch boundaries): the baseline of joining a running decode;
//   whisper-b2-group-join: (b) with joins of at least 8 windows while others decode, or of fewer once
//                     the oldest has waited 50 ms (joinMinWindows, joinMaxWaitMs): each join stalls every
//                     decoding slot for its encoder call, so fewer, larger joins;
//   whisper-b3-overlap: (b) with each join's encoder call on a CUDA stream of its own, the decode
//                     steps going on beside it (overlapEncoder);
//   whisper-b4-group-overlap: both;
//   whisper-b5-compiled-fp8: (b) with the encoder compiled and its products in FP8 (compileEncoder,
//                     matmul fp8);
//   whisper-b6-many-batches: (b2) with 16 host batches in flight instead of 4: with 4, requests waited
//                     for a host batch slot while the GPU idled (bench/results/whisper-h200-2026-12-05);
//   whisper-b7-two-instances: (b6) on two instances sharing the GPU under MPS (no partition caps): one
//                     instance's encoder calls run beside the other's decode steps, and each has its own
//                     Python thread driving the steps;
//   whisper-b8-pieces: (b7) with the gateway cutting each clip into two pieces of at most 30 s (about
//                     22.5 s each, at the quietest point: the clip has no pauses), run as separate requests:
//                     one window each, decoded side by side instead of the second window waiting for the
//                     first's text (the long-audio path; no text context across the cut);
//   whisper-b9-pieces-compiled: (b8) with the encoder's blocks compiled (compileEncoder; batches under 4
//                     windows stay eager);
//   whisper-b10-one-pieces-compiled: (b9) on one instance: (b6) with the clips cut and the encoder
//                     compiled;
//   whisper-b11-one-pieces-overlap: (b10) with each join's encoder call on a CUDA stream of its own
//                     (overlapEncoder): on one instance, the decode steps of the windows already
//                     decoding go on while a join is encoded instead of waiting for it;
//   whisper-b12-one-pieces-ahead: (b10) with each decode step launched before the previous step's
//                     tokens are read (stepAhead): the host's work on them (ending windows, joins)
//                     overlaps a step on the GPU instead of leaving it idle;
//   whisper-b13-one-pieces-window: (b10) with each piece's language detected on its own decode window
//                     (languageDetection: window): the pieces are shorter than 30 s and the clients send no
//                     language, so (b8) to (b12) encode a second input per piece to detect its language as
//                     OpenAI's transcribe() does (four encoder windows per clip instead of two). Since
//                     protocol version 7 the gateway marks pieces and the engine detects a piece on its own
//                     window whatever languageDetection says: b13 now runs as b10, and b14 as b9;
//   whisper-b14-pieces-window: (b9), two instances under MPS with the clips cut and the encoder compiled,
//                     with each piece's language detected on its own window (b13 on two instances);
//   whisper-b15-pieces-window-fp8: (b14) with the encoder's products in FP8 (matmul fp8);
//   whisper-b17-pieces-rules: (b14) with the decode step's logit rules compiled (compileRules);
//   whisper-b18-pieces-overlap: (b14) with each join's encoder call on a CUDA stream of its own beside the
//                     decode steps (overlapEncoder), which a join otherwise stalls. (b16, the step's
//                     attention as two products, was measured slower and removed.)
//   whisper-b19-pieces-rules-overlap: (b14) with both (compileRules and overlapEncoder);
//   whisper-b20-three-rules-overlap: (b19) on three instances under MPS;
//   whisper-b21-pieces-warm: (b19) with every join's shape met before serving (warmShapes);
//   whisper-b22-pieces-spans: (b19) with the step also captured over the cache's first 128 positions
//                     (stepCacheSpans), which hold every piece's tokens at 3 a second;
//   whisper-b23-warm-spans: (b21) with b22's spans;
//   whisper-b24-efficient-prefill: (b23) with a join's eager decoder calls held to the memory-efficient
//                     attention kernel (prefillAttention), which keeps no plan per shape: less to warm.
// Both serve large-v3-turbo shapes with random weights in bf16. Random weights decode to arbitrary
// lengths, so both force end-of-text at 3 tokens per second of window audio (maxTokensPerAudioSecond:
// 90 tokens for a full 30 s window, timestamps included; speech runs about 2.5 to 3 tokens per second)
// and turn temperature fallback off (random text always fails the thresholds). A 45 s clip is two 30 s
// windows (the gateway's cutting at pauses is off: splitAboveMs 0), about 135 tokens.
// Usage: node bench/gpu/whisper-configs.mjs OUT_DIR HOST_PATH  (WHISPER_BENCH_MODEL_CONFIG=tiny and
// WHISPER_BENCH_DEVICE=cpu for a CPU smoke run)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [outDir, hostPath] = process.argv.slice(2);
export const TOKENS_PER_AUDIO_SECOND = 3;

export function config({
  maxBatchSize,
  maxQueueDelayMs,
  graphs,
  batchSizes,
  runningBatches,
  instances = 1,
  mps = false,
  pieces = false,
  variant = {},
  env = process.env,
  host = hostPath,
}) {
  return {
    gateway: {
      maxBodyBytes: 8 * 1024 * 1024,
      requestTimeoutMs: 120_000,
      ...(pieces ? { splitAboveMs: 30_000, pieceTargetMs: 22_500 } : { splitAboveMs: 0 }),
    },
    scheduler: {
      maxQueuedRequests: 2048,
      lengthBucketsMs: [pieces ? 30_000 : 45_000],
      maxRunningBatchesPerInstance: runningBatches,
    },
    supervisor: {
      hostPath: host,
      heartbeatIntervalMs: 2000,
      heartbeatMissLimit: 30,
      batchTimeoutMs: 120_000,
      mps: { enabled: mps },
    },
    models: {
      // The name run-asr.sh drives (ASR_BENCH_MODEL=whisper).
      whisper: {
        adapter: 'whisper',
        instances,
        maxBatchSize,
        maxQueueDelayMs,
        exclusiveWarmup: graphs,
        // Intra-op CPU threads of each instance; unset: the server's default (one per core without pinned GPUs).
        ...(env.WHISPER_BENCH_CPU_THREADS === undefined ? {} : { cpuThreads: Number(env.WHISPER_BENCH_CPU_THREADS) }),
        options: {
          config: env.WHISPER_BENCH_MODEL_CONFIG ?? 'large-v3-turbo',
          device: env.WHISPER_BENCH_DEVICE ?? 'cuda',
          cudaGraphs: graphs,
          batchSizes,
          maxTokensPerAudioSecond: TOKENS_PER_AUDIO_SECOND,
          temperatureIncrement: 0,
          ...variant,
        },
      },
    },
  };
}

const ENGINE = { maxBatchSize: 64, maxQueueDelayMs: 5, graphs: true, batchSizes: [1, 2, 4, 8, 16, 32, 64] };
const B6 = { ...ENGINE, runningBatches: 16, variant: { joinMinWindows: 8, joinMaxWaitMs: 50 } };
const B8 = { ...B6, instances: 2, mps: true, pieces: true };
const B19_VARIANT = { ...B6.variant, compileEncoder: true, languageDetection: 'window', compileRules: true, overlapEncoder: true };

export const CONFIGS = {
  'whisper-a-naive': config({ maxBatchSize: 1, maxQueueDelayMs: 0, graphs: false, batchSizes: [1], runningBatches: 1 }),
  'whisper-b-engine': config({ ...ENGINE, runningBatches: 4 }),
  'whisper-b0-one-batch': config({ ...ENGINE, runningBatches: 1 }),
  'whisper-b2-group-join': config({ ...ENGINE, runningBatches: 4, variant: { joinMinWindows: 8, joinMaxWaitMs: 50 } }),
  'whisper-b3-overlap': config({ ...ENGINE, runningBatches: 4, variant: { overlapEncoder: true } }),
  'whisper-b4-group-overlap': config({
    ...ENGINE,
    runningBatches: 4,
    variant: { joinMinWindows: 8, joinMaxWaitMs: 50, overlapEncoder: true },
  }),
  'whisper-b5-compiled-fp8': config({ ...ENGINE, runningBatches: 4, variant: { compileEncoder: true, matmul: 'fp8' } }),
  'whisper-b6-many-batches': config({ ...B6 }),
  'whisper-b7-two-instances': config({ ...B6, instances: 2, mps: true }),
  'whisper-b8-pieces': config({ ...B8 }),
  'whisper-b9-pieces-compiled': config({ ...B8, variant: { ...B6.variant, compileEncoder: true } }),
  'whisper-b10-one-pieces-compiled': config({ ...B8, instances: 1, mps: false, variant: { ...B6.variant, compileEncoder: true } }),
  'whisper-b11-one-pieces-overlap': config({
    ...B8,
    instances: 1,
    mps: false,
    variant: { ...B6.variant, compileEncoder: true, overlapEncoder: true },
  }),
  'whisper-b12-one-pieces-ahead': config({
    ...B8,
    instances: 1,
    mps: false,
    variant: { ...B6.variant, compileEncoder: true, stepAhead: true },
  }),
  'whisper-b13-one-pieces-window': config({
    ...B8,
    instances: 1,
    mps: false,
    variant: { ...B6.variant, compileEncoder: true, languageDetection: 'window' },
  }),
  'whisper-b14-pieces-window': config({ ...B8, variant: { ...B6.variant, compileEncoder: true, languageDetection: 'window' } }),
  'whisper-b15-pieces-window-fp8': config({
    ...B8,
    variant: { ...B6.variant, compileEncoder: true, languageDetection: 'window', matmul: 'fp8' },
  }),
  'whisper-b17-pieces-rules': config({
    ...B8,
    variant: { ...B6.variant, compileEncoder: true, languageDetection: 'window', compileRules: true },
  }),
  'whisper-b18-pieces-overlap': config({
    ...B8,
    variant: { ...B6.variant, compileEncoder: true, languageDetection: 'window', overlapEncoder: true },
  }),
  'whisper-b19-pieces-rules-overlap': config({ ...B8, variant: B19_VARIANT }),
  'whisper-b20-three-rules-overlap': config({ ...B8, instances: 3, variant: B19_VARIANT }),
  'whisper-b21-pieces-warm': config({ ...B8, variant: { ...B19_VARIANT, warmShapes: true } }),
  'whisper-b22-pieces-spans': config({ ...B8, variant: { ...B19_VARIANT, stepCacheSpans: [128] } }),
  'whisper-b23-warm-spans': config({ ...B8, variant: { ...B19_VARIANT, warmShapes: true, stepCacheSpans: [128] } }),
  'whisper-b24-efficient-prefill': config({
    ...B8,
    variant: { ...B19_VARIANT, warmShapes: true, stepCacheSpans: [128], prefillAttention: 'efficient' },
  }),
};

if (outDir !== undefined) {
  mkdirSync(outDir, { recursive: true });
  for (const [name, c] of Object.entries(CONFIGS)) writeFileSync(join(outDir, `${name}.json`), JSON.stringify(c, null, 2));
}
