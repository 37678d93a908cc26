import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSentenceCutter } from './sentence-cutter.js';

function cut(tokens: string[]): { at: number; sentence: string }[] {
  const cutter = createSentenceCutter();
  const out: { at: number; sentence: string }[] = [];
  tokens.forEach((token, at) => {
    for (const sentence of cutter.push(token)) out.push({ at, sentence });
  });
  for (const sentence of cutter.flush()) out.push({ at: tokens.length, sentence });
  return out;
}

describe('SentenceCutter (streamed LLM text to sentences)', () => {
  it('releases each sentence as soon as the token after its end arrives', () => {
    const out = cut(['Sure', '.', ' I', ' booked', ' it', '.', ' Anything', ' else', '?']);
    assert.deepEqual(out, [
      { at: 2, sentence: 'Sure.' },
      { at: 6, sentence: 'I booked it.' },
      { at: 9, sentence: 'Anything else?' },
    ]);
  });

  it('keeps abbreviations and decimals inside their sentence', () => {
    const out = cut(['Dr.', ' Smith', ' paid', ' 3.5', ' dollars.', ' Thanks', '!']);
    assert.deepEqual(
      out.map((o) => o.sentence),
      ['Dr. Smith paid 3.5 dollars.', 'Thanks!'],
    );
  });

  it('flushes text without a final stop, and nothing for whitespace', () => {
    assert.deepEqual(
      cut(['Hello', ' there']).map((o) => o.sentence),
      ['Hello there'],
    );
    assert.deepEqual(cut(['  ', '\n']), []);
  });
});
