import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { alignWords, countWordErrors, normalizeWords, wordErrorRate } from './word-error-rate.js';

describe('normalizeWords', () => {
  it('lower-cases, drops punctuation and keeps apostrophes inside words', () => {
    assert.deepEqual(normalizeWords("And so, my fellow Americans: ask NOT what your country can do—for 'you'!"), [
      'and',
      'so',
      'my',
      'fellow',
      'americans',
      'ask',
      'not',
      'what',
      'your',
      'country',
      'can',
      'do',
      'for',
      'you',
    ]);
    assert.deepEqual(normalizeWords('What\u2019s the weather like?'), ["what's", 'the', 'weather', 'like']);
  });

  it('keeps letters of every script and numbers as written', () => {
    assert.deepEqual(normalizeWords('Ｃafé  Größe 20 ÉTÉ'), ['café', 'größe', '20', 'été']);
    assert.deepEqual(normalizeWords(' ... '), []);
  });
});

describe('alignWords', () => {
  it('counts nothing for equal sequences', () => {
    assert.deepEqual(alignWords(['a', 'b'], ['a', 'b']), {
      referenceWords: 2,
      hypothesisWords: 2,
      substitutions: 0,
      deletions: 0,
      insertions: 0,
    });
  });

  it('separates substitutions, deletions and insertions', () => {
    // the cat sat on the mat -> the bat sat the mat down: cat->bat (S), on (D), down (I)
    const errors = alignWords('the cat sat on the mat'.split(' '), 'the bat sat the mat down'.split(' '));
    assert.deepEqual(errors, { referenceWords: 6, hypothesisWords: 6, substitutions: 1, deletions: 1, insertions: 1 });
    assert.equal(wordErrorRate(errors), 3 / 6);
  });

  it('handles empty sides', () => {
    assert.deepEqual(alignWords([], ['x', 'y']), { referenceWords: 0, hypothesisWords: 2, substitutions: 0, deletions: 0, insertions: 2 });
    assert.deepEqual(alignWords(['x', 'y', 'z'], []), {
      referenceWords: 3,
      hypothesisWords: 0,
      substitutions: 0,
      deletions: 3,
      insertions: 0,
    });
    assert.equal(wordErrorRate(alignWords([], [])), undefined);
  });

  it('prefers a substitution to a deletion plus an insertion', () => {
    assert.deepEqual(alignWords(['a'], ['b']), { referenceWords: 1, hypothesisWords: 1, substitutions: 1, deletions: 0, insertions: 0 });
  });

  it('matches a plain Levenshtein distance on random word sequences', () => {
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const words = ['a', 'b', 'c', 'd'];
    for (let trial = 0; trial < 200; trial += 1) {
      const r = Array.from({ length: random(9) }, () => words[random(4)]!);
      const h = Array.from({ length: random(9) }, () => words[random(4)]!);
      const e = alignWords(r, h);
      assert.equal(e.substitutions + e.deletions + e.insertions, levenshtein(r, h));
      // The counts must describe an alignment: reference words = hits + S + D, hypothesis = hits + S + I.
      assert.equal(r.length - e.deletions, h.length - e.insertions);
    }
  });
});

describe('countWordErrors', () => {
  it('normalizes both sides before aligning', () => {
    const errors = countWordErrors('Turn on the lamp.', 'turn on a lamp');
    assert.deepEqual(errors, { referenceWords: 4, hypothesisWords: 4, substitutions: 1, deletions: 0, insertions: 0 });
  });
});

function levenshtein(a: readonly string[], b: readonly string[]): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
  }
  return d[a.length]![b.length]!;
}
