import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planCuts, toPieceRanges, type SplitPolicy, type VoiceActivity } from './split-policy.js';

const POLICY: SplitPolicy = {
  sampleRateHz: 1000,
  splitAboveMs: 30_000,
  pieceTargetMs: 10_000,
  maxPieceMs: 20_000,
  minPauseMs: 200,
  speechThreshold: 0.35,
};

/** 100-sample frames (0.1 s at 1 kHz): speech everywhere but the given pauses, in frames [from, to). */
function activity(totalFrames: number, pauses: [number, number][], speech = 0.9): VoiceActivity {
  const values = new Float32Array(totalFrames).fill(speech);
  for (const [from, to] of pauses) values.fill(0.05, from, to);
  return { frameSamples: 100, values };
}

describe('planCuts', () => {
  it('leaves audio no longer than splitAboveMs whole', () => {
    assert.deepEqual(planCuts(activity(300, []), 30_000, POLICY), []);
  });

  it('cuts in the middle of the pause nearest the target', () => {
    // 40 s; pauses at 6.0-6.5 s, 9.0-9.4 s and 13-14 s: the first cut goes in 9.0-9.4 (nearest 10 s).
    const cuts = planCuts(
      activity(400, [
        [60, 65],
        [90, 94],
        [130, 140],
        [190, 195],
        [280, 285],
      ]),
      40_000,
      POLICY,
    );
    assert.deepEqual(cuts[0], { sample: 9200, kind: 'pause' });
    assert.deepEqual(cuts[1], { sample: 19_250, kind: 'pause' });
    assert.deepEqual(cuts[2], { sample: 28_250, kind: 'pause' });
    assert.equal(cuts.length, 3);
  });

  it('prefers a short pause over continuous speech, and the quietest frame when there is none', () => {
    const short = planCuts(activity(400, [[150, 151]]), 40_000, POLICY);
    assert.deepEqual(short[0], { sample: 15_050, kind: 'short_pause' });
    const values = new Float32Array(400).fill(0.9);
    values[123] = 0.5;
    const none = planCuts({ frameSamples: 100, values }, 40_000, POLICY);
    assert.deepEqual(none[0], { sample: 12_350, kind: 'no_pause' });
  });

  it('never makes a piece longer than maxPieceMs nor shorter than half the target, and cuts strictly inside', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const frames = 500 + seed * 137;
      const pauses: [number, number][] = [];
      for (let f = 30 * seed; f < frames; f += 70 + seed * 11) pauses.push([f, f + 3]);
      const cuts = planCuts(activity(frames, pauses), frames * 100, POLICY);
      const ranges = toPieceRanges(cuts, frames * 100);
      for (const r of ranges) {
        assert.ok(r.endSample - r.startSample <= 20_000, `piece ${r.startSample}-${r.endSample}`);
        assert.ok(r.endSample - r.startSample >= 5_000, `piece ${r.startSample}-${r.endSample}`);
      }
      assert.equal(ranges.at(-1)!.endSample, frames * 100);
    }
  });

  it('caps the target at maxPieceMs', () => {
    const cuts = planCuts(activity(1000, []), 100_000, { ...POLICY, pieceTargetMs: 50_000 });
    for (const r of toPieceRanges(cuts, 100_000)) assert.ok(r.endSample - r.startSample <= 20_000);
  });
});
