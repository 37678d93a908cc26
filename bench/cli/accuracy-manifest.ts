/**
 * The accuracy bench's input: a JSON Lines manifest, one audio file per line with its reference
 * transcript. Both voxmux's own keys and NeMo's manifest keys are read:
 *
 *   {"audio": "clips/a.wav", "reference": "the reference text"}
 *   {"audio_filepath": "/data/b.flac", "text": "the reference text", "duration": 3.2}
 *
 * Relative paths are resolved against the manifest's folder. A line without a reference is still
 * transcribed (for comparing two servers' transcripts with --baseline) but has no word error rate.
 */
import { readFile, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { MAX_AUDIO_FILES } from './audio-input.js';
import { isBenchError, usageError } from './bench-error.js';

export interface AccuracyItem {
  /** The path as the manifest wrote it: the item's name in results and in --baseline matching. */
  audio: string;
  /** The absolute path. */
  audioPath: string;
  reference?: string;
}

/** Manifests larger than this are refused: the file is read whole. */
export const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

export async function loadAccuracyManifest(manifestPath: string): Promise<AccuracyItem[]> {
  let text: string;
  try {
    const info = await stat(manifestPath);
    if (!info.isFile()) throw usageError(`Expected --manifest to name a file: '${manifestPath}' is not one`);
    if (info.size > MAX_MANIFEST_BYTES)
      throw usageError(`Expected --manifest to be at most ${MAX_MANIFEST_BYTES} bytes: '${manifestPath}' is larger`);
    text = await readFile(manifestPath, 'utf8');
  } catch (err) {
    if (isBenchError(err)) throw err;
    throw usageError(`Expected --manifest to name a readable file: '${manifestPath}' cannot be read`);
  }
  const base = dirname(manifestPath);
  const items: AccuracyItem[] = [];
  const lines = text.split(/\r?\n/);
  for (let index = 0; index < lines.length; index += 1) {
    const line = lines[index]!.trim();
    if (line === '') continue;
    const where = `${manifestPath}:${index + 1}`;
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      throw usageError(`Expected each line of the manifest to be a JSON object: ${where} is not JSON`);
    }
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw usageError(`Expected each line of the manifest to be a JSON object: ${where} is not an object`);
    }
    const record = entry as Record<string, unknown>;
    const audio = record.audio ?? record.audio_filepath;
    if (typeof audio !== 'string' || audio === '') {
      throw usageError(`Expected "audio" (or "audio_filepath") to be a non-empty string at ${where}`);
    }
    const reference = record.reference ?? record.text;
    if (reference !== undefined && typeof reference !== 'string') {
      throw usageError(`Expected "reference" (or "text") to be a string at ${where}`);
    }
    const audioPath = resolve(base, audio);
    const info = await stat(audioPath).catch(() => undefined);
    if (info?.isFile() !== true) throw usageError(`Expected the audio file of ${where} to exist: '${audioPath}' does not`);
    items.push({ audio, audioPath, ...(reference === undefined ? {} : { reference }) });
    if (items.length > MAX_AUDIO_FILES) throw usageError(`Expected at most ${MAX_AUDIO_FILES} manifest lines with audio`);
  }
  if (items.length === 0) throw usageError(`Expected at least one line in the manifest '${manifestPath}': found none`);
  return items;
}

/**
 * Keys that match items between two runs of the same or a reordered manifest: the audio path and
 * which occurrence of it this is (a manifest may list the same file twice).
 */
export function occurrenceKeys(audios: readonly string[]): string[] {
  const seen = new Map<string, number>();
  return audios.map((audio) => {
    const count = seen.get(audio) ?? 0;
    seen.set(audio, count + 1);
    return `${audio}\u0000${count}`;
  });
}
