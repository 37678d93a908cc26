/**
 * `bench compare`: several results files side by side, level by level, with the ratio of each
 * run to the first (B/A), and all of them on one plot. Speech runs are compared on their own
 * figures: audio produced per second, first-byte p95, stalls and voice loads from disk, and the
 * most concurrent streams that met the SLO.
 */
import { readFile } from 'node:fs/promises';
import { usageError } from './bench-error.js';
import { renderPlotSvg, toPlotSeries, type PlotPanels } from './plot.js';
import { RESULTS_SCHEMA, type BenchResults, type Capacity, type StepResult } from './report.js';
import { formatMarkdownTable, formatNumber, formatTextTable, formatUsd } from './text-table.js';

export interface ComparedRun {
  /** Letter used in table headers: A, B, C... */
  key: string;
  label: string;
  source: string;
  results: BenchResults;
}

export interface CompareOutput {
  /** The terminal table and the capacity lines. */
  text: string;
  markdown: string;
  svg: string;
}

/** Reads and checks a results file written by `bench transcribe` or `bench speech`. */
export async function loadResults(path: string): Promise<BenchResults> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    throw usageError(`Expected a readable results file: '${path}' cannot be read`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw usageError(`Expected a JSON results file: '${path}' is not JSON`);
  }
  const results = value as Partial<BenchResults>;
  if (results.schema !== RESULTS_SCHEMA || !Array.isArray(results.steps)) {
    throw usageError(`Expected a bench results file (schema ${RESULTS_SCHEMA}): got '${path}'`);
  }
  return value as BenchResults;
}

export function toComparedRuns(inputs: ReadonlyArray<{ source: string; results: BenchResults }>): ComparedRun[] {
  const seen = new Map<string, number>();
  return inputs.map((input, index) => {
    const base = input.results.label;
    const count = (seen.get(base) ?? 0) + 1;
    seen.set(base, count);
    return {
      key: runKey(index),
      label: count > 1 ? `${base} (${count})` : base,
      source: input.source,
      results: input.results,
    };
  });
}

function runKey(index: number): string {
  return index < 26 ? String.fromCharCode(65 + index) : `R${index + 1}`;
}

/** `2.00x`, or a dash when either side is missing or the base is zero. */
export function formatRatio(value: number | undefined, base: number | undefined): string {
  if (value === undefined || base === undefined || !Number.isFinite(value) || !Number.isFinite(base) || base === 0) return '-';
  return `${(value / base).toFixed(2)}x`;
}

/** Speech runs are compared as speech only when every run is one. */
function panelsOf(runs: readonly ComparedRun[]): PlotPanels {
  return runs.every((run) => run.results.workload.kind === 'speech') ? 'speech' : 'requests';
}

function comparisonTable(runs: readonly ComparedRun[]): { header: string[]; rows: string[][] } {
  if (panelsOf(runs) === 'speech') return speechComparisonTable(runs);
  const levels = [...new Set(runs.flatMap((run) => run.results.steps.map((step) => step.level)))].sort((a, b) => a - b);
  const modes = new Set(runs.map((run) => run.results.mode));
  const levelName = modes.size === 1 ? (runs[0]?.results.mode === 'open' ? 'rate' : 'conc') : 'level';
  const base = runs[0]!;
  const others = runs.slice(1);
  const header = [
    levelName,
    ...runs.flatMap((run) => [`${run.key} req/s`, `${run.key} p95 ms`]),
    ...others.flatMap((run) => [`${run.key}/${base.key} req/s`, `${run.key}/${base.key} p95`]),
  ];
  const rows = levels.map((level) => {
    const stepOf = (run: ComparedRun) => run.results.steps.find((step) => step.level === level);
    const baseStep = stepOf(base);
    return [
      String(level),
      ...runs.flatMap((run) => {
        const step = stepOf(run);
        return [formatNumber(step?.requestsPerSecond, 2), formatNumber(step?.latencyMs?.p95, 0)];
      }),
      ...others.flatMap((run) => {
        const step = stepOf(run);
        return [
          formatRatio(step?.requestsPerSecond, baseStep?.requestsPerSecond),
          formatRatio(step?.latencyMs?.p95, baseStep?.latencyMs?.p95),
        ];
      }),
    ];
  });
  return { header, rows };
}

function speechComparisonTable(runs: readonly ComparedRun[]): { header: string[]; rows: string[][] } {
  const levels = [...new Set(runs.flatMap((run) => run.results.steps.map((step) => step.level)))].sort((a, b) => a - b);
  const base = runs[0]!;
  const others = runs.slice(1);
  const header = [
    runs[0]!.results.mode === 'open' ? 'rate' : 'streams',
    ...runs.flatMap((run) => [
      `${run.key} audio s/s`,
      `${run.key} ttfb p50`,
      `${run.key} ttfb p95`,
      `${run.key} stalled`,
      `${run.key} disk/call`,
      `${run.key} errors`,
    ]),
    ...others.flatMap((run) => [`${run.key}/${base.key} audio s/s`, `${run.key}/${base.key} ttfb p95`]),
  ];
  const stepOf = (run: ComparedRun, level: number): StepResult | undefined => run.results.steps.find((step) => step.level === level);
  const rows = levels.map((level) => {
    const baseStep = stepOf(base, level);
    return [
      String(level),
      ...runs.flatMap((run) => {
        const step = stepOf(run, level);
        return [
          formatNumber(step?.audioSecondsPerSecond, 1),
          formatNumber(step?.ttfbMs?.p50, 0),
          formatNumber(step?.ttfbMs?.p95, 0),
          step?.playback === undefined ? '-' : `${formatNumber(step.playback.stallShare * 100, 1)}%`,
          formatNumber(step?.resourceLoadsPerCall?.fromDisk, 2),
          step === undefined ? '-' : step.errors === 0 ? '0' : `${formatNumber(step.errorRate * 100, 1)}%`,
        ];
      }),
      ...others.flatMap((run) => {
        const step = stepOf(run, level);
        return [
          formatRatio(step?.audioSecondsPerSecond, baseStep?.audioSecondsPerSecond),
          formatRatio(step?.ttfbMs?.p95, baseStep?.ttfbMs?.p95),
        ];
      }),
    ];
  });
  return { header, rows };
}

/**
 * Speech: the most streams each run served within its SLO, and that figure against the first
 * run's. A run whose every level missed the SLO served zero streams within it.
 */
function speechCapacityRows(runs: readonly ComparedRun[]): string[] {
  const streams = (run: ComparedRun): number | undefined => {
    const capacity = run.results.capacity;
    if (capacity === undefined) return undefined;
    return capacity.step === undefined ? 0 : capacity.level;
  };
  const base = runs[0]!;
  return runs.map((run) => {
    const capacity = run.results.capacity;
    if (capacity === undefined) return `${run.key}: no SLO recorded (run with --slo)`;
    const count = streams(run)!;
    const detail =
      capacity.step === undefined
        ? ''
        : ` (first byte p95 ${formatNumber(capacity.ttfbP95Ms, 0)} ms, ${formatNumber(capacity.audioSecondsPerSecond, 1)} audio s/s)`;
    const ratio = run === base ? '' : ` (${formatRatio(count, streams(base))} of ${base.key})`;
    return `${run.key}: ${count} stream${count === 1 ? '' : 's'} within ${capacity.slo?.join(', ') ?? 'the SLO'}${detail}${ratio}`;
  });
}

function headline(run: ComparedRun): Capacity | undefined {
  return run.results.capacity?.step !== undefined ? run.results.capacity : run.results.peak;
}

function capacityRows(runs: readonly ComparedRun[]): string[] {
  if (panelsOf(runs) === 'speech') return speechCapacityRows(runs);
  const base = runs[0]!;
  const baseCapacity = headline(base);
  return runs.map((run) => {
    const capacity = headline(run);
    const what =
      capacity === undefined
        ? 'no successful step'
        : `${capacity.basis === 'slo' ? 'capacity' : 'peak'} ${formatNumber(capacity.requestsPerSecond, 2)} req/s at level ${capacity.level}`;
    const ratio = run === base ? '' : ` (${formatRatio(capacity?.requestsPerSecond, baseCapacity?.requestsPerSecond)} of ${base.key})`;
    const cost = capacity?.cost?.perAudioHourUsd === undefined ? '' : `, ${formatUsd(capacity.cost.perAudioHourUsd)} per audio hour`;
    return `${run.key}: ${what}${cost}${ratio}`;
  });
}

/** The first-byte p95 bound when every run used the same one: the line to draw. */
function commonTtfbP95Slo(runs: readonly ComparedRun[]): number | undefined {
  const bounds = runs.map((run) =>
    run.results.options.slo?.map((text) => /^ttfb_p95<=?([\d.]+)ms$/.exec(text)?.[1]).find((value) => value !== undefined),
  );
  return bounds.every((bound) => bound !== undefined && bound === bounds[0]) ? Number(bounds[0]) : undefined;
}

export function compareResults(runs: readonly ComparedRun[]): CompareOutput {
  if (runs.length < 2) throw usageError(`Expected at least two results files to compare: got ${runs.length}`);
  const { header, rows } = comparisonTable(runs);
  const legend = runs.map(
    (run) =>
      `${run.key} = ${run.label} (${run.source}, ${run.results.startedAt}, commit ${run.results.gitCommit?.slice(0, 12) ?? 'unknown'})`,
  );
  const modes = new Set(runs.map((run) => run.results.mode));
  const kinds = [...new Set(runs.map((run) => run.results.workload.kind))];
  const warnings = [
    ...(modes.size > 1 ? ['Warning: the runs mix closed-loop and open-loop modes; levels are not comparable.'] : []),
    ...(kinds.length > 1 ? [`Warning: the runs mix workloads (${kinds.join(', ')}); they are compared on requests per second.`] : []),
  ];
  const text = [...legend, ...warnings, '', formatTextTable(header, rows), '', ...capacityRows(runs), ''].join('\n');
  const markdown = [
    '# Bench comparison',
    '',
    ...legend.map((line) => `- ${line}`),
    ...warnings.map((line) => `- ${line}`),
    '',
    formatMarkdownTable(header, rows),
    '',
    ...capacityRows(runs).map((line) => `- ${line}`),
    '',
  ].join('\n');
  const panels = panelsOf(runs);
  const xLabel =
    modes.size === 1 && runs[0]!.results.mode === 'open'
      ? 'offered rate (requests / s)'
      : panels === 'speech'
        ? 'concurrent streams'
        : 'concurrency';
  const ttfbSlo = panels === 'speech' ? commonTtfbP95Slo(runs) : undefined;
  const svg = renderPlotSvg({
    title: `Comparison: ${runs.map((run) => run.key).join(' vs ')}`,
    xLabel,
    panels,
    series: runs.map((run) => toPlotSeries(run.results, `${run.key}: ${run.label}`, panels)),
    ...(ttfbSlo === undefined ? {} : { sloP95Ms: ttfbSlo }),
  });
  return { text, markdown, svg };
}
