/** Test audio: WAV writers, flite speech, ffmpeg transcodes, and word error rate. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { countWordErrors } from '../../bench/cli/word-error-rate.js';

/** A float32 mono WAV at the given rate (no resampling happens for 16 kHz). */
export function floatWav(samples: Float32Array, sampleRateHz = 16000): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + samples.byteLength, 4);
  header.write('WAVE', 8);
  header.write('fmt ', 12);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(3, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(sampleRateHz, 24);
  header.writeUInt32LE(sampleRateHz * 4, 28);
  header.writeUInt16LE(4, 32);
  header.writeUInt16LE(32, 34);
  header.write('data', 36);
  header.writeUInt32LE(samples.byteLength, 40);
  return Buffer.concat([header, Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength)]);
}

/** Deterministic pseudo-audio, distinct per seed. */
export function noise(samples: number, seed: number): Float32Array {
  const out = new Float32Array(samples);
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < samples; i++) {
    x = (x * 1664525 + 1013904223) >>> 0;
    out[i] = (x / 2 ** 32 - 0.5) * 0.2;
  }
  return out;
}

/** Speaks text with flite's slt voice into a 16 kHz mono WAV file. */
export function fliteWav(text: string, path: string): string {
  execFileSync('flite', ['-voice', 'slt', '-t', text, '-o', path]);
  return path;
}

export function ffmpegTranscode(input: string, output: string, args: string[]): Buffer {
  execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-i', input, ...args, output]);
  return readFileSync(output);
}

/** Word error rate as the product's accuracy bench counts it (bench/cli/word-error-rate.ts). */
export function wordErrorRate(reference: string, hypothesis: string): { errors: number; words: number } {
  const counted = countWordErrors(reference, hypothesis);
  return { errors: counted.substitutions + counted.deletions + counted.insertions, words: counted.referenceWords };
}

export const joinPath = join;
