import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { floatToPcm16, pcm16LittleEndian } from './pcm16.js';

describe('floatToPcm16', () => {
  it('scales by 32768, rounds, and clamps overs, infinities and NaN', () => {
    const input = Float32Array.from([0, 0.5, -0.5, 1, -1, 1.5, -7, Infinity, -Infinity, NaN, 1 / 65536, -3 / 65536]);
    // Math.round: halves go up (0.5 -> 1, -1.5 -> -1).
    assert.deepEqual([...floatToPcm16(input)], [0, 16384, -16384, 32767, -32768, 32767, -32768, 32767, -32768, 0, 1, -1]);
  });

  it('inverts value / 32768 exactly for every 16-bit value', () => {
    const all = new Int16Array(65536).map((_, i) => i - 32768);
    assert.deepEqual(floatToPcm16(Float32Array.from(all, (v) => v / 32768)), all);
  });
});

describe('pcm16LittleEndian', () => {
  const bytes = Uint8Array.from([0xff, 0x01, 0x00, 0xff, 0x7f, 0x00, 0x80, 0x34]);

  it('views aligned samples without copying', () => {
    const samples = pcm16LittleEndian(bytes, 2, 3);
    assert.deepEqual([...samples], [-256, 127, 0x3480]);
    assert.equal(samples.buffer, bytes.buffer);
  });

  it('copies samples at an odd address', () => {
    const samples = pcm16LittleEndian(bytes, 1, 2);
    assert.deepEqual([...samples], [1, 0x7fff]);
    assert.notEqual(samples.buffer, bytes.buffer);
  });

  it('refuses to read past the end', () => {
    assert.throws(() => pcm16LittleEndian(bytes, 4, 3), RangeError);
  });
});
