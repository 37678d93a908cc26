import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeALaw, decodeMuLaw, encodeALaw, encodeMuLaw } from './g711.js';

describe('G.711', () => {
  it('mu-law: the reference code words (silence 0xFF, extremes 0x80 and 0x00)', () => {
    assert.deepEqual([...encodeMuLaw(Int16Array.from([0, 32767, -32768]))], [0xff, 0x80, 0x00]);
    assert.deepEqual([...decodeMuLaw(Uint8Array.from([0xff, 0x7f]))], [0, 0]);
    assert.equal(decodeMuLaw(Uint8Array.from([0x80]))[0], 32124);
  });

  it('A-law: the reference code words (0xD5 for the smallest positive, 0x55 for the smallest negative)', () => {
    assert.deepEqual([...encodeALaw(Int16Array.from([0, -1]))], [0xd5, 0x55]);
    assert.equal(decodeALaw(Uint8Array.from([0xd5]))[0], 8);
    assert.equal(decodeALaw(Uint8Array.from([0xaa]))[0], 32256);
  });

  for (const [name, encode, decode] of [
    ['mu-law', encodeMuLaw, decodeMuLaw],
    ['A-law', encodeALaw, decodeALaw],
  ] as const) {
    it(`${name}: a round trip keeps every sample within 1/16 of its magnitude (8-bit logarithmic steps)`, () => {
      const samples = Int16Array.from({ length: 2000 }, (_, i) => Math.round(Math.sin(i / 7) * (i * 16)));
      const back = decode(encode(samples));
      for (let i = 0; i < samples.length; i++) {
        assert.ok(Math.abs(back[i]! - samples[i]!) <= Math.max(16, Math.abs(samples[i]!) / 16), `${samples[i]} -> ${back[i]}`);
      }
    });
  }
});
