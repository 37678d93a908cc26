/**
 * A diarization load spread over several bench processes (`bench diarize --mode load --processes
 * N`): process K runs the same load with `--share K/N` (sessions K, K+N, ..., each at the start it
 * has in the whole run) from a wall-clock start they all share, and writes its part under
 * `process-<K+1>/`; the parts are merged into one run.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../../src/core/clock.js';
import { BenchError } from './bench-error.js';
import { runBenchProcesses, type SpawnBench } from './bench-processes.js';
import { mergeDiarizeLoadRuns, type DiarizeChunkSample, type DiarizeLoadRun } from './diarize-run.js';

/** How long after the command a spread run starts: time for its processes to load and open their recording. */
const SPREAD_START_DELAY_MS = 3000;

export interface SpreadLoadOptions {
  processes: number;
  /** The load's own arguments, the same for every process (mode, url, model, audio, sessions, pacing...). */
  loadArgs: readonly string[];
  label: string;
  outDir: string;
}

export interface SpreadLoadDeps {
  spawn: SpawnBench;
  clock: Clock;
  signal: AbortSignal;
  /** Whether the abort came from a terminal's Ctrl-C, which the processes have seen themselves. */
  isSigint(): boolean;
}

/** `--share K/N`: this process's part of a spread run. */
export function parseShare(text: string | undefined): { index: number; of: number } | undefined {
  if (text === undefined) return undefined;
  const match = /^(\d+)\/(\d+)$/.exec(text);
  const index = Number(match?.[1]);
  const of = Number(match?.[2]);
  if (match === null || of < 1 || index >= of) throw new BenchError('usage', `Expected --share K/N with 0 <= K < N: got '${text}'`);
  return { index, of };
}

export async function runSpreadDiarizeLoad(options: SpreadLoadOptions, deps: SpreadLoadDeps): Promise<DiarizeLoadRun> {
  const { processes } = options;
  const startAtMs = Math.round(deps.clock.wallMs() + SPREAD_START_DELAY_MS);
  const partDir = (k: number) => join(options.outDir, `process-${k + 1}`);
  const argsList = Array.from({ length: processes }, (_, k) => [
    'diarize',
    ...options.loadArgs,
    ...['--share', `${k}/${processes}`, '--start-at-ms', String(startAtMs)],
    ...['--out', partDir(k), '--label', `${options.label} ${k + 1}/${processes}`],
  ]);
  const ended = await runBenchProcesses(argsList, { spawn: deps.spawn, signal: deps.signal, isSigint: deps.isSigint });
  const parts: DiarizeLoadRun[] = [];
  for (const [k, end] of ended.entries()) {
    try {
      parts.push(await readPart(join(partDir(k), 'results.json')));
    } catch {
      const how = end.signal === null ? `exit code ${end.exitCode}` : `signal ${end.signal}`;
      throw new BenchError(
        end.exitCode === 2 ? 'usage' : 'all_failed',
        `Bench process ${k + 1}/${processes} wrote no results (${how}): ${end.outputTail.trim()}`,
      );
    }
  }
  return mergeDiarizeLoadRuns(parts);
}

/** A part's run as its process wrote it (results.json of a load run). */
async function readPart(path: string): Promise<DiarizeLoadRun> {
  const part = JSON.parse(await readFile(path, 'utf8')) as {
    chunks: DiarizeChunkSample[];
    createErrors: Record<string, number>;
    totals: { wallS: number };
    isInterrupted?: boolean;
  };
  return { chunks: part.chunks, createErrors: part.createErrors, wallS: part.totals.wallS, isInterrupted: part.isInterrupted === true };
}
