import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isBlankSpeechText, splitSpeechText } from './split-text.js';

describe('splitSpeechText', () => {
  it('splits sentences at . ! ? followed by whitespace', () => {
    assert.deepEqual(splitSpeechText('Hello there. How are you? Fine! Good'), ['Hello there.', 'How are you?', 'Fine!', 'Good']);
  });

  it('does not split after abbreviations such as Dr. and e.g., nor after initials', () => {
    assert.deepEqual(splitSpeechText('Dr. Smith met Mrs. Jones at St. Mary, e.g. on Jan. 5. J. R. R. Tolkien wrote it.'), [
      'Dr. Smith met Mrs. Jones at St. Mary, e.g. on Jan. 5.',
      'J. R. R. Tolkien wrote it.',
    ]);
  });

  it('does not split decimals, versions or domain names', () => {
    assert.deepEqual(splitSpeechText('It costs 3.5 dollars at example.com today. Version 1.2.3 is out.'), [
      'It costs 3.5 dollars at example.com today.',
      'Version 1.2.3 is out.',
    ]);
  });

  it('keeps closing quotes and brackets with their sentence and splits after an ellipsis', () => {
    assert.deepEqual(splitSpeechText('She said "Stop." Then (quietly.) he left... And so'), [
      'She said "Stop."',
      'Then (quietly.)',
      'he left...',
      'And so',
    ]);
  });

  it('collapses whitespace, ends a sentence at a blank line and returns [] for blank text', () => {
    assert.deepEqual(splitSpeechText('  A heading\n\n  first   line\nsame sentence.  '), ['A heading', 'first line same sentence.']);
    assert.deepEqual(splitSpeechText(' \n\t '), []);
  });

  it('cuts a sentence over maxPieceChars into clauses at , ; : and dashes, packing them up to the limit', () => {
    const sentence = 'First part is here, second part follows; third part comes: fourth part \u2014 fifth part ends here.';
    const pieces = splitSpeechText(sentence, { maxPieceChars: 40 });
    assert.deepEqual(pieces, ['First part is here, second part follows;', 'third part comes: fourth part \u2014', 'fifth part ends here.']);
    assert.ok(pieces.every((p) => p.length <= 40));
    assert.equal(pieces.join(' '), sentence);
  });

  it('packs short clauses together and cuts a clause without punctuation at spaces as a last resort', () => {
    assert.deepEqual(splitSpeechText('a, b, c, d, e.', { maxPieceChars: 8 }), ['a, b, c,', 'd, e.']);
    const words = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');
    const pieces = splitSpeechText(words, { maxPieceChars: 50 });
    assert.ok(pieces.length > 1 && pieces.every((p) => p.length <= 50));
    assert.equal(pieces.join(' '), words);
  });

  it('cuts a single word longer than maxPieceChars into pieces of the limit', () => {
    assert.deepEqual(splitSpeechText('x'.repeat(25), { maxPieceChars: 10 }), ['x'.repeat(10), 'x'.repeat(10), 'x'.repeat(5)]);
  });

  it('keeps every piece of a 4096-character input within 200 characters by default, in order', () => {
    const text = 'This sentence, which has a clause or two; goes on and on and on. '.repeat(63).trim();
    const pieces = splitSpeechText(text);
    assert.ok(pieces.every((p) => p.length > 0 && p.length <= 200));
    assert.equal(pieces.join(' '), text);
  });

  it('does not split digit groups such as 1,000 into clauses', () => {
    const pieces = splitSpeechText(`${'y'.repeat(30)} 1,000,000 ${'z'.repeat(30)}, tail`, { maxPieceChars: 50 });
    assert.ok(pieces.some((p) => p.includes('1,000,000')));
  });

  it('returns no piece that the model hosts refuse as blank (Python str.strip() also strips U+001C-U+001F and U+0085)', () => {
    // The adapters (vits, debian-voices) check each sentence with s.strip() and fail the whole stream with
    // unsupported_option when one is blank; JavaScript's \s and trim() do not count these characters.
    assert.deepEqual(splitSpeechText('Hello there. \u001c'), ['Hello there.']);
    assert.deepEqual(splitSpeechText('Hello there. \u0085'), ['Hello there.']);
  });

  it('reads control characters as spaces, so that no engine stops at a NUL', () => {
    assert.deepEqual(splitSpeechText('Hello\u0000there, my\u001bfriend.\u0007 Bye.\u009f'), ['Hello there, my friend.', 'Bye.']);
    assert.deepEqual(splitSpeechText('\u0000\u0001 \u007f'), []);
    assert.equal(isBlankSpeechText('\u0000\u001c \u0085\n'), true);
    assert.equal(isBlankSpeechText('\u0000a'), false);
  });

  it('reads a lone surrogate (JSON can carry "\\ud800") as a space: UTF-8 cannot carry one to the engines', () => {
    assert.deepEqual(splitSpeechText('\ud800Hello there.\udc00 Bye \ud83d\ude42.'), ['Hello there.', 'Bye \u{1F642}.']);
    assert.equal(isBlankSpeechText(' \udfff\ud800 '), true);
  });
});
