/**
 * The accuracy bench's results: totals, the comparison with a baseline run, the results file
 * (results.json, schema `voxmux.bench.accuracy/1`) and its text and markdown summaries.
 */
import { readFile } from 'node:fs/promises';
import { occurrenceKeys } from './accuracy-manifest.js';
import type { AccuracyItemResult } from './accuracy-run.js';
import { usageError } from './bench-error.js';
import type { MachineInfo } from './machine-info.js';
import { formatMarkdownTable, formatNumber, formatTextTable } from './text-table.js';
import { wordErrorRate, type WordErrors } from './word-error-rate.js';

export const ACCURACY_SCHEMA = 'voxmux.bench.accuracy/1';

/** Word error counts summed over items, with the rate they give. */
export interface ErrorTotals {
  referenceWords: number;
  substitutions: number;
  deletions: number;
  insertions: number;
  /** Errors over reference words; absent when there are no reference words. */
  wer?: number;
}

export interface AccuracyTotals extends ErrorTotals {
  items: number;
  ok: number;
  failed: number;
  /** Items that succeeded and have a reference: the ones the word error rate covers. */
  scored: number;
  /** Failed items by error code. */
  errorsByCode: Record<string, number>;
}

export interface BaselineComparison {
  path: string;
  label: string;
  /** Items transcribed successfully in both runs. */
  compared: number;
  /** Of those, how many transcripts differ after normalization. */
  changed: number;
  /** This run's transcripts against the baseline's, as if the baseline's were the reference. */
  disagreement: ErrorTotals;
  /** Items scored against their reference in both runs, and each run's rate on exactly those. */
  bothScored: number;
  wer?: number;
  baselineWer?: number;
}

export interface AccuracyResults {
  schema: typeof ACCURACY_SCHEMA;
  label: string;
  endpoint: string;
  model: string;
  command: string[];
  gitCommit?: string;
  machine: MachineInfo;
  startedAt: string;
  endedAt: string;
  options: { concurrency: number; timeoutMs: number; fields: Record<string, string>; manifest: string };
  totals: AccuracyTotals;
  baseline?: BaselineComparison;
  items: AccuracyItemResult[];
  notes: string[];
}

export function sumErrors(errors: readonly WordErrors[]): ErrorTotals {
  const sum = { referenceWords: 0, substitutions: 0, deletions: 0, insertions: 0 };
  for (const e of errors) {
    sum.referenceWords += e.referenceWords;
    sum.substitutions += e.substitutions;
    sum.deletions += e.deletions;
    sum.insertions += e.insertions;
  }
  const wer = wordErrorRate(sum);
  return { ...sum, ...(wer === undefined ? {} : { wer }) };
}

export function summarizeAccuracy(items: readonly AccuracyItemResult[]): AccuracyTotals {
  const errorsByCode: Record<string, number> = {};
  let ok = 0;
  const scored: WordErrors[] = [];
  for (const item of items) {
    if (item.errorCode !== undefined) {
      errorsByCode[item.errorCode] = (errorsByCode[item.errorCode] ?? 0) + 1;
      continue;
    }
    ok += 1;
    if (item.errors !== undefined) scored.push(item.errors);
  }
  return { items: items.length, ok, failed: items.length - ok, scored: scored.length, ...sumErrors(scored), errorsByCode };
}

export function compareWithBaseline(
  items: readonly AccuracyItemResult[],
  baseline: { path: string; results: AccuracyResults },
): BaselineComparison {
  const beforeKeys = occurrenceKeys(baseline.results.items.map((item) => item.audio));
  const before = new Map(baseline.results.items.map((item, index) => [beforeKeys[index]!, item]));
  const keys = occurrenceKeys(items.map((item) => item.audio));
  const disagreements: WordErrors[] = [];
  const now: WordErrors[] = [];
  const then: WordErrors[] = [];
  let changed = 0;
  for (const [index, item] of items.entries()) {
    const old = before.get(keys[index]!);
    if (old === undefined || old.errorCode !== undefined || item.errorCode !== undefined || item.baselineErrors === undefined) continue;
    disagreements.push(item.baselineErrors);
    const e = item.baselineErrors;
    if (e.substitutions + e.deletions + e.insertions > 0) changed += 1;
    if (item.errors !== undefined && old.errors !== undefined) {
      now.push(item.errors);
      then.push(old.errors);
    }
  }
  const wer = sumErrors(now).wer;
  const baselineWer = sumErrors(then).wer;
  return {
    path: baseline.path,
    label: baseline.results.label,
    compared: disagreements.length,
    changed,
    disagreement: sumErrors(disagreements),
    bothScored: now.length,
    ...(wer === undefined ? {} : { wer }),
    ...(baselineWer === undefined ? {} : { baselineWer }),
  };
}

/** Transcripts of a baseline results file, by `occurrenceKeys` (failed items left out). */
export function baselineTranscripts(results: AccuracyResults): Map<string, string> {
  const keys = occurrenceKeys(results.items.map((item) => item.audio));
  const map = new Map<string, string>();
  results.items.forEach((item, index) => {
    if (item.hypothesis !== undefined && item.errorCode === undefined) map.set(keys[index]!, item.hypothesis);
  });
  return map;
}

export async function loadAccuracyResults(path: string): Promise<AccuracyResults> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(path, 'utf8'));
  } catch {
    throw usageError(`Expected --baseline to name a readable JSON results file: '${path}' is not one`);
  }
  const results = value as Partial<AccuracyResults>;
  if (results.schema !== ACCURACY_SCHEMA || !Array.isArray(results.items)) {
    throw usageError(`Expected --baseline to be an accuracy results file (schema ${ACCURACY_SCHEMA}): got '${path}'`);
  }
  return value as AccuracyResults;
}

export function toAccuracyJson(results: AccuracyResults): string {
  return `${JSON.stringify(results, null, 2)}\n`;
}

const percent = (rate: number | undefined): string => (rate === undefined ? '-' : `${formatNumber(100 * rate, 2)} %`);

/** The headline lines printed at the end of a run and at the top of summary.md. */
export function accuracyLines(results: AccuracyResults): string[] {
  const t = results.totals;
  const lines = [
    `Accuracy ${results.label}: ${t.items} file(s), ${t.ok} transcribed, ${t.failed} failed` +
      (t.failed > 0
        ? ` (${Object.entries(t.errorsByCode)
            .map(([code, n]) => `${code}: ${n}`)
            .join(', ')})`
        : ''),
    t.scored === 0
      ? 'WER: - (no transcribed file has a reference)'
      : `WER: ${percent(t.wer)} over ${t.scored} file(s), ${t.referenceWords} reference words: ` +
        `${t.substitutions} substitutions, ${t.deletions} deletions, ${t.insertions} insertions`,
  ];
  const b = results.baseline;
  if (b !== undefined) {
    lines.push(
      `Against baseline ${b.label}: ${b.changed} of ${b.compared} transcript(s) differ, ` +
        `word disagreement ${percent(b.disagreement.wer)} (${b.disagreement.substitutions} S, ${b.disagreement.deletions} D, ${b.disagreement.insertions} I)`,
    );
    if (b.bothScored > 0)
      lines.push(
        `  on the ${b.bothScored} file(s) scored in both: WER ${percent(b.wer)} against ${percent(b.baselineWer)} for the baseline`,
      );
  }
  return lines;
}

/** The items with the most errors first (failed ones on top), at most `limit` of them. */
export function worstItems(results: AccuracyResults, limit: number): AccuracyItemResult[] {
  const errorCount = (item: AccuracyItemResult): number =>
    item.errorCode !== undefined
      ? Number.POSITIVE_INFINITY
      : item.errors === undefined
        ? -1
        : item.errors.substitutions + item.errors.deletions + item.errors.insertions;
  return [...results.items].sort((a, b) => errorCount(b) - errorCount(a)).slice(0, limit);
}

function itemRow(item: AccuracyItemResult): string[] {
  const e = item.errors;
  return [
    item.audio,
    item.errorCode ?? (e === undefined ? '-' : percent(wordErrorRate(e))),
    e === undefined ? '-' : String(e.referenceWords),
    e === undefined ? '-' : String(e.substitutions),
    e === undefined ? '-' : String(e.deletions),
    e === undefined ? '-' : String(e.insertions),
    formatNumber(item.latencyMs, 0),
  ];
}

const ITEM_HEADER = ['audio', 'WER', 'words', 'S', 'D', 'I', 'ms'];

export function formatWorstTable(results: AccuracyResults, limit: number): string {
  return formatTextTable(ITEM_HEADER, worstItems(results, limit).map(itemRow));
}

export function toAccuracyMarkdown(results: AccuracyResults): string {
  const fields = Object.entries(results.options.fields);
  const lines = [
    `# Accuracy: ${results.label}`,
    '',
    `- Endpoint: ${results.endpoint}, model \`${results.model}\`${fields.length === 0 ? '' : `, fields ${fields.map(([k, v]) => `${k}=${v}`).join(', ')}`}`,
    `- Manifest: ${results.options.manifest}; ${results.options.concurrency} request(s) at a time`,
    `- Started ${results.startedAt}, ended ${results.endedAt}`,
    `- Command: \`${results.command.join(' ')}\``,
    ...(results.gitCommit === undefined ? [] : [`- Git commit: ${results.gitCommit}`]),
    `- Normalization: NFKC, lower case, punctuation removed, apostrophes inside words kept; numbers as written`,
    '',
    '## Totals',
    '',
    ...accuracyLines(results).map((line) => `- ${line.trim()}`),
    ...results.notes.map((note) => `- Note: ${note}`),
    '',
    '## Files',
    '',
    formatMarkdownTable(ITEM_HEADER, results.items.map(itemRow)),
    '',
  ];
  return lines.join('\n');
}
