/**
 * Samples GPU utilization and memory through `nvidia-smi` when it exists on this machine. It
 * describes the server's GPUs only when the server runs on the same machine as the bench.
 */
// NOTE: this is the only child process in bench/. nvidia-smi is the one portable way to read
// NVIDIA GPU utilization without a native dependency; it is spawned once per run with a fixed
// argument list (no shell), read line by line, and killed when the run ends.
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { Clock } from '../../src/core/clock.js';

export interface GpuSample {
  atMs: number;
  index: number;
  utilizationPercent: number;
  memoryUsedMiB: number;
  memoryTotalMiB?: number;
}

export interface GpuStepMetrics {
  index: number;
  utilizationPercentMean: number;
  utilizationPercentMax: number;
  memoryUsedMiBMax: number;
  memoryTotalMiB?: number;
  samples: number;
}

/** The part of a ChildProcess the sampler uses; tests pass a fake. */
export interface SamplerChild {
  stdout: Readable | null;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'exit', listener: (code: number | null) => void): unknown;
  kill(signal?: NodeJS.Signals): boolean;
}

export type SpawnSampler = (command: string, args: readonly string[]) => SamplerChild;

export const NVIDIA_SMI_QUERY = 'index,utilization.gpu,memory.used,memory.total';

export function nvidiaSmiArgs(intervalMs: number): string[] {
  return [`--query-gpu=${NVIDIA_SMI_QUERY}`, '--format=csv,noheader,nounits', `-lms`, String(Math.max(100, Math.round(intervalMs)))];
}

/** Parses one line of `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total`. */
export function parseNvidiaSmiLine(line: string, atMs: number): GpuSample | undefined {
  const fields = line.split(',').map((field) => field.trim());
  if (fields.length < 3) return undefined;
  const [index, utilization, used, total] = fields.map(Number);
  if (index === undefined || utilization === undefined || used === undefined) return undefined;
  if (![index, utilization, used].every(Number.isFinite)) return undefined;
  return {
    atMs,
    index,
    utilizationPercent: utilization,
    memoryUsedMiB: used,
    ...(total !== undefined && Number.isFinite(total) ? { memoryTotalMiB: total } : {}),
  };
}

/** Per GPU over a time window on the Clock's monotonic scale, both ends included. */
export function summarizeGpu(samples: readonly GpuSample[], window: { fromMs: number; toMs: number }): GpuStepMetrics[] | undefined {
  const byIndex = new Map<number, GpuSample[]>();
  for (const sample of samples) {
    if (sample.atMs < window.fromMs || sample.atMs > window.toMs) continue;
    const list = byIndex.get(sample.index) ?? [];
    list.push(sample);
    byIndex.set(sample.index, list);
  }
  if (byIndex.size === 0) return undefined;
  return [...byIndex.entries()]
    .sort(([a], [b]) => a - b)
    .map(([index, list]) => {
      const total = list.find((s) => s.memoryTotalMiB !== undefined)?.memoryTotalMiB;
      return {
        index,
        utilizationPercentMean: Math.round((list.reduce((sum, s) => sum + s.utilizationPercent, 0) / list.length) * 10) / 10,
        utilizationPercentMax: Math.max(...list.map((s) => s.utilizationPercent)),
        memoryUsedMiBMax: Math.max(...list.map((s) => s.memoryUsedMiB)),
        ...(total === undefined ? {} : { memoryTotalMiB: total }),
        samples: list.length,
      };
    });
}

export interface GpuSampler {
  start(): void;
  stop(): void;
  samples(): readonly GpuSample[];
  /** False once nvidia-smi turned out to be absent or failing. */
  isAvailable(): boolean;
  note(): string | undefined;
}

export interface GpuSamplerOptions {
  intervalMs: number;
}

export interface GpuSamplerDeps {
  clock: Clock;
  spawn?: SpawnSampler;
}

const MAX_SAMPLES = 1_000_000;

const spawnNvidiaSmi: SpawnSampler = (command, args) => {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'], shell: false });
  // The sampler must never keep the bench process alive by itself.
  child.unref();
  return child;
};

export function createGpuSampler(options: GpuSamplerOptions, deps: GpuSamplerDeps): GpuSampler {
  const samples: GpuSample[] = [];
  let child: SamplerChild | undefined;
  let isAvailable = true;
  let note: string | undefined;
  let partial = '';

  return {
    start() {
      if (child !== undefined || !isAvailable) return;
      const spawnFn = deps.spawn ?? spawnNvidiaSmi;
      try {
        child = spawnFn('nvidia-smi', nvidiaSmiArgs(options.intervalMs));
      } catch (err) {
        isAvailable = false;
        note = `nvidia-smi could not start: ${(err as Error).message}`;
        return;
      }
      child.on('error', (err) => {
        isAvailable = false;
        note = (err as { code?: unknown }).code === 'ENOENT' ? 'nvidia-smi not found' : `nvidia-smi failed: ${err.message}`;
      });
      child.on('exit', (code) => {
        if (samples.length === 0 && code !== null && code !== 0) {
          isAvailable = false;
          note ??= `nvidia-smi exited with code ${code}`;
        }
        child = undefined;
      });
      const stdout = child.stdout;
      (stdout as { unref?: () => void } | null)?.unref?.();
      stdout?.setEncoding('utf8');
      stdout?.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        const atMs = deps.clock.nowMs();
        for (const line of lines) {
          const sample = parseNvidiaSmiLine(line, atMs);
          if (sample !== undefined && samples.length < MAX_SAMPLES) samples.push(sample);
        }
      });
    },
    stop() {
      child?.kill('SIGTERM');
      child = undefined;
    },
    samples: () => samples,
    isAvailable: () => isAvailable && (samples.length > 0 || child !== undefined),
    note: () => note,
  };
}
