/**
 * Draws the ramp as an SVG written by hand (no dependency): two panels side by side, throughput
 * and p95 latency against the load level, one coloured series per run with a legend. Single runs
 * and `bench compare` use the same drawing. For speech the panels are the audio produced per
 * second and the first-byte p95, the figures a voice call lives by.
 */
import type { BenchResults, StepResult } from './report.js';

export interface PlotPoint {
  /** Concurrency or offered rate. */
  x: number;
  /** Requests per second, or audio seconds per second for speech. */
  throughput: number;
  /** p95 latency, or p95 time to the first audio byte for speech. */
  p95Ms?: number;
}

/** What the two panels show: requests/s and p95 latency, or audio s/s and first-byte p95 (speech). */
export type PlotPanels = 'requests' | 'speech';

export interface PlotSeries {
  label: string;
  points: readonly PlotPoint[];
  /** Individual repetitions, drawn as small hollow dots behind the series. */
  repPoints?: readonly PlotPoint[];
}

export interface PlotOptions {
  title: string;
  xLabel: string;
  series: readonly PlotSeries[];
  /** Draws a dashed SLO line on the latency panel. */
  sloP95Ms?: number;
  /** @default 'requests' */
  panels?: PlotPanels;
}

const WIDTH = 1000;
const PANEL_TOP = 56;
const PANEL_HEIGHT = 300;
const PANEL_WIDTH = 380;
const PANEL_LEFTS = [80, 570] as const;
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

/** The panels that suit a run: speech runs plot audio and first byte. */
export function plotPanelsFor(results: BenchResults): PlotPanels {
  return results.workload.kind === 'speech' ? 'speech' : 'requests';
}

/** The points of a run, for the plot: one per level, and one per rep. */
export function toPlotSeries(results: BenchResults, label = results.label, panels = plotPanelsFor(results)): PlotSeries {
  type Figures = Pick<StepResult, 'requestsPerSecond' | 'audioSecondsPerSecond' | 'latencyMs' | 'ttfbMs'>;
  const toPoint = (x: number, figures: Figures): PlotPoint => {
    const p95Ms = panels === 'speech' ? figures.ttfbMs?.p95 : figures.latencyMs?.p95;
    return {
      x,
      throughput: panels === 'speech' ? (figures.audioSecondsPerSecond ?? 0) : figures.requestsPerSecond,
      ...(p95Ms === undefined ? {} : { p95Ms }),
    };
  };
  return {
    label,
    points: results.steps.map((step) => toPoint(step.level, step)),
    repPoints: results.options.reps > 1 ? results.steps.flatMap((step) => step.reps.map((rep) => toPoint(step.level, rep))) : [],
  };
}

export function renderPlotSvg(options: PlotOptions): string {
  const allPoints = options.series.flatMap((s) => [...s.points, ...(s.repPoints ?? [])]);
  const xs = allPoints.map((p) => p.x).filter((x) => Number.isFinite(x) && x > 0);
  const xMin = xs.length > 0 ? Math.min(...xs) : 1;
  const xMax = xs.length > 0 ? Math.max(...xs) : 1;
  const isLogX = xMin > 0 && xMax / xMin >= 8;
  const xTicks = isLogX ? logTicks(xMin, xMax) : linearTicks(Math.min(0, xMin), xMax);
  const xDomain: [number, number] = isLogX ? [xMin, xMax] : [xTicks[0]!, xTicks.at(-1)!];

  const legendRows = layoutLegend(options.series.map((s) => s.label));
  const height = PANEL_TOP + PANEL_HEIGHT + 64 + legendRows.length * 20 + 12;

  const parts: string[] = [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<title>${escapeXml(options.title)}</title>`,
    `<rect x="0" y="0" width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="${WIDTH / 2}" y="26" text-anchor="middle" font-size="16" font-weight="bold">${escapeXml(options.title)}</text>`,
  ];

  const isSpeech = options.panels === 'speech';
  const panels: Array<{ title: string; yLabel: string; value: (p: PlotPoint) => number | undefined; slo?: number }> = [
    {
      title: isSpeech ? 'Audio throughput' : 'Throughput',
      yLabel: isSpeech ? 'audio seconds / s' : 'requests / s',
      value: (p) => p.throughput,
    },
    {
      title: isSpeech ? 'First byte p95' : 'Latency p95',
      yLabel: isSpeech ? 'p95 time to first audio byte (ms)' : 'p95 latency (ms)',
      value: (p) => p.p95Ms,
      ...(options.sloP95Ms === undefined ? {} : { slo: options.sloP95Ms }),
    },
  ];

  panels.forEach((panel, panelIndex) => {
    const left = PANEL_LEFTS[panelIndex]!;
    const values = allPoints.map(panel.value).filter((v): v is number => v !== undefined && Number.isFinite(v));
    const yMaxData = Math.max(0, ...values, panel.slo ?? 0);
    const yTicks = linearTicks(0, yMaxData > 0 ? yMaxData * 1.05 : 1);
    const yMax = yTicks.at(-1)!;
    const sx = (x: number): number => {
      const t = isLogX
        ? (Math.log(x) - Math.log(xDomain[0])) / (Math.log(xDomain[1]) - Math.log(xDomain[0]) || 1)
        : (x - xDomain[0]) / (xDomain[1] - xDomain[0] || 1);
      return round(left + t * PANEL_WIDTH);
    };
    const sy = (y: number): number => round(PANEL_TOP + PANEL_HEIGHT - (y / (yMax || 1)) * PANEL_HEIGHT);

    parts.push(`<g class="panel" id="panel-${panelIndex === 0 ? 'throughput' : 'p95'}">`);
    parts.push(
      `<text x="${left + PANEL_WIDTH / 2}" y="${PANEL_TOP - 10}" text-anchor="middle" font-size="13" font-weight="bold">${escapeXml(panel.title)}</text>`,
    );
    for (const tick of yTicks) {
      const y = sy(tick);
      parts.push(`<line x1="${left}" y1="${y}" x2="${left + PANEL_WIDTH}" y2="${y}" stroke="#e5e5e5"/>`);
      parts.push(`<text x="${left - 6}" y="${y + 4}" text-anchor="end" fill="#444444">${escapeXml(formatTick(tick))}</text>`);
    }
    for (const tick of xTicks) {
      if (tick < xDomain[0] - 1e-9 || tick > xDomain[1] + 1e-9) continue;
      const x = sx(tick);
      parts.push(`<line x1="${x}" y1="${PANEL_TOP}" x2="${x}" y2="${PANEL_TOP + PANEL_HEIGHT}" stroke="#f0f0f0"/>`);
      parts.push(
        `<text x="${x}" y="${PANEL_TOP + PANEL_HEIGHT + 16}" text-anchor="middle" fill="#444444">${escapeXml(formatTick(tick))}</text>`,
      );
    }
    parts.push(
      `<rect x="${left}" y="${PANEL_TOP}" width="${PANEL_WIDTH}" height="${PANEL_HEIGHT}" fill="none" stroke="#888888"/>`,
      `<text x="${left + PANEL_WIDTH / 2}" y="${PANEL_TOP + PANEL_HEIGHT + 36}" text-anchor="middle">${escapeXml(options.xLabel)}${isLogX ? ' (log scale)' : ''}</text>`,
      `<text x="${left - 52}" y="${PANEL_TOP + PANEL_HEIGHT / 2}" text-anchor="middle" transform="rotate(-90 ${left - 52} ${PANEL_TOP + PANEL_HEIGHT / 2})">${escapeXml(panel.yLabel)}</text>`,
    );
    if (panel.slo !== undefined) {
      const y = sy(panel.slo);
      parts.push(
        `<line x1="${left}" y1="${y}" x2="${left + PANEL_WIDTH}" y2="${y}" stroke="#333333" stroke-dasharray="6 4"/>`,
        `<text x="${left + 4}" y="${y - 4}" fill="#333333">SLO ${escapeXml(formatTick(panel.slo))} ms</text>`,
      );
    }
    options.series.forEach((series, seriesIndex) => {
      const color = COLORS[seriesIndex % COLORS.length]!;
      for (const point of series.repPoints ?? []) {
        const value = panel.value(point);
        if (value === undefined || !Number.isFinite(value) || !(point.x > 0 || !isLogX)) continue;
        parts.push(`<circle cx="${sx(point.x)}" cy="${sy(value)}" r="2.5" fill="none" stroke="${color}" stroke-opacity="0.5"/>`);
      }
      const points = [...series.points]
        .filter((p) => (isLogX ? p.x > 0 : true))
        .sort((a, b) => a.x - b.x)
        .flatMap((p) => {
          const value = panel.value(p);
          return value === undefined || !Number.isFinite(value) ? [] : [[sx(p.x), sy(value)] as const];
        });
      if (points.length > 1) {
        parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${points.map(([x, y]) => `${x},${y}`).join(' ')}"/>`);
      }
      for (const [x, y] of points) parts.push(`<circle cx="${x}" cy="${y}" r="3.5" fill="${color}"/>`);
    });
    parts.push('</g>');
  });

  parts.push('<g class="legend">');
  legendRows.forEach((row, rowIndex) => {
    const y = PANEL_TOP + PANEL_HEIGHT + 64 + rowIndex * 20;
    for (const entry of row) {
      const color = COLORS[entry.index % COLORS.length]!;
      parts.push(
        `<line x1="${entry.x}" y1="${y - 4}" x2="${entry.x + 22}" y2="${y - 4}" stroke="${color}" stroke-width="3"/>`,
        `<text x="${entry.x + 28}" y="${y}">${escapeXml(entry.label)}</text>`,
      );
    }
  });
  parts.push('</g>', '</svg>', '');
  return parts.join('\n');
}

interface LegendEntry {
  index: number;
  label: string;
  x: number;
}

function layoutLegend(labels: readonly string[]): LegendEntry[][] {
  const rows: LegendEntry[][] = [];
  let row: LegendEntry[] = [];
  let x = PANEL_LEFTS[0];
  labels.forEach((raw, index) => {
    const label = raw.length > 60 ? `${raw.slice(0, 57)}...` : raw;
    const width = 28 + label.length * 7 + 24;
    if (row.length > 0 && x + width > WIDTH - 20) {
      rows.push(row);
      row = [];
      x = PANEL_LEFTS[0];
    }
    row.push({ index, label, x });
    x += width;
  });
  if (row.length > 0) rows.push(row);
  return rows;
}

/** Round-number ticks from `min` to at least `max`, about five of them. */
export function linearTicks(min: number, max: number): number[] {
  const span = max - min;
  if (!(span > 0)) return [min, min + 1];
  const rough = span / 5;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= rough) ?? 10 * magnitude;
  const first = Math.floor(min / step) * step;
  const ticks: number[] = [];
  for (let v = first; v < max + step - 1e-9 && ticks.length < 50; v += step) ticks.push(round(v));
  return ticks;
}

/** Powers of two (or of ten over wide ranges) between min and max, plus both ends. */
export function logTicks(min: number, max: number): number[] {
  const base = max / min > 4096 ? 10 : 2;
  const ticks = new Set<number>([min, max]);
  for (let v = base ** Math.ceil(Math.log(min) / Math.log(base) - 1e-9); v <= max; v *= base) ticks.add(round(v));
  const sorted = [...ticks].sort((a, b) => a - b);
  // Drop a tick crowding an end, so that labels do not overlap.
  return sorted.filter((tick, i) => i === 0 || i === sorted.length - 1 || (tick / sorted[i - 1]! > 1.3 && sorted.at(-1)! / tick > 1.3));
}

function formatTick(value: number): string {
  if (Math.abs(value) >= 10_000) return `${round(value / 1000)}k`;
  return String(round(value));
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

export function escapeXml(text: string): string {
  return (
    text
      // Characters that XML 1.0 forbids outright are dropped.
      .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '')
      .replace(/&/g, '&amp;')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;')
      .replace(/'/g, '&apos;')
  );
}
