/**
 * The playback clock of one streamed audio answer: what a listener would hear if a player started
 * playing at the first audio byte and played every byte as soon as it had it. A **stall** is an
 * arrival later than the audio already received would take to play: the player ran dry and waited
 * (stalled time) before the next audio could play. Pure: arrival times come from the caller's clock.
 */
import { invariant } from '../../src/core/invariant.js';

export interface PlaybackSummary {
  /** Request start to the first audio byte. Undefined when no audio arrived. */
  firstByteMs?: number;
  /** Audio received, in seconds of playback. */
  audioSeconds: number;
  /** Times the player ran dry before more audio arrived. */
  stalls: number;
  /** Time spent waiting with nothing to play, summed over the stalls. */
  stalledMs: number;
}

export interface PlaybackTracker {
  /** Records `bytes` of audio that arrived at `atMs` (same clock as the start). */
  add(atMs: number, bytes: number): void;
  summary(): PlaybackSummary;
}

export interface PlaybackOptions {
  /** When the request was sent. */
  startMs: number;
  /** Bytes of audio per second of playback: 48 000 for 24 kHz 16-bit mono. */
  bytesPerSecond: number;
}

export function createPlaybackTracker(options: PlaybackOptions): PlaybackTracker {
  invariant(options.bytesPerSecond > 0, 'bytesPerSecond must be positive');
  const msPerByte = 1000 / options.bytesPerSecond;
  let firstByteAtMs: number | undefined;
  // When the audio received so far has finished playing; the clock pauses during a stall, as a
  // player waiting for data does.
  let playedUntilMs = 0;
  let bytes = 0;
  let stalls = 0;
  let stalledMs = 0;
  return {
    add(atMs, chunkBytes) {
      if (chunkBytes <= 0) return;
      if (firstByteAtMs === undefined) {
        firstByteAtMs = atMs;
        playedUntilMs = atMs;
      } else if (atMs > playedUntilMs) {
        stalls += 1;
        stalledMs += atMs - playedUntilMs;
        playedUntilMs = atMs;
      }
      playedUntilMs += chunkBytes * msPerByte;
      bytes += chunkBytes;
    },
    summary() {
      return {
        ...(firstByteAtMs === undefined ? {} : { firstByteMs: firstByteAtMs - options.startMs }),
        audioSeconds: bytes / options.bytesPerSecond,
        stalls,
        stalledMs,
      };
    },
  };
}
