import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createPlaybackTracker } from './playback.js';

// 1,000 bytes a second: a byte is a millisecond of audio, so the scripts read in milliseconds.
const BYTES_PER_SECOND = 1000;

function play(startMs: number, arrivals: ReadonlyArray<readonly [atMs: number, bytes: number]>) {
  const tracker = createPlaybackTracker({ startMs, bytesPerSecond: BYTES_PER_SECOND });
  for (const [atMs, bytes] of arrivals) tracker.add(atMs, bytes);
  return tracker.summary();
}

describe('createPlaybackTracker', () => {
  it('counts no stall when every chunk arrives before the audio already received has played', () => {
    // 100 ms of audio at 50, then at 150 (exactly when it runs out: not late), then well ahead.
    assert.deepEqual(
      play(0, [
        [50, 100],
        [150, 100],
        [160, 300],
      ]),
      { firstByteMs: 50, audioSeconds: 0.5, stalls: 0, stalledMs: 0 },
    );
  });

  it('counts a stall and its length when audio arrives after the player ran dry, and restarts the clock there', () => {
    // Plays 50..150; next at 190: 40 ms stalled, plays 190..290; next at 280 in time; then 490 - 390 = 100 ms stalled.
    assert.deepEqual(
      play(10, [
        [50, 100],
        [190, 100],
        [280, 100],
        [490, 10],
      ]),
      { firstByteMs: 40, audioSeconds: 0.31, stalls: 2, stalledMs: 140 },
    );
  });

  it('counts playback from the first byte: a slow first byte is latency, not a stall', () => {
    assert.deepEqual(play(0, [[2000, 100]]), { firstByteMs: 2000, audioSeconds: 0.1, stalls: 0, stalledMs: 0 });
  });

  it('ignores empty chunks and reports no first byte without audio', () => {
    assert.deepEqual(play(0, [[30, 0]]), { audioSeconds: 0, stalls: 0, stalledMs: 0 });
    assert.deepEqual(
      play(0, [
        [30, 10],
        [500, 0],
        [500, 10],
      ]),
      { firstByteMs: 30, audioSeconds: 0.02, stalls: 1, stalledMs: 460 },
    );
  });

  it('times 24 kHz 16-bit PCM exactly: 48,000 bytes are one second', () => {
    const tracker = createPlaybackTracker({ startMs: 0, bytesPerSecond: 48_000 });
    tracker.add(100, 48_000);
    tracker.add(1100, 24_000);
    tracker.add(1601, 2);
    assert.deepEqual(tracker.summary(), { firstByteMs: 100, audioSeconds: 1.5000416666666667, stalls: 1, stalledMs: 1 });
  });
});
