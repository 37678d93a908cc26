/**
 * Speech regions from voice-activity frames, with Silero VAD's own post-processing
 * (`get_speech_timestamps` in silero-vad: hysteresis between the threshold and 0.15 below it,
 * pauses shorter than `minSilenceMs` kept inside speech, regions shorter than `minSpeechMs`
 * dropped, `padMs` added on each side without overlapping a neighbour). Raw frames over a
 * threshold break a speaker's turn at every dip; a diarizer then sees crumbs.
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
}

export const SILERO_REGION_DEFAULTS = { minSpeechMs: 250, minSilenceMs: 100, padMs: 30, hysteresis: 0.15 } as const;

const roundS = (s: number) => Math.round(s * 1000) / 1000;

/** Speech regions, `[startS, endS]` from the start of the audio, in order and apart. */
export function toSpeechRegions(activity: VoiceActivity, options: SpeechRegionOptions): [number, number][] {
  const frameS = activity.frameSamples / options.sampleRateHz;
  const negative = options.negativeThreshold ?? Math.max(0, options.threshold - SILERO_REGION_DEFAULTS.hysteresis);
  const minSpeechS = (options.minSpeechMs ?? SILERO_REGION_DEFAULTS.minSpeechMs) / 1000;
  const minSilenceS = (options.minSilenceMs ?? SILERO_REGION_DEFAULTS.minSilenceMs) / 1000;
  const padS = (options.padMs ?? SILERO_REGION_DEFAULTS.padMs) / 1000;
  const count = activity.values.length;
  const durationS = count * frameS;
  const raw: [number, number][] = [];
  let start: number | undefined;
  let silenceFrom: number | undefined;
  for (let k = 0; k < count; k++) {
    const p = activity.values[k]!;
    if (start === undefined) {
      if (p >= options.threshold) start = k * frameS;
      continue;
    }
    if (p >= options.threshold) {
      silenceFrom = undefined;
    } else if (p < negative) {
      silenceFrom ??= k * frameS;
      if ((k + 1) * frameS - silenceFrom >= minSilenceS) {
        raw.push([start, silenceFrom]);
        start = undefined;
        silenceFrom = undefined;
      }
    }
  }
  if (start !== undefined) raw.push([start, silenceFrom ?? durationS]);
  const kept = raw.filter(([s, e]) => e - s >= minSpeechS);
  // Pads each side; between two regions closer than two pads, each gets half the gap.
  return kept.map(([s, e], i) => {
    const before = i === 0 ? s : (s - kept[i - 1]![1]) / 2;
    const after = i === kept.length - 1 ? durationS - e : (kept[i + 1]![0] - e) / 2;
    return [roundS(Math.max(0, s - Math.min(padS, before))), roundS(Math.min(durationS, e + Math.min(padS, after)))];
  });
}
