/**
 * Which voice each speech call asks for: uniform over N voices, or Zipf (the voice of rank k is
 * asked for in proportion to 1 / k^s, so a few voices are common and most are rare, as characters
 * in a voice-call system are). Pure: the caller passes the uniform draw.
 */
import { usageError } from './bench-error.js';

export type VoiceMixKind = 'uniform' | 'zipf';

export interface VoiceMixOptions {
  /** In rank order: under Zipf the first is the most asked for. */
  voices: readonly string[];
  kind: VoiceMixKind;
  /** Zipf exponent s; ignored for uniform. */
  zipfS: number;
}

export interface VoiceMix {
  readonly kind: VoiceMixKind;
  /** The Zipf exponent; undefined for uniform. */
  readonly zipfS?: number;
  readonly voices: readonly string[];
  /** The probability of each voice, in the order of `voices`. */
  readonly probabilities: readonly number[];
  /** The voice for a uniform draw `u` in [0, 1). */
  pick(u: number): string;
}

export function createVoiceMix(options: VoiceMixOptions): VoiceMix {
  const { voices } = options;
  if (voices.length === 0) throw usageError('Expected at least one voice');
  const weights = voices.map((_, index) => (options.kind === 'zipf' ? 1 / (index + 1) ** options.zipfS : 1));
  const total = weights.reduce((sum, w) => sum + w, 0);
  const probabilities = weights.map((w) => w / total);
  const cumulative: number[] = [];
  let running = 0;
  for (const p of probabilities) {
    running += p;
    cumulative.push(running);
  }
  return {
    kind: options.kind,
    ...(options.kind === 'zipf' ? { zipfS: options.zipfS } : {}),
    voices,
    probabilities,
    pick(u) {
      // The first voice whose cumulative probability exceeds u (binary search); float error at
      // the top end falls to the last voice.
      let lo = 0;
      let hi = cumulative.length - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (u < cumulative[mid]!) hi = mid;
        else lo = mid + 1;
      }
      return voices[lo]!;
    },
  };
}

/** `--voices a,b,c`, or `--voice-prefix P --voice-count N` (P0 .. P(N-1)); `alloy` when neither is given. */
export function toVoiceList(options: { voices?: string; voicePrefix?: string; voiceCount?: number }): string[] {
  if (options.voices !== undefined && (options.voicePrefix !== undefined || options.voiceCount !== undefined)) {
    throw usageError('Expected either --voices or --voice-prefix with --voice-count: got both');
  }
  if (options.voices !== undefined) {
    const list = options.voices
      .split(',')
      .map((voice) => voice.trim())
      .filter((voice) => voice.length > 0);
    if (list.length === 0) throw usageError(`Expected --voices to list at least one voice: got '${options.voices}'`);
    if (new Set(list).size !== list.length) throw usageError('Expected --voices to list distinct voices');
    return list;
  }
  if (options.voicePrefix !== undefined || options.voiceCount !== undefined) {
    if (options.voicePrefix === undefined || options.voiceCount === undefined) {
      throw usageError('Expected --voice-prefix and --voice-count together');
    }
    return Array.from({ length: options.voiceCount }, (_, index) => `${options.voicePrefix}${index}`);
  }
  return ['alloy'];
}
