/**
 * `voxmux cost`: what a GPU node would have cost in each operating mode, from request logs
 * (requestLog.path, docs/operations.md#request-log). Reads files only; sends nothing.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseRequestLogLine } from '../../src/api/request-log.js';
import { usageError } from './bench-error.js';
import { defineCommand } from './command.js';
import { computeCost, type CostCall, type CostOptions } from './cost-model.js';
import { costMarkdown, costSvg, type CostResults } from './cost-report.js';
import { numberFlag, optionalNumber } from './flags.js';
import { timestampForPath } from './output-dir.js';

export const COST_DEFAULTS = {
  gpus: 1,
  coldStartS: 60,
  idleStopMin: '30',
  hoursPerDay: 16,
  dayStart: '06:00',
  tzOffsetMin: 0,
} as const;

export const COST_USAGE = `Usage:
  voxmux cost LOG [LOG ...] --gpu-hour-usd USD [options]

The GPU cost of each operating mode, from request logs (requestLog.path; rotated files too):
always on; on for a fixed window each day; on demand, stopped after N idle minutes and woken by
the next call, which waits a cold start. The log's whole days are scaled to 30.

options:
  --gpu-hour-usd USD     price of one GPU-hour (required)
  --gpus N               GPUs of the node (default ${COST_DEFAULTS.gpus})
  --cold-start-s S       measured time from a wake to serving (default ${COST_DEFAULTS.coldStartS})
  --idle-stop-min LIST   idle stops to simulate, in minutes, e.g. 10,30,60 (default ${COST_DEFAULTS.idleStopMin})
  --hours-per-day H      length of the fixed daily window (default ${COST_DEFAULTS.hoursPerDay})
  --day-start HH:MM      start of the fixed window (default ${COST_DEFAULTS.dayStart})
  --tz-offset-min M      local time minus UTC, in minutes, for the window and day boundaries (default 0: UTC)
  --out DIR              also write results.json, summary.md and cost.svg there
  -h, --help             print this help and exit

Exit codes: 0 done; 2 bad arguments, or no request log line in the files.
`;

const COST_FLAGS = {
  'gpu-hour-usd': { type: 'string' },
  gpus: { type: 'string' },
  'cold-start-s': { type: 'string' },
  'idle-stop-min': { type: 'string' },
  'hours-per-day': { type: 'string' },
  'day-start': { type: 'string' },
  'tz-offset-min': { type: 'string' },
  out: { type: 'string' },
} as const;

/** `HH:MM` as minutes after midnight. */
export function parseDayStart(text: string): number {
  const match = /^([01]?\d|2[0-3]):([0-5]\d)$/.exec(text.trim());
  if (match === null) throw usageError(`Expected --day-start to be a time HH:MM from 00:00 to 23:59: got '${text}'`);
  return Number(match[1]) * 60 + Number(match[2]);
}

export function parseIdleStops(text: string): number[] {
  const parts = text.split(',').map((p) => p.trim());
  return parts.map((part) => {
    const value = Number(part);
    if (part === '' || !Number.isFinite(value) || value <= 0 || value > 7 * 24 * 60) {
      throw usageError(`Expected --idle-stop-min to be a list of minutes above 0 and at most 10080: got '${text}'`);
    }
    return value;
  });
}

/** The calls of request log texts, and how many lines were not entries. */
export function readCalls(texts: readonly string[]): { calls: CostCall[]; skippedLines: number } {
  const calls: CostCall[] = [];
  let skippedLines = 0;
  for (const text of texts) {
    for (const raw of text.split('\n')) {
      if (raw.trim() === '') continue;
      const line = parseRequestLogLine(raw);
      const arrivalMs = line === undefined ? NaN : Date.parse(line.time);
      if (line === undefined || !Number.isFinite(arrivalMs)) {
        skippedLines += 1;
        continue;
      }
      calls.push({
        arrivalMs,
        durationMs: line.durationMs,
        kind: line.kind,
        audioInSeconds: line.audioInSeconds,
        audioOutSeconds: line.audioOutSeconds,
      });
    }
  }
  calls.sort((a, b) => a.arrivalMs - b.arrivalMs);
  return { calls, skippedLines };
}

export const costCommand = defineCommand({
  name: 'cost',
  usage: COST_USAGE,
  flags: COST_FLAGS,
  hasPositionals: true,
  helpHint: 'Run voxmux cost --help for usage',
  run: async ({ values, positionals, io, cwd, clock, outputDir }) => {
    if (positionals.length === 0) throw usageError('Expected at least one request log file');
    const price = optionalNumber(values['gpu-hour-usd'], '--gpu-hour-usd', { min: 0, max: 1e6 });
    if (price === undefined) throw usageError('Expected --gpu-hour-usd: the price of one GPU-hour');
    const options: CostOptions = {
      gpuHourUsd: price,
      gpus: numberFlag(values.gpus, '--gpus', COST_DEFAULTS.gpus, { min: 1, max: 100_000, isInteger: true }),
      coldStartS: numberFlag(values['cold-start-s'], '--cold-start-s', COST_DEFAULTS.coldStartS, { min: 0, max: 86_400 }),
      idleStopMin: parseIdleStops(values['idle-stop-min'] ?? COST_DEFAULTS.idleStopMin),
      hoursPerDay: numberFlag(values['hours-per-day'], '--hours-per-day', COST_DEFAULTS.hoursPerDay, { min: 0, max: 24 }),
      dayStartMin: parseDayStart(values['day-start'] ?? COST_DEFAULTS.dayStart),
      tzOffsetMin: numberFlag(values['tz-offset-min'], '--tz-offset-min', COST_DEFAULTS.tzOffsetMin, {
        min: -840,
        max: 840,
        isInteger: true,
      }),
    };
    const sources = positionals.map((p) => resolve(cwd, p));
    const texts: string[] = [];
    for (const source of sources) {
      texts.push(
        await readFile(source, 'utf8').catch((err: unknown) => {
          throw usageError(`Expected a readable request log file: got '${source}' (${(err as Error).message})`);
        }),
      );
    }
    const { calls, skippedLines } = readCalls(texts);
    if (calls.length === 0)
      throw usageError(`Expected request log lines (docs/operations.md#request-log) in ${positionals.join(', ')}: found none`);
    const report = computeCost(calls, options);
    const results: CostResults = {
      kind: 'voxmux-cost',
      sources,
      skippedLines,
      options,
      trace: {
        ...report.trace,
        firstCall: new Date(calls[0]!.arrivalMs).toISOString(),
        lastCall: new Date(calls.at(-1)!.arrivalMs).toISOString(),
      },
      modes: report.modes,
    };
    const markdown = costMarkdown(results);
    io.stdout.write(markdown);
    if (skippedLines > 0) io.stderr.write(`Skipped ${skippedLines} lines that are not request log entries\n`);
    if (values.out !== undefined) {
      const outDir = await outputDir(values.out, `cost-${timestampForPath(clock.wallMs())}`);
      await mkdir(outDir, { recursive: true });
      await writeFile(join(outDir, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
      await writeFile(join(outDir, 'summary.md'), markdown);
      await writeFile(join(outDir, 'cost.svg'), costSvg(results));
      io.stderr.write(`Wrote ${join(outDir, 'results.json')}, summary.md, cost.svg\n`);
    }
    return 0;
  },
});
