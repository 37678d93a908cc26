/** Test audio: WAV writers, flite speech, ffmpeg transcodes, and word error rate. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { countWordErrors } from '../../bench/cli/word-error-rate.js';

/** A mono WAV of one sample format: 44-byte header, then the samples as they are in memory. */
function monoWav(data: ArrayBufferView, format: { formatTag: 1 | 3; bitsPerSample: 16 | 32; sampleRateHz: number }): Buffer {
  const bytesPerSample = format.bitsPerSample / 8;
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + data.byteLength, 4);
  header.write('WAVE', 8);
  header.write('fmt ', 12);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(format.formatTag, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(format.sampleRateHz, 24);
  header.writeUInt32LE(format.sampleRateHz * bytesPerSample, 28);
  header.writeUInt16LE(bytesPerSample, 32);
  header.writeUInt16LE(format.bitsPerSample, 34);
  header.write('data', 36);
  header.writeUInt32LE(data.byteLength, 40);
  return Buffer.concat([header, Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
}

/** A float32 mono WAV at the given rate (no resampling happens for 16 kHz). */
export function floatWav(samples: Float32Array, sampleRateHz = 16000): Buffer {
  return monoWav(samples, { formatTag: 3, bitsPerSample: 32, sampleRateHz });
}

/** A 16 kHz mono 16-bit PCM WAV: the format the model hosts read, passed through without conversion. */
export function pcm16Wav(samples: Int16Array): Buffer {
  return monoWav(samples, { formatTag: 1, bitsPerSample: 16, sampleRateHz: 16000 });
}

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

/** What ffprobe and a full ffmpeg decode say about encoded audio (speech responses). */
export interface ProbedAudio {
  /** ffprobe's format name, e.g. mp3, ogg, aac, flac, wav. */
  formatName: string;
  codecName: string;
  sampleRateHz: number;
  channels: number;
  /** Seconds of audio a full decode produced (not the header's claim). */
  decodedSeconds: number;
  /** The decode at 24 kHz mono 16-bit. */
  samples: Int16Array;
}

/**
 * Probes and decodes encoded audio with ffprobe and ffmpeg; throws when either fails. The bytes go
 * through a file: ffprobe stops reading a pipe early, which fails a large write into it.
 */
export function probeAudio(bytes: Uint8Array, options: { rawPcm24k?: boolean } = {}): ProbedAudio {
  const dir = mkdtempSync(join(tmpdir(), 'voxmux-probe-'));
  const file = join(dir, 'audio');
  writeFileSync(file, bytes);
  try {
    const input = options.rawPcm24k === true ? ['-f', 's16le', '-ar', '24000', '-ac', '1', '-i', file] : ['-i', file];
    const probe = JSON.parse(
      execFileSync('ffprobe', [
        '-v',
        'error',
        '-show_entries',
        'format=format_name:stream=codec_name,sample_rate,channels',
        '-of',
        'json',
        ...input,
      ]).toString('utf8'),
    ) as { format: { format_name: string }; streams: { codec_name: string; sample_rate: string; channels: number }[] };
    const decoded = execFileSync(
      'ffmpeg',
      ['-hide_banner', '-loglevel', 'error', ...input, '-f', 's16le', '-ac', '1', '-ar', '24000', 'pipe:1'],
      {
        maxBuffer: 256 * 1024 * 1024,
      },
    );
    return probed(probe, decoded);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function probed(
  probe: { format: { format_name: string }; streams: { codec_name: string; sample_rate: string; channels: number }[] },
  decoded: Buffer,
): ProbedAudio {
  const stream = probe.streams[0]!;
  const samples = new Int16Array(
    decoded.buffer.slice(decoded.byteOffset, decoded.byteOffset + decoded.byteLength - (decoded.byteLength % 2)),
  );
  return {
    formatName: probe.format.format_name,
    codecName: stream.codec_name,
    sampleRateHz: Number(stream.sample_rate),
    channels: stream.channels,
    decodedSeconds: samples.length / 24000,
    samples,
  };
}
