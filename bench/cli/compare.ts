/**
 * `bench compare`: several results files side by side, level by level, with the ratio of each
 * run to the first (B/A), and all of them on one plot.
 */
import { readFile } from 'node:fs/promises';
import { usageError } from './bench-error.js';
import { renderPlotSvg, toPlotSeries } from './plot.js';
import { RESULTS_SCHEMA, type BenchResults, type Capacity } from './report.js';
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

/** Reads and checks a results file written by `bench transcribe`. */
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

function comparisonTable(runs: readonly ComparedRun[]): { header: string[]; rows: string[][] } {
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

function headline(run: ComparedRun): Capacity | undefined {
  return run.results.capacity?.step !== undefined ? run.results.capacity : run.results.peak;
}

function capacityRows(runs: readonly ComparedRun[]): string[] {
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

export function compareResults(runs: readonly ComparedRun[]): CompareOutput {
  if (runs.length < 2) throw usageError(`Expected at least two results files to compare: got ${runs.length}`);
  const { header, rows } = comparisonTable(runs);
  const legend = runs.map(
    (run) =>
      `${run.key} = ${run.label} (${run.source}, ${run.results.startedAt}, commit ${run.results.gitCommit?.slice(0, 12) ?? 'unknown'})`,
  );
  const modes = new Set(runs.map((run) => run.results.mode));
  const warnings = modes.size > 1 ? ['Warning: the runs mix closed-loop and open-loop modes; levels are not comparable.'] : [];
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
  const xLabel = modes.size === 1 && runs[0]!.results.mode === 'open' ? 'offered rate (requests / s)' : 'concurrency';
  const svg = renderPlotSvg({
    title: `Comparison: ${runs.map((run) => run.key).join(' vs ')}`,
    xLabel,
    series: runs.map((run) => toPlotSeries(run.results, `${run.key}: ${run.label}`)),
  });
  return { text, markdown, svg };
}
