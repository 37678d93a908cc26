/**
 * Speech regions from voice-activity frames, with Silero VAD's own post-processing
 * (`get_speech_timestamps` in silero-vad: hysteresis between the threshold and 0.15 below it,
 * speech ending only once the audio has stayed below the lower threshold for `minSilenceMs`
 * (counted from the first silent frame's start to the current frame's start), regions no longer
 * than `minSpeechMs` dropped, speech still open at the end running to the end of the audio, and
 * `padMs` added on each side without overlapping a neighbour). Raw frames over a threshold break a
 * speaker's turn at every dip; a diarizer then sees crumbs.
 */
import type { VoiceActivity } from '../pieces/split-policy.js';

export interface SpeechRegionOptions {
  sampleRateHz: number;
  /** Activity at or above this starts speech (Silero's default 0.5). */
  threshold: number;
  /** Speech ends below this (Silero: threshold - 0.15). */
  negativeThreshold?: number;
  minSpeechMs?: number;
  minSilenceMs?: number;
  padMs?: number;
  /** The audio's length in samples, where speech open at the end stops. @default frames × frameSamples */
  totalSamples?: number;
}

export const SILERO_REGION_DEFAULTS = { minSpeechMs: 250, minSilenceMs: 100, padMs: 30, hysteresis: 0.15 } as const;

const roundS = (s: number) => Math.round(s * 1000) / 1000;

/** Speech regions, `[startS, endS]` from the start of the audio, in order and apart. */
export function toSpeechRegions(activity: VoiceActivity, options: SpeechRegionOptions): [number, number][] {
  // NOTE: counted in samples, as Silero counts them, so that a region or a pause of exactly the
  // minimum length falls on the same side of it.
  const frame = activity.frameSamples;
  const perMs = options.sampleRateHz / 1000;
  const negative = options.negativeThreshold ?? Math.max(0, options.threshold - SILERO_REGION_DEFAULTS.hysteresis);
  const minSpeech = (options.minSpeechMs ?? SILERO_REGION_DEFAULTS.minSpeechMs) * perMs;
  const minSilence = (options.minSilenceMs ?? SILERO_REGION_DEFAULTS.minSilenceMs) * perMs;
  const pad = (options.padMs ?? SILERO_REGION_DEFAULTS.padMs) * perMs;
  const count = activity.values.length;
  const total = options.totalSamples ?? count * frame;
  const raw: [number, number][] = [];
  let start: number | undefined;
  let silenceFrom: number | undefined;
  for (let k = 0; k < count; k++) {
    const p = activity.values[k]!;
    if (start === undefined) {
      if (p >= options.threshold) start = k * frame;
      continue;
    }
    if (p >= options.threshold) {
      silenceFrom = undefined;
    } else if (p < negative) {
      silenceFrom ??= k * frame;
      if (k * frame - silenceFrom >= minSilence) {
        raw.push([start, silenceFrom]);
        start = undefined;
        silenceFrom = undefined;
      }
    }
  }
  if (start !== undefined) raw.push([start, total]);
  const kept = raw.filter(([s, e]) => e - s > minSpeech);
  // Pads each side; between two regions closer than two pads, each gets half the gap.
  return kept.map(([s, e], i) => {
    const before = i === 0 ? s : (s - kept[i - 1]![1]) / 2;
    const after = i === kept.length - 1 ? total - e : (kept[i + 1]![0] - e) / 2;
    const toS = (sample: number) => roundS(sample / options.sampleRateHz);
    return [toS(Math.max(0, s - Math.min(pad, before))), toS(Math.min(total, e + Math.min(pad, after)))];
  });
}
