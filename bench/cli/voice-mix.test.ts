import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isBenchError } from './bench-error.js';
import { createSeededRandom } from './load-driver.js';
import { createVoiceMix, toVoiceList } from './voice-mix.js';

const VOICES = Array.from({ length: 64 }, (_, i) => `vits-${i}`);

function counts(mix: ReturnType<typeof createVoiceMix>, draws: number, seed: number): Map<string, number> {
  const random = createSeededRandom(seed);
  const out = new Map<string, number>();
  for (let i = 0; i < draws; i += 1) {
    const voice = mix.pick(random());
    out.set(voice, (out.get(voice) ?? 0) + 1);
  }
  return out;
}

describe('createVoiceMix', () => {
  it('gives Zipf probabilities proportional to 1 / rank^s, summing to one', () => {
    const mix = createVoiceMix({ voices: ['a', 'b', 'c', 'd'], kind: 'zipf', zipfS: 1 });
    const harmonic = 1 + 1 / 2 + 1 / 3 + 1 / 4;
    const expected = [1, 1 / 2, 1 / 3, 1 / 4].map((w) => w / harmonic);
    mix.probabilities.forEach((p, i) => assert.ok(Math.abs(p - expected[i]!) < 1e-12));
    assert.equal(mix.kind, 'zipf');
    assert.equal(mix.zipfS, 1);
  });

  it('picks by the cumulative distribution, at its edges too', () => {
    const mix = createVoiceMix({ voices: ['a', 'b', 'c', 'd'], kind: 'uniform', zipfS: 1.1 });
    assert.deepEqual(
      [0, 0.2499, 0.25, 0.5, 0.74, 0.75, 0.999999].map((u) => mix.pick(u)),
      ['a', 'a', 'b', 'c', 'c', 'd', 'd'],
    );
    assert.equal(mix.zipfS, undefined);
  });

  it('draws a seeded Zipf(1.1) mix over 64 voices whose frequencies match the distribution', () => {
    const mix = createVoiceMix({ voices: VOICES, kind: 'zipf', zipfS: 1.1 });
    const draws = 200_000;
    const seen = counts(mix, draws, 7);
    // Every frequency within 4 standard deviations of its expectation (binomial).
    VOICES.forEach((voice, i) => {
      const p = mix.probabilities[i]!;
      const expected = draws * p;
      const sd = Math.sqrt(draws * p * (1 - p));
      assert.ok(Math.abs((seen.get(voice) ?? 0) - expected) < 4 * sd, `${voice}: ${seen.get(voice)} vs ${expected}`);
    });
    // The head is heavy: the top voice a quarter of calls, the top 8 nearly two thirds.
    assert.ok(Math.abs(mix.probabilities[0]! - 0.2505) < 0.001, String(mix.probabilities[0]));
    const top8 = mix.probabilities.slice(0, 8).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(top8 - 0.629) < 0.001, String(top8));
  });

  it('repeats the same voices for the same seed and others for another', () => {
    const mix = createVoiceMix({ voices: VOICES, kind: 'zipf', zipfS: 1.1 });
    const sequence = (seed: number): string[] => {
      const random = createSeededRandom(seed);
      return Array.from({ length: 50 }, () => mix.pick(random()));
    };
    assert.deepEqual(sequence(3), sequence(3));
    assert.notDeepEqual(sequence(3), sequence(4));
  });

  it('spreads a uniform mix evenly', () => {
    const mix = createVoiceMix({ voices: VOICES, kind: 'uniform', zipfS: 1.1 });
    const seen = counts(mix, 64_000, 1);
    for (const voice of VOICES) assert.ok(Math.abs((seen.get(voice) ?? 0) - 1000) < 4 * Math.sqrt(1000), voice);
  });
});

describe('toVoiceList', () => {
  it('reads a list, a prefix with a count, or defaults to alloy', () => {
    assert.deepEqual(toVoiceList({ voices: 'alloy, nova,,echo' }), ['alloy', 'nova', 'echo']);
    assert.deepEqual(toVoiceList({ voicePrefix: 'vits-', voiceCount: 3 }), ['vits-0', 'vits-1', 'vits-2']);
    assert.deepEqual(toVoiceList({}), ['alloy']);
  });

  it('rejects both forms at once, half of the prefix form, duplicates and empty lists', () => {
    for (const [options, pattern] of [
      [{ voices: 'a', voicePrefix: 'v-', voiceCount: 2 }, /either --voices or --voice-prefix/],
      [{ voicePrefix: 'v-' }, /together/],
      [{ voiceCount: 2 }, /together/],
      [{ voices: 'a,a' }, /distinct/],
      [{ voices: ' , ' }, /at least one voice/],
    ] as const) {
      assert.throws(
        () => toVoiceList(options),
        (err: unknown) => isBenchError(err) && err.code === 'usage' && pattern.test(err.message),
      );
    }
  });
});
