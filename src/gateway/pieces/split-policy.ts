/**
 * Where a long recording is cut into pieces (pure). Input: one voice-activity value per frame
 * (a speech probability from 0 to 1, or a normalized energy) and the recording's length; output:
 * the sample indices of the cuts.
 *
 * Audio no longer than `splitAboveMs` is not cut. Otherwise each piece aims at `pieceTargetMs`
 * and never exceeds `maxPieceMs` (the largest length bucket). A cut is searched between half the
 * target and the longest piece allowed; within that window it goes, in order of preference:
 * 1. in the middle of a pause (frames under `speechThreshold`) of at least `minPauseMs`, the one
 *    nearest the target;
 * 2. in the middle of the longest shorter pause;
 * 3. with no pause at all (continuous speech), at the quietest frame, nearest the target.
 * So a cut never falls inside a word when a pause exists in the window.
 */
import { invariant } from '../../core/invariant.js';

export interface SplitPolicy {
  sampleRateHz: number;
  /** Audio at most this long stays whole, in milliseconds. */
  splitAboveMs: number;
  /** Length a piece aims at, in milliseconds. */
  pieceTargetMs: number;
  /** Longest piece, in milliseconds (the largest length bucket). */
  maxPieceMs: number;
  /** A pause at least this long is a preferred cut, in milliseconds. */
  minPauseMs: number;
  /** Frames whose activity is below this are pause. */
  speechThreshold: number;
}

export const DEFAULT_MIN_PAUSE_MS = 200;
export const DEFAULT_SPEECH_THRESHOLD = 0.35;

export interface VoiceActivity {
  /** Samples per activity frame. */
  frameSamples: number;
  /** One value per frame from 0 (silence) to 1 (speech); frame k covers samples [k, k + 1) × frameSamples. */
  values: ArrayLike<number>;
}

export type CutKind = 'pause' | 'short_pause' | 'no_pause';

export interface Cut {
  sample: number;
  kind: CutKind;
}

/** The cuts of a recording of `totalSamples`, ascending, each strictly inside it. */
export function planCuts(activity: VoiceActivity, totalSamples: number, policy: SplitPolicy): Cut[] {
  const perMs = policy.sampleRateHz / 1000;
  if (totalSamples <= policy.splitAboveMs * perMs) return [];
  const maxSamples = Math.floor(policy.maxPieceMs * perMs);
  const targetSamples = Math.min(maxSamples, Math.floor(policy.pieceTargetMs * perMs));
  // Each cut is at least half a target past the last: a target under 2 samples (a maxPieceMs of
  // -Infinity, from an empty scheduler.lengthBucketsMs, once was) would never end.
  invariant(targetSamples >= 2, `Expected a piece target of at least 2 samples: got ${targetSamples}`);
  const cuts: Cut[] = [];
  let start = 0;
  // The last piece is at least half a target: a remainder up to 1.5 targets (or up to the longest
  // piece, when that is shorter) stays one piece.
  while (totalSamples - start > Math.min(maxSamples, targetSamples * 1.5)) {
    const lo = start + Math.floor(targetSamples / 2);
    const hi = Math.min(start + maxSamples, totalSamples - Math.floor(targetSamples / 2));
    const cut = chooseCut(activity, { lo, hi, aim: start + targetSamples, minPauseSamples: policy.minPauseMs * perMs, policy });
    cuts.push(cut);
    start = cut.sample;
  }
  return cuts;
}

/** The pieces between cuts, as [startSample, endSample) ranges. */
export function toPieceRanges(cuts: readonly Cut[], totalSamples: number): { startSample: number; endSample: number }[] {
  const bounds = [0, ...cuts.map((c) => c.sample), totalSamples];
  return bounds.slice(1).map((endSample, i) => ({ startSample: bounds[i]!, endSample }));
}

interface Window {
  lo: number;
  hi: number;
  aim: number;
  minPauseSamples: number;
  policy: SplitPolicy;
}

function chooseCut(activity: VoiceActivity, window: Window): Cut {
  const f = activity.frameSamples;
  const { lo, hi, aim } = window;
  const firstFrame = Math.ceil(lo / f);
  const lastFrame = Math.min(Math.floor(hi / f) - 1, activity.values.length - 1);
  const clampToWindow = (sample: number) => Math.max(lo, Math.min(hi, Math.round(sample)));
  if (lastFrame < firstFrame) return { sample: clampToWindow(aim), kind: 'no_pause' };
  const minPauseFrames = Math.max(1, Math.ceil(window.minPauseSamples / f));
  let best: { sample: number; frames: number; distance: number } | undefined;
  let bestLong: { sample: number; distance: number } | undefined;
  let runStart = -1;
  for (let k = firstFrame; k <= lastFrame + 1; k++) {
    const isPause = k <= lastFrame && activity.values[k]! < window.policy.speechThreshold;
    if (isPause && runStart === -1) runStart = k;
    if (isPause || runStart === -1) continue;
    const frames = k - runStart;
    const sample = ((runStart + k) * f) / 2;
    const distance = Math.abs(sample - aim);
    if (frames >= minPauseFrames && (bestLong === undefined || distance < bestLong.distance)) bestLong = { sample, distance };
    if (best === undefined || frames > best.frames || (frames === best.frames && distance < best.distance)) {
      best = { sample, frames, distance };
    }
    runStart = -1;
  }
  if (bestLong !== undefined) return { sample: clampToWindow(bestLong.sample), kind: 'pause' };
  if (best !== undefined) return { sample: clampToWindow(best.sample), kind: 'short_pause' };
  let quietest = firstFrame;
  for (let k = firstFrame; k <= lastFrame; k++) {
    const value = activity.values[k]!;
    const current = activity.values[quietest]!;
    const isCloser = Math.abs((k + 0.5) * f - aim) < Math.abs((quietest + 0.5) * f - aim);
    if (value < current || (value === current && isCloser)) quietest = k;
  }
  return { sample: clampToWindow((quietest + 0.5) * f), kind: 'no_pause' };
}
