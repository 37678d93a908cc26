// The server configurations compared by bench/gpu/run-asr.sh, written as voxmux config files.
// Usage: node bench/gpu/asr-configs.mjs OUT_DIR HOST_PATH  (ASR_BENCH_MODEL_CONFIG=tiny for a CPU smoke run)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [outDir, hostPath] = process.argv.slice(2);
const BUCKETS_MS = [45_000];

function config({
  instances,
  maxBatchSize,
  maxQueueDelayMs,
  graphs,
  mpsPercent,
  inFlight = 1,
  compileDecodeStep = false,
  compileEncoder = false,
  dispatchWhenIdle = false,
  matmul = undefined,
  experimentalKernels = undefined,
  graphBatchSizes = [1, 2, 4, 8, 16, 32, 64],
  gatewayThreads = 0,
  splitAboveMs = undefined,
}) {
  const batchSizes = graphBatchSizes.filter((b) => b <= maxBatchSize);
  return {
    gateway: {
      maxBodyBytes: 8 * 1024 * 1024,
      requestTimeoutMs: 120_000,
      threads: gatewayThreads,
      ...(splitAboveMs === undefined ? {} : { splitAboveMs }),
    },
    scheduler: { maxQueuedRequests: 2048, lengthBucketsMs: BUCKETS_MS, maxRunningBatchesPerInstance: inFlight },
    supervisor: {
      hostPath,
      heartbeatIntervalMs: 2000,
      heartbeatMissLimit: 30,
      batchTimeoutMs: 60_000,
      mps: { enabled: mpsPercent !== undefined },
    },
    models: {
      parakeet: {
        adapter: 'parakeet',
        instances,
        maxBatchSize,
        maxQueueDelayMs,
        dispatchWhenIdle,
        exclusiveWarmup: graphs,
        mpsActiveThreadPercentages: mpsPercent === undefined || mpsPercent === 100 ? [] : [mpsPercent],
        options: {
          config: process.env.ASR_BENCH_MODEL_CONFIG ?? 'full',
          cudaGraphs: graphs,
          batchSizes: graphs ? batchSizes : [1],
          lengthBucketsMs: BUCKETS_MS,
          ...(compileDecodeStep ? { compileDecodeStep } : {}),
          ...(compileEncoder ? { compileEncoder } : {}),
          ...(matmul !== undefined ? { matmul } : {}),
          ...(experimentalKernels !== undefined ? { experimentalKernels } : {}),
        },
      },
    },
  };
}

// 1 instance, batches of up to 32, CUDA graphs, two batches in flight: the base of the c4 to c12 variants.
const C1P = { instances: 1, maxBatchSize: 32, maxQueueDelayMs: 5, graphs: true, inFlight: 2 };
// ... with the decode step and the encoder layers compiled, and no batching delay while idle.
const C7 = { ...C1P, compileDecodeStep: true, compileEncoder: true, dispatchWhenIdle: true };

// c17 to c21, c23 and c24 measured overlapped decoding (overlapDecode), retired after it lost in the
// server (bench/results/asr-h200-2026-12-03d/); their names are not reused.
export const CONFIGS = {
  // (a) what a plain PyTorch server does
  'a-naive': config({ instances: 1, maxBatchSize: 1, maxQueueDelayMs: 0, graphs: false }),
  // (b) four instances sharing the GPU by time slicing, still batch 1 and eager
  'b-4x-timesliced': config({ instances: 4, maxBatchSize: 1, maxQueueDelayMs: 0, graphs: false }),
  // (c) voxmux candidates: dynamic batching, CUDA graphs, MPS (a percentage of 100: MPS without a partition limit)
  'c1-1x-b32-graphs': config({ instances: 1, maxBatchSize: 32, maxQueueDelayMs: 5, graphs: true }),
  // two batches in flight: the host reads the next batch from its pipe while the GPU runs one
  'c1p-1x-b32-graphs-2inflight': config(C1P),
  'c2-2x-b16-graphs-mps50': config({ instances: 2, maxBatchSize: 16, maxQueueDelayMs: 5, graphs: true, mpsPercent: 50 }),
  'c2f-2x-b32-graphs-mps': config({ instances: 2, maxBatchSize: 32, maxQueueDelayMs: 5, graphs: true, mpsPercent: 100 }),
  'c3-4x-b8-graphs-mps25': config({ instances: 4, maxBatchSize: 8, maxQueueDelayMs: 5, graphs: true, mpsPercent: 25 }),
  'c3f-4x-b16-graphs-mps': config({ instances: 4, maxBatchSize: 16, maxQueueDelayMs: 5, graphs: true, mpsPercent: 100 }),
  // the decode step compiled (torch.compile): fewer, fused kernels per step
  'c4-1x-b32-graphs-2inflight-compiled': config({ ...C1P, compileDecodeStep: true }),
  // ... and no batching delay while the instance idles (batches form only while it is busy)
  'c6-1x-b32-graphs-2inflight-compiled-idle': config({ ...C1P, compileDecodeStep: true, dispatchWhenIdle: true }),
  // ... and the conformer layers compiled too (fused casts, norms, activations and masks)
  'c7-1x-b32-graphs-2inflight-compiled-all-idle': config(C7),
  // ... with batches of up to 64: the decode loop's steps are shared by twice as many clips
  'c9-1x-b64-graphs-2inflight-compiled-all-idle': config({ ...C7, maxBatchSize: 64 }),
  // ... with the encoder's large matrix products in FP8 (e4m3, row-wise scales)
  'c11-1x-b32-graphs-2inflight-compiled-all-fp8-idle': config({ ...C7, matmul: 'fp8' }),
  // ... on two instances under MPS: one instance's host work overlaps the other's GPU work
  'c8-2x-b32-graphs-2inflight-compiled-all-idle-mps': config({ ...C7, instances: 2, mpsPercent: 100 }),
  'c5-2x-b32-graphs-2inflight-mps': config({ ...C1P, instances: 2, mpsPercent: 100 }),
  // c11 on two instances under MPS
  'c12-2x-b32-graphs-2inflight-compiled-all-fp8-idle-mps': config({ ...C7, matmul: 'fp8', instances: 2, mpsPercent: 100 }),
  // c7 with the encoder's own Triton kernels (position bias; GLU, depthwise convolution, BatchNorm, SiLU),
  // an experimental option
  'c13-1x-b32-graphs-2inflight-compiled-all-triton-idle': config({ ...C7, experimentalKernels: 'triton' }),
  // ... with FP8 products too
  'c14-1x-b32-graphs-2inflight-compiled-all-triton-fp8-idle': config({
    ...C7,
    experimentalKernels: 'triton',
    matmul: 'fp8',
  }),
  // c9 with FP8 products
  'c16-1x-b64-graphs-2inflight-compiled-all-fp8-idle': config({ ...C7, matmul: 'fp8', maxBatchSize: 64 }),
  // c7 with three batches in flight: the next batch is on the host before the running one ends
  'c22-1x-b32-graphs-3inflight-compiled-all-idle': config({ ...C7, inFlight: 3 }),
  // ... with FP8 products (c11 with three batches in flight)
  'c25-1x-b32-graphs-3inflight-compiled-all-fp8-idle': config({ ...C7, inFlight: 3, matmul: 'fp8' }),
  // c25 with 3 gateway threads beside the main one (bench/gpu/run-gateway-threads.sh)
  'c25-t3': config({ ...C7, inFlight: 3, matmul: 'fp8', gatewayThreads: 3 }),
  // c25 with each 45 s clip run whole (gateway.splitAboveMs 0), as before long recordings were cut
  // at pauses (the default since 56bb37f cuts a 45 s clip into about three pieces), with 0 and 3 gateway threads
  'c25-whole': config({ ...C7, inFlight: 3, matmul: 'fp8', splitAboveMs: 0 }),
  'c25-whole-t3': config({ ...C7, inFlight: 3, matmul: 'fp8', splitAboveMs: 0, gatewayThreads: 3 }),
  // c9 with three batches in flight: twice the clips per decode loop, the next batch already on the host
  'c26-1x-b64-graphs-3inflight-compiled-all-idle': config({ ...C7, inFlight: 3, maxBatchSize: 64 }),
  // ... with FP8 products (c16 with three batches in flight)
  'c27-1x-b64-graphs-3inflight-compiled-all-fp8-idle': config({ ...C7, inFlight: 3, maxBatchSize: 64, matmul: 'fp8' }),
  // c26 with graphs for batches of 24 and 48 too: a batch of 33 to 48 clips no longer pays for 64
  'c28-1x-b64-graphs-3inflight-compiled-all-48-idle': config({
    ...C7,
    inFlight: 3,
    maxBatchSize: 64,
    graphBatchSizes: [1, 2, 4, 8, 16, 24, 32, 48, 64],
  }),
  // ... with FP8 products
  'c29-1x-b64-graphs-3inflight-compiled-all-fp8-48-idle': config({
    ...C7,
    inFlight: 3,
    maxBatchSize: 64,
    matmul: 'fp8',
    graphBatchSizes: [1, 2, 4, 8, 16, 24, 32, 48, 64],
  }),
  // ... c13 with batches of up to 64
  'c15-1x-b64-graphs-2inflight-compiled-all-triton-idle': config({
    ...C7,
    experimentalKernels: 'triton',
    maxBatchSize: 64,
  }),
};

if (outDir !== undefined) {
  mkdirSync(outDir, { recursive: true });
  for (const [name, c] of Object.entries(CONFIGS)) writeFileSync(join(outDir, `${name}.json`), JSON.stringify(c, null, 2));
}
