/**
 * 16-bit PCM, the form decoded audio takes from here on (scheduler, protocol, model hosts): half
 * the bytes of float32, and a 16 kHz mono 16-bit WAV, the common upload, needs no conversion.
 */

/** Float samples to 16-bit PCM: x * 32768 rounded, clamped to [-32768, 32767]; NaN becomes 0. */
export function floatToPcm16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i += 1) {
    const scaled = Math.round(samples[i]! * 32768);
    // NaN fails both comparisons and is stored as 0.
    out[i] = scaled > 32767 ? 32767 : scaled < -32768 ? -32768 : scaled;
  }
  return out;
}

/**
 * `count` little-endian 16-bit samples at `byteOffset` of `bytes`, as a view when the offset is
 * 2-byte aligned in memory (no copy: the view keeps `bytes` alive), else as a copy.
 */
export function pcm16LittleEndian(bytes: Uint8Array, byteOffset: number, count: number): Int16Array {
  const start = bytes.byteOffset + byteOffset;
  if (start + count * 2 > bytes.byteOffset + bytes.byteLength) {
    throw new RangeError(`Expected ${count} samples at byte ${byteOffset}: the buffer holds ${bytes.byteLength} bytes`);
  }
  if (start % 2 === 0) return new Int16Array(bytes.buffer, start, count);
  const copy = new Int16Array(count);
  new Uint8Array(copy.buffer).set(bytes.subarray(byteOffset, byteOffset + count * 2));
  return copy;
}
