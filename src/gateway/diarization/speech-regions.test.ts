import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { toSpeechRegions } from './speech-regions.js';

/** 10 ms frames at 16 kHz. */
const FRAME = 160;
const frames = (...runs: [number, number][]) => runs.flatMap(([p, n]) => Array.from({ length: n }, () => p));

describe('speech regions from voice activity (Silero post-processing)', () => {
  it('keeps pauses under minSilenceMs inside speech, with hysteresis, and pads each side', () => {
    // 0.5 s silence, 1 s speech, a 50 ms dip, 0.5 s speech, a 0.3 s wobble at 0.4 (over 0.35: still speech), 0.5 s silence.
    const values = frames([0.1, 50], [0.9, 100], [0.1, 5], [0.8, 50], [0.4, 30], [0.05, 50]);
    assert.deepEqual(toSpeechRegions({ frameSamples: FRAME, values }, { sampleRateHz: 16_000, threshold: 0.5 }), [[0.47, 2.38]]);
  });

  it('ends speech after minSilenceMs below the negative threshold and drops regions under minSpeechMs', () => {
    // 1 s speech, 0.2 s silence, 0.2 s speech (too short), 0.3 s silence, 0.4 s speech to the end.
    const values = frames([0.9, 100], [0.0, 20], [0.9, 20], [0.0, 30], [0.9, 40]);
    assert.deepEqual(toSpeechRegions({ frameSamples: FRAME, values }, { sampleRateHz: 16_000, threshold: 0.5 }), [
      [0, 1.03],
      [1.67, 2.1],
    ]);
  });

  it('shares the gap between two regions closer than two pads', () => {
    const values = frames([0.9, 30], [0.0, 4], [0.9, 30]);
    assert.deepEqual(toSpeechRegions({ frameSamples: FRAME, values }, { sampleRateHz: 16_000, threshold: 0.5, minSilenceMs: 30 }), [
      [0, 0.32],
      [0.32, 0.64],
    ]);
  });
});

describe('speech regions: Silero get_speech_timestamps on its own 512-sample frames', () => {
  // silero-vad src/silero_vad/utils_vad.py get_speech_timestamps: speech ends only at a frame i below
  // neg_threshold with (512 * i) - temp_end >= min_silence_samples, temp_end being the first silent
  // frame's start; speech still open at the end runs to the end of the audio.
  const sileroFrame = 512;
  it('keeps a 4-frame (128 ms) pause inside speech: Silero ends speech only at a 5th silent frame', () => {
    const values = frames([0.9, 20], [0.0, 4], [0.9, 20]);
    assert.deepEqual(toSpeechRegions({ frameSamples: sileroFrame, values }, { sampleRateHz: 16_000, threshold: 0.5 }), [[0, 1.408]]);
  });

  it('runs speech still open at the end (a pause shorter than minSilenceMs) to the end of the audio', () => {
    const values = frames([0.9, 20], [0.0, 2]);
    assert.deepEqual(toSpeechRegions({ frameSamples: sileroFrame, values }, { sampleRateHz: 16_000, threshold: 0.5 }), [[0, 0.704]]);
  });
});
