/**
 * What `voxmux bench diarize` writes: results.json (schema voxmux.bench.diarize/v1), results.csv
 * (one row per file in accuracy mode, per chunk in load mode) and summary.md, and the lines the
 * terminal shows.
 */
import type { DiarizeAccuracyItemResult, DiarizeLoadRun, pooledDer } from './diarize-run.js';
import { toLatencyStats, type LatencyStats } from './report.js';

export const DIARIZE_SCHEMA = 'voxmux.bench.diarize/v1';

export interface DiarizeLoadTotals {
  sessions: number;
  /** Sessions whose creation failed. */
  sessionsFailed: number;
  chunks: number;
  ok: number;
  /** Failed chunks by error code. */
  errors: Record<string, number>;
  /** Chunks answered session_expired. */
  expiries: number;
  latencyMs: LatencyStats | undefined;
  /** Processing time per second of audio: the summed latency of the successful chunks over their summed audio. */
  realTimeFactor: number | undefined;
  chunksPerSecond: number;
  wallS: number;
  /** Chunks sent LATE_SEND_MS or more after their time in the schedule, and the latest (realtime pacing). */
  sentLate: number;
  maxLateMs: number;
}

/** A chunk sent this long after its time counts as late (timers alone are a few ms off). */
export const LATE_SEND_MS = 50;

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;

export function summarizeDiarizeLoad(run: DiarizeLoadRun, sessions: number): DiarizeLoadTotals {
  const ok = run.chunks.filter((c) => c.errorCode === undefined);
  const errors: Record<string, number> = {};
  for (const c of run.chunks) if (c.errorCode !== undefined) errors[c.errorCode] = (errors[c.errorCode] ?? 0) + 1;
  const audioS = ok.reduce((a, c) => a + c.audioS, 0);
  const latencyS = ok.reduce((a, c) => a + c.latencyMs, 0) / 1000;
  return {
    sessions,
    sessionsFailed: Object.values(run.createErrors).reduce((a, b) => a + b, 0),
    chunks: run.chunks.length,
    ok: ok.length,
    errors,
    expiries: errors.session_expired ?? 0,
    latencyMs: toLatencyStats(ok.map((c) => c.latencyMs)),
    realTimeFactor: audioS > 0 ? round(latencyS / audioS, 4) : undefined,
    chunksPerSecond: run.wallS > 0 ? round(run.chunks.length / run.wallS, 2) : 0,
    wallS: round(run.wallS, 3),
    sentLate: run.chunks.filter((c) => c.lateMs >= LATE_SEND_MS).length,
    maxLateMs: round(
      run.chunks.reduce((a, c) => Math.max(a, c.lateMs), 0),
      1,
    ),
  };
}

export function diarizeLoadLines(t: DiarizeLoadTotals): string[] {
  const l = t.latencyMs;
  const errors = Object.entries(t.errors)
    .map(([code, n]) => `${code} ${n}`)
    .join(', ');
  return [
    `Sessions: ${t.sessions} (${t.sessionsFailed} failed to open); chunks: ${t.chunks}, ok ${t.ok}, errors ${t.chunks - t.ok}${errors === '' ? '' : ` (${errors})`}, expiries ${t.expiries}`,
    l === undefined
      ? 'Latency per chunk: none succeeded'
      : `Latency per chunk (ms): p50 ${l.p50}, p95 ${l.p95}, p99 ${l.p99}, mean ${l.mean}, max ${l.max}`,
    `Real-time factor: ${t.realTimeFactor ?? 'n/a'}; ${t.chunksPerSecond} chunks/s over ${t.wallS} s`,
    `Pacing: ${t.sentLate} of ${t.chunks} chunks sent late (>= ${LATE_SEND_MS} ms after their time), at most ${t.maxLateMs} ms late`,
  ];
}

export function diarizeLoadCsv(run: DiarizeLoadRun): string {
  const rows = run.chunks.map((c) =>
    [c.session, c.seq, round(c.latencyMs, 2), round(c.lateMs, 2), round(c.audioS, 3), c.errorCode ?? ''].join(','),
  );
  return ['session,seq,latency_ms,late_ms,audio_s,error_code', ...rows].join('\n') + '\n';
}

export type PooledDer = ReturnType<typeof pooledDer>;

const pct = (x: number) => `${round(100 * x, 2)} %`;

export function diarizeAccuracyLines(t: PooledDer, collarS: number): string[] {
  return [
    `DER ${pct(t.der)} over ${t.files} file(s) (${t.failed} failed), collar ${collarS} s, overlap scored`,
    `  missed ${pct(t.scoredSpeechS > 0 ? t.missedS / t.scoredSpeechS : 0)}, false alarm ${pct(t.scoredSpeechS > 0 ? t.falseAlarmS / t.scoredSpeechS : 0)}, confusion ${pct(t.scoredSpeechS > 0 ? t.confusionS / t.scoredSpeechS : 0)} of ${round(t.scoredSpeechS, 2)} s scored speech`,
  ];
}

export function diarizeAccuracyCsv(items: readonly DiarizeAccuracyItemResult[]): string {
  const cell = (v: string | number | undefined) =>
    v === undefined ? '' : typeof v === 'string' && /[",\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : String(v);
  const rows = items.map((i) =>
    [
      cell(i.audio),
      i.score === undefined ? '' : round(i.score.der, 4),
      i.score === undefined ? '' : round(i.score.missedS, 3),
      i.score === undefined ? '' : round(i.score.falseAlarmS, 3),
      i.score === undefined ? '' : round(i.score.confusionS, 3),
      i.score === undefined ? '' : round(i.score.scoredSpeechS, 3),
      cell(i.referenceSpeakers),
      cell(i.hypothesisSpeakers),
      round(i.latencyMs, 2),
      cell(i.errorCode),
    ].join(','),
  );
  return (
    [
      'audio,der,missed_s,false_alarm_s,confusion_s,scored_speech_s,reference_speakers,hypothesis_speakers,latency_ms,error_code',
      ...rows,
    ].join('\n') + '\n'
  );
}

export function diarizeSummaryMarkdown(p: { label: string; mode: 'accuracy' | 'load'; command: string; lines: readonly string[] }): string {
  return [
    `# voxmux bench diarize: ${p.label}`,
    '',
    `Mode: ${p.mode}`,
    '',
    '```',
    p.command,
    '```',
    '',
    ...p.lines.map((l) => `- ${l.trim()}`),
    '',
  ].join('\n');
}
