/** Plain-text and markdown tables for terminal output and summaries. */

export type Alignment = 'left' | 'right';

export interface TableOptions {
  /** Per column; numbers usually read best right-aligned. Defaults to left for the first column, right for the rest. */
  align?: readonly Alignment[];
}

/** A fixed-width table with a dashed rule under the header. */
export function formatTextTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>, options: TableOptions = {}): string {
  const widths = header.map((cell, i) => Math.max(cell.length, ...rows.map((row) => (row[i] ?? '').length)));
  const alignOf = (i: number): Alignment => options.align?.[i] ?? (i === 0 ? 'left' : 'right');
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (alignOf(i) === 'left' ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export function formatMarkdownTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>, options: TableOptions = {}): string {
  const alignOf = (i: number): Alignment => options.align?.[i] ?? (i === 0 ? 'left' : 'right');
  const escape = (cell: string): string => cell.replace(/\|/g, '\\|');
  return [
    `| ${header.map(escape).join(' | ')} |`,
    `| ${header.map((_, i) => (alignOf(i) === 'left' ? '---' : '---:')).join(' | ')} |`,
    ...rows.map((row) => `| ${header.map((_, i) => escape(row[i] ?? '')).join(' | ')} |`),
  ].join('\n');
}

/** A number for people: a fixed count of decimals, or a dash when absent. */
export function formatNumber(value: number | undefined, decimals = 1): string {
  if (value === undefined || !Number.isFinite(value)) return '-';
  return value.toFixed(decimals);
}

/** Small amounts of money keep three significant digits. */
export function formatUsd(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return '-';
  if (value >= 1) return `$${value.toFixed(2)}`;
  return `$${value.toPrecision(3)}`;
}
