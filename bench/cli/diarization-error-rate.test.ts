import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { diarizationErrorRate, maxWeightAssignment, parseRttm, type Turn } from './diarization-error-rate.js';

const t = (speaker: string, start: number, end: number): Turn => ({ speaker, start, end });
const near = (actual: number, expected: number) => assert.ok(Math.abs(actual - expected) < 1e-9, `${actual} != ${expected}`);

describe('diarizationErrorRate (#17)', () => {
  it('is 0 for a hypothesis equal to the reference under other speaker names, and maps them', () => {
    const r = diarizationErrorRate([t('A', 0, 5), t('B', 5, 9)], [t('s1', 5, 9), t('s0', 0, 5)], { collarS: 0 });
    assert.equal(r.der, 0);
    near(r.scoredSpeechS, 9);
    assert.deepEqual(r.mapping, { s1: 'B', s0: 'A' });
  });

  it('counts speech no hypothesis speaker covers as missed', () => {
    const r = diarizationErrorRate([t('A', 0, 10), t('B', 10, 20)], [t('x', 0, 10)], { collarS: 0 });
    near(r.missedS, 10);
    near(r.der, 0.5);
  });

  it('counts hypothesis speech outside the reference as false alarm', () => {
    const r = diarizationErrorRate([t('A', 0, 10)], [t('x', 0, 10), t('y', 10, 15)], { collarS: 0 });
    near(r.falseAlarmS, 5);
    near(r.missedS, 0);
    near(r.der, 0.5);
  });

  it('counts speech given to the wrong speaker as confusion', () => {
    const r = diarizationErrorRate([t('A', 0, 10), t('B', 10, 20)], [t('x', 0, 20)], { collarS: 0 });
    near(r.confusionS, 10);
    near(r.der, 0.5);
  });

  it('scores overlapped speech: two reference speakers against one hypothesis speaker is a miss', () => {
    const r = diarizationErrorRate([t('A', 0, 10), t('B', 5, 10)], [t('x', 0, 10)], { collarS: 0 });
    near(r.scoredSpeechS, 15);
    near(r.missedS, 5);
    near(r.confusionS, 0);
    near(r.der, 5 / 15);
  });

  it('ignores differences inside the collar around reference boundaries, and does not score the collar', () => {
    const r = diarizationErrorRate([t('A', 0, 10)], [t('x', 0.2, 9.8)], { collarS: 0.25 });
    assert.equal(r.der, 0);
    near(r.scoredSpeechS, 9.5);
    const without = diarizationErrorRate([t('A', 0, 10)], [t('x', 0.2, 9.8)], { collarS: 0 });
    near(without.missedS, 0.4);
  });

  it('uses the mapping that maximizes agreement, not the greedy one', () => {
    // x overlaps A 5 s and B 4 s; y overlaps A 4 s. Greedy x→A leaves y unmatched (8 s wrong);
    // the optimum x→B, y→A leaves 5 s of A said by x.
    const r = diarizationErrorRate([t('A', 0, 9), t('B', 9, 13)], [t('y', 0, 4), t('x', 4, 13)], { collarS: 0 });
    assert.deepEqual(r.mapping, { y: 'A', x: 'B' });
    near(r.confusionS, 5);
    near(r.der, 5 / 13);
  });

  it('is 0 with nothing to score, and counts a hypothesis speaker beyond the reference ones as confusion or false alarm', () => {
    assert.equal(diarizationErrorRate([], []).der, 0);
    const r = diarizationErrorRate([t('A', 0, 10)], [t('x', 0, 6), t('y', 6, 10)], { collarS: 0 });
    near(r.confusionS, 4);
    near(r.der, 0.4);
  });
});

describe('maxWeightAssignment', () => {
  it('solves square and rectangular cases', () => {
    assert.deepEqual(
      maxWeightAssignment([
        [5, 4],
        [4, 0],
      ]),
      [1, 0],
    );
    assert.deepEqual(maxWeightAssignment([[1, 9, 2]]), [1]);
    assert.deepEqual(maxWeightAssignment([[3], [7], [1]]), [-1, 0, -1]);
    assert.deepEqual(maxWeightAssignment([]), []);
  });
});

describe('parseRttm', () => {
  it('reads SPEAKER lines and skips others', () => {
    const text =
      'SPKR-INFO f 1 <NA> <NA> <NA> unknown A <NA>\nSPEAKER f 1 1.50 2.25 <NA> <NA> A <NA> <NA>\n\nSPEAKER f 1 4 1 <NA> <NA> B <NA> <NA>\n';
    assert.deepEqual(parseRttm(text), [t('A', 1.5, 3.75), t('B', 4, 5)]);
    assert.throws(() => parseRttm('SPEAKER f 1 x 1 <NA> <NA> A'), /RTTM line 1/);
  });
});

describe('diarizationErrorRate edge cases against pyannote.metrics', () => {
  it('scores false alarm against an empty reference as an error (pyannote: DER 1 when total is 0 and errors are not)', () => {
    // pyannote/metrics/identification.py IdentificationErrorRate.compute_metric: denominator 0 and
    // numerator > 0 -> 1.0. A silent recording diarized as 5 s of speech is not a perfect score.
    const r = diarizationErrorRate([], [t('x', 0, 5)], { collarS: 0 });
    near(r.falseAlarmS, 5);
    assert.equal(r.der, 1);
  });
});
