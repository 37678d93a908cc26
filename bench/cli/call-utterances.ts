/**
 * The scripted callers' utterances of `voxmux bench call`: synthesized by a server's
 * /v1/audio/speech, or read from a folder that an earlier run saved them to, so that a server with
 * no caller voices of its own (a GPU machine without the Debian voices) can be benched with speech
 * made elsewhere. A folder holds `utterances.json` (format, sample rate, and per utterance its voice,
 * text and file) and one raw 24 kHz 16-bit mono little-endian file per utterance.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { usageError } from './bench-error.js';
import type { CallUtterance } from './call-workload.js';
import { errorCodeFromBody, readText } from './transcribe-workload.js';

export const UTTERANCES_MANIFEST = 'utterances.json';
const FORMAT = 'pcm_s16le';
const SAMPLE_RATE = 24_000;

export interface SynthesisOptions {
  speechModel: string;
  voices: readonly string[];
  texts: readonly string[];
  apiKey?: string;
  timeoutMs: number;
}

/** Every voice saying every text, as 24 kHz pcm16 from the server's speech endpoint. */
export async function synthesizeUtterances(
  options: SynthesisOptions,
  endpoint: string,
  fetchFn: typeof globalThis.fetch,
): Promise<CallUtterance[]> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`;
  const utterances: CallUtterance[] = [];
  for (const voice of options.voices) {
    for (const text of options.texts) {
      const signal = AbortSignal.timeout(options.timeoutMs);
      const body = JSON.stringify({ model: options.speechModel, input: text, voice, response_format: 'pcm' });
      let response: Response;
      try {
        response = await fetchFn(endpoint, { method: 'POST', headers, body, signal });
      } catch (err) {
        throw usageError(`Expected ${endpoint} to synthesize the callers' speech: ${(err as Error).message}`);
      }
      if (!response.ok) {
        const code = errorCodeFromBody(await readText(response, signal), response.status);
        throw usageError(`Expected ${endpoint} to synthesize '${text}' with voice ${voice}: got ${response.status} ${code}`);
      }
      const pcm = Buffer.from(await response.arrayBuffer());
      if (pcm.length < 2) throw usageError(`Expected audio from ${endpoint} for voice ${voice}: got none`);
      utterances.push({ voice, text, pcm });
    }
  }
  return utterances;
}

interface ManifestEntry {
  voice: string;
  text: string;
  file: string;
}

/** Writes the utterances and their manifest into `dir` (made if missing). */
export async function saveUtterances(dir: string, utterances: readonly CallUtterance[]): Promise<void> {
  await mkdir(dir, { recursive: true });
  const entries: ManifestEntry[] = [];
  for (const [i, { voice, text, pcm }] of utterances.entries()) {
    const file = `${String(i).padStart(3, '0')}.pcm`;
    await writeFile(join(dir, file), pcm);
    entries.push({ voice, text, file });
  }
  const manifest = { format: FORMAT, sampleRate: SAMPLE_RATE, channels: 1, utterances: entries };
  await writeFile(join(dir, UTTERANCES_MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
}

/** Reads the utterances saved in `dir`; a missing, malformed or foreign manifest is a usage error. */
export async function loadUtterances(dir: string): Promise<CallUtterance[]> {
  const path = join(dir, UTTERANCES_MANIFEST);
  let manifest: unknown;
  try {
    manifest = JSON.parse(await readFile(path, 'utf8'));
  } catch (err) {
    throw usageError(`Expected ${path} to be saved utterances (--save-utterances): ${(err as Error).message}`);
  }
  const m = manifest as { format?: unknown; sampleRate?: unknown; channels?: unknown; utterances?: unknown };
  if (m.format !== FORMAT || m.sampleRate !== SAMPLE_RATE || m.channels !== 1 || !Array.isArray(m.utterances) || m.utterances.length === 0)
    throw usageError(`Expected ${path} to list utterances of ${FORMAT} at ${SAMPLE_RATE} Hz, mono: got another shape`);
  const utterances: CallUtterance[] = [];
  for (const entry of m.utterances as unknown[]) {
    const e = entry as Partial<ManifestEntry>;
    if (typeof e.voice !== 'string' || typeof e.text !== 'string' || typeof e.file !== 'string' || /[/\\]/.test(e.file))
      throw usageError(`Expected every entry of ${path} to have a voice, a text and a file name: got ${JSON.stringify(entry)}`);
    let pcm: Buffer;
    try {
      pcm = await readFile(join(dir, e.file));
    } catch (err) {
      throw usageError(`Expected ${join(dir, e.file)} to be readable: ${(err as Error).message}`);
    }
    if (pcm.length < 2 || pcm.length % 2 !== 0)
      throw usageError(`Expected ${join(dir, e.file)} to hold 16-bit samples: got ${pcm.length} bytes`);
    utterances.push({ voice: e.voice, text: e.text, pcm });
  }
  return utterances;
}
