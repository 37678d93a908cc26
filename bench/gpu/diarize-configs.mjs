// The server configurations of bench/gpu/run-diarize.sh (issue #17's benchmark), written as voxmux
// config files:
//   mixed: the ASR model (parakeet as c25 of asr-configs.mjs, the best measured: 1 instance, batches of
//          up to 32, 3 in flight, CUDA graphs, encoder and decode step compiled, FP8 encoder products,
//          no delay when idle) at 100 % of the SMs, and DIARIZE_BENCH_INSTANCES sortformer instances
//          (chunk-15s, bf16, CUDA graphs per batch size; compileEncoder with DIARIZE_BENCH_COMPILE=1,
//          compileEncoder and compileHead with DIARIZE_BENCH_COMPILE=2)
//          at DIARIZE_BENCH_MPS_PERCENT % each, all on GPU 0 under MPS;
//   diarize: the same sortformer instances alone.
// Usage: node bench/gpu/diarize-configs.mjs OUT_DIR HOST_PATH
// DIARIZE_BENCH_* variables (see run-diarize.sh) change the sizes (DIARIZE_BENCH_GATEWAY_THREADS: the
// server's gateway.threads, 0 by default; DIARIZE_BENCH_CPU_THREADS: each Sortformer instance's
// cpuThreads, 0 for the server's default); DIARIZE_BENCH_DEVICE=cpu writes
// tiny CPU configurations (no MPS, no graphs) for a dry run without a GPU.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const env = (name, fallback) => process.env[`DIARIZE_BENCH_${name}`] ?? fallback;
const int = (name, fallback, min, max) => {
  const value = Number(env(name, String(fallback)));
  if (!Number.isInteger(value) || value < min || value > max)
    throw new Error(`DIARIZE_BENCH_${name} must be an integer in [${min}, ${max}]: got ${env(name, '')}`);
  return value;
};

export const ASR_MODEL = 'parakeet';
export const DIARIZATION_MODEL = 'sortformer';

/** The configurations for the current DIARIZE_BENCH_* environment. */
export function buildConfigs(hostPath) {
  const device = env('DEVICE', 'cuda');
  if (device !== 'cuda' && device !== 'cpu') throw new Error(`DIARIZE_BENCH_DEVICE must be cuda or cpu: got ${device}`);
  const gpu = device === 'cuda';
  const instances = int('INSTANCES', gpu ? 8 : 1, 1, 64);
  const mpsPercent = int('MPS_PERCENT', 12, 1, 100);
  const maxBatch = int('MAX_BATCH', 64, 1, 256);
  const queueDelayMs = int('QUEUE_DELAY_MS', 2, 0, 1000);
  const inFlight = int('IN_FLIGHT', 3, 1, 16);
  const compile = int('COMPILE', 0, 0, 2);
  // Intra-op CPU threads of each Sortformer instance (models.<name>.cpuThreads); 0: the server's default share.
  const cpuThreads = int('CPU_THREADS', 0, 0, 256);
  const sortformerSize = env('SORTFORMER_CONFIG', gpu ? 'full' : 'tiny');
  const asrSize = env('ASR_CONFIG', gpu ? 'full' : 'tiny');
  const asrBuckets = [45_000];

  const sortformer = {
    adapter: 'sortformer',
    instances,
    ...(gpu ? { gpus: [0] } : {}),
    maxBatchSize: maxBatch,
    maxQueueDelayMs: queueDelayMs,
    // Batches sent to one instance before it answers: a batch waiting in an instance behind another
    // can no longer take the chunks that arrive meanwhile, so fewer in flight make larger batches;
    // with two or more, a batch's host work after its forward pass (cache updates, segments, state
    // bytes, on the instance's finisher thread) overlaps the next batch's forward pass.
    maxRunningBatchesPerInstance: inFlight,
    ...(cpuThreads > 0 ? { cpuThreads } : {}),
    dispatchWhenIdle: true,
    // CUDA graph capture must not overlap the work of sibling MPS instances.
    exclusiveWarmup: gpu,
    mpsActiveThreadPercentages: gpu && mpsPercent < 100 ? [mpsPercent] : [],
    options: {
      config: sortformerSize,
      device,
      preset: 'chunk-15s',
      ...(gpu ? { dtype: 'bf16', cudaGraphs: true } : { cudaGraphs: false }),
      ...(compile >= 1 ? { compileEncoder: true } : {}),
      ...(compile >= 2 ? { compileHead: true } : {}),
      maxBatchSize: maxBatch,
    },
  };
  const graphBatchSizes = [1, 2, 4, 8, 16, 32];
  const parakeet = {
    adapter: 'parakeet',
    instances: 1,
    ...(gpu ? { gpus: [0] } : {}),
    maxBatchSize: gpu ? 32 : 4,
    maxQueueDelayMs: 5,
    dispatchWhenIdle: true,
    exclusiveWarmup: gpu,
    // 100 %: under MPS without a partition limit.
    mpsActiveThreadPercentages: [],
    options: gpu
      ? {
          config: asrSize,
          cudaGraphs: true,
          batchSizes: graphBatchSizes,
          lengthBucketsMs: asrBuckets,
          compileDecodeStep: true,
          compileEncoder: true,
          matmul: 'fp8',
        }
      : { config: asrSize, device, cudaGraphs: false, batchSizes: [1], lengthBucketsMs: asrBuckets },
  };
  const base = (models) => ({
    gateway: { maxBodyBytes: 8 * 1024 * 1024, requestTimeoutMs: 120_000, threads: int('GATEWAY_THREADS', 0, 0, 64) },
    // 5,000 sessions' chunks may wait at once; ASR clips of 45 s in one bucket as in run-asr.sh.
    // The ASR model's batches in flight are c25's (3); the diarization instances' their own (inFlight).
    scheduler: { maxQueuedRequests: 16_384, lengthBucketsMs: asrBuckets, maxRunningBatchesPerInstance: 3 },
    supervisor: {
      hostPath,
      heartbeatIntervalMs: 2000,
      heartbeatMissLimit: 30,
      batchTimeoutMs: 60_000,
      loadTimeoutMs: 600_000,
      mps: { enabled: gpu },
    },
    models,
  });
  return {
    mixed: base({ [ASR_MODEL]: parakeet, [DIARIZATION_MODEL]: sortformer }),
    diarize: base({ [DIARIZATION_MODEL]: sortformer }),
  };
}

const [outDir, hostPath] = process.argv.slice(2);
if (outDir !== undefined) {
  if (hostPath === undefined) {
    process.stderr.write('usage: node bench/gpu/diarize-configs.mjs OUT_DIR HOST_PATH\n');
    process.exit(2);
  }
  let configs;
  try {
    configs = buildConfigs(hostPath);
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
  mkdirSync(outDir, { recursive: true });
  for (const [name, value] of Object.entries(configs)) writeFileSync(join(outDir, `${name}.json`), `${JSON.stringify(value, null, 2)}\n`);
  const s = configs.mixed.models[DIARIZATION_MODEL];
  process.stdout.write(
    `Wrote ${Object.keys(configs).join(', ')} to ${outDir}: ${s.instances} x ${DIARIZATION_MODEL} (${s.options.config}, ` +
      `${s.mpsActiveThreadPercentages[0] ?? 100} %), ${ASR_MODEL} (${configs.mixed.models[ASR_MODEL].options.config}, 100 %)\n`,
  );
}
