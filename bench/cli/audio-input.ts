/**
 * Audio inputs for the transcription workload: files or directories, uploaded as-is. Audio
 * duration comes from the WAV header when the file is WAV, else from --audio-seconds, else it is
 * unknown (and the report then has no audio-seconds-per-second figure).
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';
import { usageError } from './bench-error.js';

export const AUDIO_CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.wav': 'audio/wav',
  '.flac': 'audio/flac',
  '.mp3': 'audio/mpeg',
  '.m4a': 'audio/mp4',
  '.mp4': 'audio/mp4',
  '.aac': 'audio/aac',
  '.ogg': 'audio/ogg',
  '.oga': 'audio/ogg',
  '.opus': 'audio/ogg',
  '.webm': 'audio/webm',
  '.mpga': 'audio/mpeg',
  '.mpeg': 'audio/mpeg',
};

/** Upper bounds that keep every input in memory safely. */
export const MAX_AUDIO_FILES = 10_000;
export const MAX_AUDIO_TOTAL_BYTES = 2 * 1024 * 1024 * 1024;

export interface AudioInput {
  fileName: string;
  contentType: string;
  bytes: Uint8Array;
  /** Undefined when neither the header nor --audio-seconds tells. */
  audioSeconds?: number;
}

export interface LoadAudioOptions {
  /** Files or directories (directories are read one level deep, audio extensions only). */
  paths: string[];
  /** Duration to assume for files whose header does not give one. */
  fallbackAudioSeconds?: number;
}

/** Reads every input into memory once, so that file I/O never sits on the request path. */
export async function loadAudioInputs(options: LoadAudioOptions): Promise<AudioInput[]> {
  const files: string[] = [];
  for (const path of options.paths) {
    let info;
    try {
      info = await stat(path);
    } catch {
      throw usageError(`Expected --audio to name existing files or directories: '${path}' does not exist`);
    }
    if (info.isDirectory()) {
      const entries = (await readdir(path, { withFileTypes: true }))
        .filter((entry) => entry.isFile() && Object.hasOwn(AUDIO_CONTENT_TYPES, extname(entry.name).toLowerCase()))
        .map((entry) => join(path, entry.name))
        .sort();
      if (entries.length === 0) throw usageError(`Expected audio files in the directory '${path}': found none`);
      files.push(...entries);
    } else {
      files.push(path);
    }
  }
  if (files.length === 0) throw usageError('Expected --audio to name at least one file or directory');
  if (files.length > MAX_AUDIO_FILES) {
    throw usageError(`Expected at most ${MAX_AUDIO_FILES} audio files: got ${files.length}`);
  }
  const inputs: AudioInput[] = [];
  let totalBytes = 0;
  for (const file of files) {
    const bytes = new Uint8Array(await readFile(file));
    totalBytes += bytes.byteLength;
    if (totalBytes > MAX_AUDIO_TOTAL_BYTES) {
      throw usageError(`Expected the audio inputs to total at most ${MAX_AUDIO_TOTAL_BYTES} bytes`);
    }
    if (bytes.byteLength === 0) throw usageError(`Expected non-empty audio files: '${file}' is empty`);
    const extension = extname(file).toLowerCase();
    const fromHeader = extension === '.wav' || isRiffWave(bytes) ? wavDurationSeconds(bytes) : undefined;
    const audioSeconds = fromHeader ?? options.fallbackAudioSeconds;
    inputs.push({
      fileName: basename(file),
      contentType: AUDIO_CONTENT_TYPES[extension] ?? 'application/octet-stream',
      bytes,
      ...(audioSeconds === undefined ? {} : { audioSeconds }),
    });
  }
  return inputs;
}

function isRiffWave(bytes: Uint8Array): boolean {
  return bytes.byteLength >= 12 && ascii(bytes, 0, 4) === 'RIFF' && ascii(bytes, 8, 4) === 'WAVE';
}

function ascii(bytes: Uint8Array, offset: number, length: number): string {
  return String.fromCharCode(...bytes.subarray(offset, offset + length));
}

/**
 * Duration of a RIFF/WAVE file from its `fmt ` and `data` chunks, in seconds; undefined when the
 * header is not a readable WAV header. A `data` size beyond the end of the file (streamed WAVs
 * write 0xFFFFFFFF) is clamped to the bytes actually present.
 */
export function wavDurationSeconds(bytes: Uint8Array): number | undefined {
  if (!isRiffWave(bytes)) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 12;
  let byteRate: number | undefined;
  let blockAlign: number | undefined;
  while (offset + 8 <= bytes.byteLength) {
    const id = ascii(bytes, offset, 4);
    const size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === 'fmt ' && body + 16 <= bytes.byteLength) {
      const channels = view.getUint16(body + 2, true);
      const sampleRateHz = view.getUint32(body + 4, true);
      blockAlign = view.getUint16(body + 12, true);
      byteRate = view.getUint32(body + 8, true);
      if (byteRate === 0 && channels > 0) byteRate = sampleRateHz * blockAlign;
    } else if (id === 'data') {
      if (byteRate === undefined || byteRate === 0) return undefined;
      let dataBytes = Math.min(size, bytes.byteLength - body);
      if (blockAlign !== undefined && blockAlign > 0) dataBytes -= dataBytes % blockAlign;
      return dataBytes / byteRate;
    }
    // Chunks are padded to an even size.
    offset = body + size + (size % 2);
  }
  return undefined;
}
