/** `voxmux cost`'s output: the modes as a markdown table, results.json's shape and a bar chart (pure). */
import { formatClock, type CostOptions, type CostReport } from './cost-model.js';
import { escapeXml } from './plot.js';
import { formatMarkdownTable } from './text-table.js';

export interface CostResults {
  kind: 'voxmux-cost';
  /** The request log files read. */
  sources: string[];
  /** Lines skipped because they were not request log entries (a torn last line). */
  skippedLines: number;
  options: CostOptions;
  trace: CostReport['trace'] & { firstCall: string; lastCall: string };
  modes: CostReport['modes'];
}

const usd = (value: number | null, digits = 2) => (value === null ? '-' : `$${value.toFixed(digits)}`);

export function costMarkdown(results: CostResults): string {
  const { trace, options } = results;
  const header = [
    'mode',
    'uptime h/day',
    'GPU cost / month',
    'calls that waited',
    'mean / max wait s',
    'per call',
    'per audio hour',
    'per call minute',
  ];
  const rows = results.modes.map((m) => [
    m.label,
    m.uptimeHoursPerDay.toFixed(2),
    usd(m.monthlyCostUsd),
    String(m.waitedCalls),
    m.waitedCalls === 0 ? '-' : `${m.meanWaitS.toFixed(0)} / ${m.maxWaitS.toFixed(0)}`,
    usd(m.costPerCallUsd, 4),
    usd(m.costPerAudioHourUsd),
    usd(m.costPerCallMinuteUsd, 4),
  ]);
  const tz = options.tzOffsetMin === 0 ? 'UTC' : `UTC${options.tzOffsetMin > 0 ? '+' : '-'}${formatClock(Math.abs(options.tzOffsetMin))}`;
  return [
    `# GPU cost by operating mode`,
    '',
    `${trace.calls} calls from ${trace.firstCall} to ${trace.lastCall} (${trace.spanDays} days, scaled to 30), ` +
      `${trace.audioHours.toFixed(2)} audio hours, ${trace.callMinutes.toFixed(1)} call minutes; ` +
      `${options.gpus} GPU${options.gpus === 1 ? '' : 's'} at $${options.gpuHourUsd}/GPU-hour, cold start ${options.coldStartS} s, ` +
      `fixed window in ${tz}.`,
    '',
    formatMarkdownTable(header, rows),
    '',
    'Calls that waited: on demand, calls that arrived while the node was stopped or booting (each waits until it is ready); ' +
      'for fixed hours, calls that arrived outside the window (they fail, or wait a cold start if they may wake the node).',
    '',
  ].join('\n');
}

const BAR_LEFT = 260;
const BAR_WIDTH = 480;
const ROW_HEIGHT = 34;

/** One horizontal bar per mode: its monthly GPU cost. */
export function costSvg(results: CostResults): string {
  const max = Math.max(...results.modes.map((m) => m.monthlyCostUsd), 1e-9);
  const height = 70 + results.modes.length * ROW_HEIGHT;
  const bars = results.modes.map((m, i) => {
    const y = 50 + i * ROW_HEIGHT;
    const width = (m.monthlyCostUsd / max) * BAR_WIDTH;
    return [
      `<text x="${BAR_LEFT - 10}" y="${y + 17}" text-anchor="end" font-size="13">${escapeXml(m.label)}</text>`,
      `<rect x="${BAR_LEFT}" y="${y}" width="${width.toFixed(1)}" height="24" fill="${m.kind === 'on-demand' ? '#2ca02c' : '#1f77b4'}"/>`,
      `<text x="${(BAR_LEFT + width + 6).toFixed(1)}" y="${y + 17}" font-size="13">${escapeXml(usd(m.monthlyCostUsd))} (${m.uptimeHoursPerDay.toFixed(1)} h/day)</text>`,
    ].join('\n');
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="980" height="${height}" font-family="sans-serif">`,
    `<rect width="980" height="${height}" fill="white"/>`,
    `<text x="20" y="28" font-size="16">${escapeXml(`GPU cost per month by operating mode (${results.trace.calls} calls, ${results.trace.spanDays} days scaled to 30)`)}</text>`,
    ...bars,
    '</svg>',
    '',
  ].join('\n');
}
