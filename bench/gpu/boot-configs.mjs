// The server configurations compared by bench/gpu/boot.sh, written as voxmux config files: the GPU ASR
// model (one Parakeet instance, CUDA graphs for batches of 1 to 32 of 45 s clips, as served in
// bench/gpu/run-asr.sh's c1p) loaded from a .nemo archive, its weights read the previous way
// (`stream`) or with parallel large reads (`parallel`); given a baseline model-host tree (an earlier
// commit's host/), also `baseline`: the parallel read served by that tree, to compare builds.
// Usage: node bench/gpu/boot-configs.mjs OUT_DIR HOST_PATH NEMO_PATH [BASELINE_HOST_PATH]
// (BOOT_BENCH_THREADS: parallel read threads, default 8)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [outDir, hostPath, nemoPath, baselineHostPath] = process.argv.slice(2);
if (!outDir || !hostPath || !nemoPath) {
  process.stderr.write('usage: node bench/gpu/boot-configs.mjs OUT_DIR HOST_PATH NEMO_PATH\n');
  process.exit(2);
}
const threads = Number(process.env.BOOT_BENCH_THREADS ?? 8);

function config(weightRead, host = hostPath) {
  return {
    gateway: { maxBodyBytes: 8 * 1024 * 1024, requestTimeoutMs: 120_000 },
    scheduler: { maxQueuedRequests: 256, lengthBucketsMs: [45_000], maxRunningBatchesPerInstance: 2 },
    supervisor: { hostPath: host, heartbeatIntervalMs: 2000, heartbeatMissLimit: 30, batchTimeoutMs: 60_000 },
    models: {
      parakeet: {
        adapter: 'parakeet',
        instances: 1,
        maxBatchSize: 32,
        maxQueueDelayMs: 5,
        exclusiveWarmup: true,
        options: {
          nemoPath,
          weightRead,
          ...(weightRead === 'parallel' ? { weightReadThreads: threads } : {}),
          cudaGraphs: true,
          batchSizes: [1, 2, 4, 8, 16, 32],
          lengthBucketsMs: [45_000],
        },
      },
    },
  };
}

mkdirSync(outDir, { recursive: true });
for (const weightRead of ['stream', 'parallel']) {
  writeFileSync(join(outDir, `${weightRead}.json`), `${JSON.stringify(config(weightRead), null, 2)}\n`);
}
if (baselineHostPath) writeFileSync(join(outDir, 'baseline.json'), `${JSON.stringify(config('parallel', baselineHostPath), null, 2)}\n`);
