/**
 * Diarization error rate (pure), as NIST's md-eval scores it: a no-score collar around every
 * reference turn boundary, overlapped speech scored, and the one-to-one speaker mapping that
 * maximizes the time reference and hypothesis agree (Hungarian algorithm).
 *
 * Over the scored time, with R the reference speakers and H the hypothesis speakers active at an
 * instant and C the mapped pairs both active:
 *   missed      = max(0, |R| - |H|)
 *   falseAlarm  = max(0, |H| - |R|)
 *   confusion   = min(|R|, |H|) - |C|
 *   DER         = (missed + falseAlarm + confusion) / Σ|R|
 * integrated exactly between the boundaries of all turns and collars (no frame rounding). With no
 * reference speech scored (Σ|R| = 0) the DER is 0 if there is no error and 1 if there is (false
 * alarm), as pyannote.metrics scores it.
 */

export interface Turn {
  start: number;
  end: number;
  speaker: string;
}

export interface DerResult {
  /** Reference speech time scored (Σ|R|, overlap counted per speaker), in seconds. */
  scoredSpeechS: number;
  missedS: number;
  falseAlarmS: number;
  confusionS: number;
  /** (missed + falseAlarm + confusion) / scoredSpeech; with no scored speech, 0 without errors and 1 with any (toDer). */
  der: number;
  /** Hypothesis speaker → reference speaker, as mapped. */
  mapping: Record<string, string>;
}

/**
 * The error rate of `errorS` seconds of errors over `scoredSpeechS` seconds of reference speech. With no
 * reference speech, any error scores 1, not 0: a silent recording diarized as speech is not a perfect
 * score (pyannote.metrics' IdentificationErrorRate.compute_metric does the same).
 */
export function toDer(errorS: number, scoredSpeechS: number): number {
  if (scoredSpeechS > 0) return errorS / scoredSpeechS;
  return errorS > 0 ? 1 : 0;
}

/** Seconds of no-score time on each side of every reference boundary (md-eval's -c 0.25). */
export const DEFAULT_COLLAR_S = 0.25;

/** Parses RTTM SPEAKER lines (onset and duration in fields 4 and 5, the speaker in field 8); with `file`, only that file's (field 2). */
export function parseRttm(text: string, file?: string): Turn[] {
  const turns: Turn[] = [];
  text.split('\n').forEach((line, i) => {
    const fields = line.trim().split(/\s+/);
    if (fields[0] !== 'SPEAKER' || (file !== undefined && fields[1] !== file)) return;
    const onset = Number(fields[3]);
    const duration = Number(fields[4]);
    const speaker = fields[7];
    if (!Number.isFinite(onset) || !Number.isFinite(duration) || duration < 0 || speaker === undefined) {
      throw new Error(`RTTM line ${i + 1}: expected SPEAKER <file> <chan> <onset> <duration> <NA> <NA> <speaker>: got '${line.trim()}'`);
    }
    turns.push({ start: onset, end: onset + duration, speaker });
  });
  return turns;
}

/** The file ids (field 2) an RTTM's SPEAKER lines name. */
export function rttmFileIds(text: string): Set<string> {
  const ids = new Set<string>();
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if (fields[0] === 'SPEAKER' && fields[1] !== undefined) ids.add(fields[1]);
  }
  return ids;
}

/** The assignment maximizing the summed weight (rows to distinct columns), by the Hungarian algorithm. */
export function maxWeightAssignment(weights: readonly (readonly number[])[]): number[] {
  const rows = weights.length;
  const cols = rows === 0 ? 0 : Math.max(...weights.map((r) => r.length));
  const n = Math.max(rows, cols);
  if (n === 0) return [];
  let max = 0;
  for (const row of weights) for (const w of row) max = Math.max(max, w);
  // Minimize (max - weight) on a square matrix; padding cells cost max (weight 0).
  const cost = (i: number, j: number) => max - (weights[i - 1]?.[j - 1] ?? 0);
  const u = new Float64Array(n + 1);
  const v = new Float64Array(n + 1);
  const p = new Int32Array(n + 1);
  const way = new Int32Array(n + 1);
  for (let i = 1; i <= n; i++) {
    p[0] = i;
    let j0 = 0;
    const minv = new Float64Array(n + 1).fill(Infinity);
    const used = new Uint8Array(n + 1);
    do {
      used[j0] = 1;
      const i0 = p[j0]!;
      let delta = Infinity;
      let j1 = 0;
      for (let j = 1; j <= n; j++) {
        if (used[j] === 1) continue;
        const cur = cost(i0, j) - u[i0]! - v[j]!;
        if (cur < minv[j]!) {
          minv[j] = cur;
          way[j] = j0;
        }
        if (minv[j]! < delta) {
          delta = minv[j]!;
          j1 = j;
        }
      }
      for (let j = 0; j <= n; j++) {
        if (used[j] === 1) {
          u[p[j]!] = u[p[j]!]! + delta;
          v[j] = v[j]! - delta;
        } else {
          minv[j] = minv[j]! - delta;
        }
      }
      j0 = j1;
    } while (p[j0] !== 0);
    do {
      const j1 = way[j0]!;
      p[j0] = p[j1]!;
      j0 = j1;
    } while (j0 !== 0);
  }
  const assignment = new Array<number>(rows).fill(-1);
  for (let j = 1; j <= n; j++) {
    const i = p[j]!;
    if (i >= 1 && i <= rows && j <= cols) assignment[i - 1] = j - 1;
  }
  return assignment;
}

interface Interval {
  start: number;
  end: number;
}

/** Merges a speaker's turns, so that a doubled turn counts once. */
function mergeBySpeaker(turns: readonly Turn[]): Map<string, Interval[]> {
  const bySpeaker = new Map<string, Interval[]>();
  for (const t of turns) {
    if (t.end <= t.start) continue;
    const list = bySpeaker.get(t.speaker) ?? [];
    list.push({ start: t.start, end: t.end });
    bySpeaker.set(t.speaker, list);
  }
  for (const [speaker, list] of bySpeaker) {
    list.sort((a, b) => a.start - b.start);
    const merged: Interval[] = [];
    for (const iv of list) {
      const last = merged.at(-1);
      if (last !== undefined && iv.start <= last.end) last.end = Math.max(last.end, iv.end);
      else merged.push({ ...iv });
    }
    bySpeaker.set(speaker, merged);
  }
  return bySpeaker;
}

function isInside(list: readonly Interval[], t: number): boolean {
  return list.some((iv) => iv.start <= t && t < iv.end);
}

/**
 * Scores a hypothesis against a reference.
 * @example diarizationErrorRate(parseRttm(ref), hyp, { collarS: 0.25 }).der
 */
export function diarizationErrorRate(
  reference: readonly Turn[],
  hypothesis: readonly Turn[],
  options: { collarS?: number } = {},
): DerResult {
  const collarS = options.collarS ?? DEFAULT_COLLAR_S;
  const ref = mergeBySpeaker(reference);
  const hyp = mergeBySpeaker(hypothesis);
  const refSpeakers = [...ref.keys()];
  const hypSpeakers = [...hyp.keys()];
  const collars: Interval[] =
    collarS > 0
      ? [...ref.values()].flatMap((list) =>
          list.flatMap((iv) => [
            { start: iv.start - collarS, end: iv.start + collarS },
            { start: iv.end - collarS, end: iv.end + collarS },
          ]),
        )
      : [];
  const edges = new Set<number>();
  for (const list of [...ref.values(), ...hyp.values(), collars]) {
    for (const iv of list) {
      edges.add(iv.start);
      edges.add(iv.end);
    }
  }
  const points = [...edges].sort((a, b) => a - b);
  // Elementary intervals: constant speaker sets inside each.
  const pieces: { lengthS: number; r: number[]; h: number[] }[] = [];
  for (let k = 0; k + 1 < points.length; k++) {
    const start = points[k]!;
    const end = points[k + 1]!;
    if (end <= start) continue;
    const mid = (start + end) / 2;
    if (isInside(collars, mid)) continue;
    const r = refSpeakers.flatMap((s, i) => (isInside(ref.get(s)!, mid) ? [i] : []));
    const h = hypSpeakers.flatMap((s, i) => (isInside(hyp.get(s)!, mid) ? [i] : []));
    if (r.length > 0 || h.length > 0) pieces.push({ lengthS: end - start, r, h });
  }
  const overlap = hypSpeakers.map(() => refSpeakers.map(() => 0));
  for (const piece of pieces) for (const h of piece.h) for (const r of piece.r) overlap[h]![r]! += piece.lengthS;
  const assignment = maxWeightAssignment(overlap);
  const mapping: Record<string, string> = {};
  assignment.forEach((r, h) => {
    if (r >= 0 && overlap[h]![r]! > 0) mapping[hypSpeakers[h]!] = refSpeakers[r]!;
  });
  let scoredSpeechS = 0;
  let missedS = 0;
  let falseAlarmS = 0;
  let confusionS = 0;
  for (const { lengthS, r, h } of pieces) {
    const correct = h.filter((hi) => {
      const ri = assignment[hi]!;
      return ri >= 0 && r.includes(ri) && overlap[hi]![ri]! > 0;
    }).length;
    scoredSpeechS += lengthS * r.length;
    missedS += lengthS * Math.max(0, r.length - h.length);
    falseAlarmS += lengthS * Math.max(0, h.length - r.length);
    confusionS += lengthS * (Math.min(r.length, h.length) - correct);
  }
  const errorS = missedS + falseAlarmS + confusionS;
  return { scoredSpeechS, missedS, falseAlarmS, confusionS, der: toDer(errorS, scoredSpeechS), mapping };
}
