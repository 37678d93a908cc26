/**
 * The two runs of `voxmux bench diarize`:
 * - accuracy: each manifest file is diarized once, whole (POST /v1/audio/diarization) or as a
 *   session of chunks (the sessions API, scored on the timeline its DELETE returns), and scored
 *   against its RTTM reference (diarization-error-rate.ts);
 * - load: N concurrent sessions each send one recording chunk by chunk, in real time (a chunk
 *   every chunk length) or as fast as answers come, and every chunk's latency is measured.
 */
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { DiarizationJson } from '../../src/api/diarization.js';
import type { Clock } from '../../src/core/clock.js';
import { diarizationErrorRate, parseRttm, rttmFileIds, toDer, type DerResult } from './diarization-error-rate.js';
import { buildMultipartBody } from './multipart-body.js';
import { errorCodeFromBody, readText } from './transcribe-workload.js';
import { RequestAbort, toTransportErrorCode } from './workload.js';

export interface DiarizeAccuracyItem {
  /** The path as the manifest wrote it. */
  audio: string;
  audioPath: string;
  rttmPath: string;
  /** The RTTM's file id to score against when it names several files (default: the audio's base name). */
  uri?: string;
}

export interface DiarizeRunDeps {
  fetch: typeof globalThis.fetch;
  clock: Clock;
  /** Aborting it stops the run; what finished is still reported. */
  signal?: AbortSignal;
}

interface CallResult {
  status?: number;
  text?: string;
  latencyMs: number;
  errorCode?: string;
}

/** One HTTP call with a timeout; transport failures become error codes, never throws. */
async function call(
  url: string,
  init: { method: string; body?: Uint8Array; contentType?: string; apiKey?: string; timeoutMs: number },
  deps: DiarizeRunDeps,
): Promise<CallResult> {
  const controller = new AbortController();
  const timer = deps.clock.setTimeout(() => controller.abort(new RequestAbort('timeout')), init.timeoutMs);
  const onAbort = (): void => controller.abort(new RequestAbort('interrupted'));
  deps.signal?.addEventListener('abort', onAbort, { once: true });
  const headers: Record<string, string> = { accept: 'application/json' };
  if (init.contentType !== undefined) headers['content-type'] = init.contentType;
  if (init.apiKey !== undefined) headers.authorization = `Bearer ${init.apiKey}`;
  const startMs = deps.clock.nowMs();
  let status: number | undefined;
  try {
    const response = await deps.fetch(url, {
      method: init.method,
      headers,
      signal: controller.signal,
      redirect: 'manual',
      ...(init.body === undefined ? {} : { body: init.body }),
    });
    status = response.status;
    const text = await readText(response, controller.signal);
    const latencyMs = deps.clock.nowMs() - startMs;
    if (status < 200 || status >= 300) return { status, text, latencyMs, errorCode: errorCodeFromBody(text, status) };
    return { status, text, latencyMs };
  } catch (err) {
    return {
      latencyMs: deps.clock.nowMs() - startMs,
      ...(status === undefined ? {} : { status }),
      errorCode: toTransportErrorCode(err, controller.signal),
    };
  } finally {
    timer.cancel();
    deps.signal?.removeEventListener('abort', onAbort);
  }
}

function isDiarizationJson(value: unknown): value is DiarizationJson {
  if (typeof value !== 'object' || value === null) return false;
  const segments = (value as { segments?: unknown }).segments;
  return (
    Array.isArray(segments) &&
    segments.every(
      (s: unknown) =>
        typeof s === 'object' &&
        s !== null &&
        typeof (s as Record<string, unknown>).start === 'number' &&
        typeof (s as Record<string, unknown>).end === 'number' &&
        typeof (s as Record<string, unknown>).speaker === 'string',
    )
  );
}

function parseJson(text: string | undefined): unknown {
  try {
    return JSON.parse(text ?? '');
  } catch {
    return undefined;
  }
}

export interface DiarizeAccuracyOptions {
  /** The full URL of POST /v1/audio/diarization. */
  endpoint: string;
  model: string;
  items: readonly DiarizeAccuracyItem[];
  concurrency: number;
  timeoutMs: number;
  collarS: number;
  /** Extra multipart fields, such as min_speakers=2. */
  extraFields: ReadonlyArray<readonly [string, string]>;
  /** When set, each file is sent as a session of chunks this long (WAV files only). */
  chunkS?: number;
  apiKey?: string;
}

export interface DiarizeAccuracyItemResult {
  audio: string;
  latencyMs: number;
  status?: number;
  errorCode?: string;
  score?: DerResult;
  /** Speakers in the reference and in the hypothesis. */
  referenceSpeakers?: number;
  hypothesisSpeakers?: number;
}

export async function runDiarizeAccuracy(
  options: DiarizeAccuracyOptions,
  deps: DiarizeRunDeps & { onItem?: (done: number) => void },
): Promise<{ items: DiarizeAccuracyItemResult[]; isInterrupted: boolean }> {
  const results: Array<DiarizeAccuracyItemResult | undefined> = new Array(options.items.length);
  let next = 0;
  let done = 0;
  const auth = options.apiKey === undefined ? {} : { apiKey: options.apiKey };
  const whole = (item: DiarizeAccuracyItem, audio: Uint8Array): Promise<CallResult> => {
    const multipart = buildMultipartBody(
      { field: 'file', fileName: basename(item.audioPath), contentType: 'application/octet-stream', bytes: audio },
      [['model', options.model], ['response_format', 'json'], ...options.extraFields],
    );
    return call(
      options.endpoint,
      { method: 'POST', body: multipart.body, contentType: multipart.contentType, timeoutMs: options.timeoutMs, ...auth },
      deps,
    );
  };
  /**
   * The recording as a session of chunks, the last marked is_last (so a streaming engine runs the
   * steps still waiting for audio, the recording's tail, before the close); the answer is the final
   * timeline (the DELETE's).
   */
  const inChunks = async (recording: ChunkedRecording): Promise<CallResult> => {
    const startMs = deps.clock.nowMs();
    const body = new Uint8Array(Buffer.from(JSON.stringify({ ...Object.fromEntries(options.extraFields), model: options.model })));
    const sessionsUrl = `${options.endpoint}/sessions`;
    const created = await call(
      sessionsUrl,
      { method: 'POST', body, contentType: 'application/json', timeoutMs: options.timeoutMs, ...auth },
      deps,
    );
    const id = (parseJson(created.text) as { id?: unknown } | undefined)?.id;
    if (created.errorCode !== undefined || typeof id !== 'string') return { ...created, errorCode: created.errorCode ?? 'bad_response' };
    const sessionUrl = `${sessionsUrl}/${encodeURIComponent(id)}`;
    for (let seq = 0; seq < recording.chunks.length; seq++) {
      const fields: [string, string][] = [['seq', String(seq)]];
      if (seq === recording.chunks.length - 1) fields.push(['is_last', 'true']);
      const multipart = buildMultipartBody(
        { field: 'file', fileName: `chunk-${seq}.wav`, contentType: 'audio/wav', bytes: recording.chunks[seq]! },
        fields,
      );
      const sent = await call(
        `${sessionUrl}/chunks`,
        { method: 'POST', body: multipart.body, contentType: multipart.contentType, timeoutMs: options.timeoutMs, ...auth },
        deps,
      );
      if (sent.errorCode !== undefined) {
        await call(sessionUrl, { method: 'DELETE', timeoutMs: options.timeoutMs, ...auth }, deps);
        return { ...sent, latencyMs: deps.clock.nowMs() - startMs };
      }
    }
    const closed = await call(sessionUrl, { method: 'DELETE', timeoutMs: options.timeoutMs, ...auth }, deps);
    return { ...closed, latencyMs: deps.clock.nowMs() - startMs };
  };
  const one = async (item: DiarizeAccuracyItem): Promise<DiarizeAccuracyItemResult> => {
    let audio: Uint8Array;
    let reference: ReturnType<typeof parseRttm>;
    let recording: ChunkedRecording | undefined;
    try {
      audio = new Uint8Array(await readFile(item.audioPath));
      const rttm = await readFile(item.rttmPath, 'utf8');
      const files = rttmFileIds(rttm);
      const uri = item.uri ?? (files.size > 1 ? basename(item.audioPath).replace(/\.[^.]*$/, '') : undefined);
      reference = parseRttm(rttm, uri);
      if (uri !== undefined && !files.has(uri)) return { audio: item.audio, latencyMs: 0, errorCode: 'reference_missing' };
      if (options.chunkS !== undefined) recording = splitWav(audio, options.chunkS);
    } catch {
      return { audio: item.audio, latencyMs: 0, errorCode: 'input_unreadable' };
    }
    const result = recording === undefined ? await whole(item, audio) : await inChunks(recording);
    const base = { audio: item.audio, latencyMs: result.latencyMs, ...(result.status === undefined ? {} : { status: result.status }) };
    if (result.errorCode !== undefined) return { ...base, errorCode: result.errorCode };
    const body = parseJson(result.text);
    if (!isDiarizationJson(body)) return { ...base, errorCode: 'bad_response' };
    return {
      ...base,
      score: diarizationErrorRate(reference, body.segments, { collarS: options.collarS }),
      referenceSpeakers: new Set(reference.map((t) => t.speaker)).size,
      hypothesisSpeakers: new Set(body.segments.map((s) => s.speaker)).size,
    };
  };
  const worker = async (): Promise<void> => {
    while (next < options.items.length && deps.signal?.aborted !== true) {
      const index = next;
      next += 1;
      results[index] = await one(options.items[index]!);
      done += 1;
      deps.onItem?.(done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, options.items.length) }, () => worker()));
  return { items: results.filter((r): r is DiarizeAccuracyItemResult => r !== undefined), isInterrupted: deps.signal?.aborted === true };
}

/** Pooled scores: each error summed over files, divided by the summed scored speech (md-eval's overall figure; toDer when there is none). */
export function pooledDer(items: readonly DiarizeAccuracyItemResult[]): Omit<DerResult, 'mapping'> & { files: number; failed: number } {
  const scored = items.flatMap((i) => (i.score === undefined ? [] : [i.score]));
  const sum = (pick: (s: DerResult) => number) => scored.reduce((a, s) => a + pick(s), 0);
  const scoredSpeechS = sum((s) => s.scoredSpeechS);
  const missedS = sum((s) => s.missedS);
  const falseAlarmS = sum((s) => s.falseAlarmS);
  const confusionS = sum((s) => s.confusionS);
  return {
    files: scored.length,
    failed: items.length - scored.length,
    scoredSpeechS,
    missedS,
    falseAlarmS,
    confusionS,
    der: toDer(missedS + falseAlarmS + confusionS, scoredSpeechS),
  };
}

// ---------------------------------------------------------------------------------------------
// load

/** A recording cut into WAV chunks in its own sample format. */
export interface ChunkedRecording {
  chunks: Uint8Array[];
  chunkSeconds: number[];
}

/**
 * Cuts a WAV file (PCM or IEEE float, any channel count) into WAV files of `chunkS` seconds (the
 * last may be shorter), each with the original's format chunk.
 * @throws Error for a file that is not a WAV file with a format and a data chunk
 */
export function splitWav(bytes: Uint8Array, chunkS: number): ChunkedRecording {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (at: number) => String.fromCharCode(...bytes.subarray(at, at + 4));
  if (bytes.byteLength < 12 || tag(0) !== 'RIFF' || tag(8) !== 'WAVE') throw new Error('Expected a WAV file (RIFF/WAVE)');
  let at = 12;
  let fmt: Uint8Array | undefined;
  let data: Uint8Array | undefined;
  while (at + 8 <= bytes.byteLength) {
    const id = tag(at);
    const size = view.getUint32(at + 4, true);
    if (id === 'fmt ' && size >= 16) fmt = bytes.subarray(at, Math.min(bytes.byteLength, at + 8 + size));
    if (id === 'data') data = bytes.subarray(at + 8, Math.min(bytes.byteLength, at + 8 + size));
    at += 8 + size + (size % 2);
  }
  if (fmt === undefined || fmt.byteLength < 24 || data === undefined) throw new Error('Expected a WAV file with fmt and data chunks');
  const fmtView = new DataView(fmt.buffer, fmt.byteOffset, fmt.byteLength);
  const rateHz = fmtView.getUint32(12, true);
  const frameBytes = fmtView.getUint16(20, true);
  if (rateHz === 0 || frameBytes === 0) throw new Error('Expected a WAV file with a sample rate and a block size');
  const fmtChunk = fmt.byteLength % 2 === 0 ? fmt : Buffer.concat([fmt, Buffer.alloc(1)]);
  const chunkBytes = Math.max(1, Math.round(chunkS * rateHz)) * frameBytes;
  const chunks: Uint8Array[] = [];
  const chunkSeconds: number[] = [];
  for (let start = 0; start + frameBytes <= data.byteLength; start += chunkBytes) {
    const body = data.subarray(start, Math.min(data.byteLength, start + chunkBytes));
    const riff = Buffer.alloc(12);
    riff.write('RIFF', 0, 'ascii');
    riff.writeUInt32LE(4 + fmtChunk.byteLength + 8 + body.byteLength, 4);
    riff.write('WAVE', 8, 'ascii');
    const dataHead = Buffer.alloc(8);
    dataHead.write('data', 0, 'ascii');
    dataHead.writeUInt32LE(body.byteLength, 4);
    chunks.push(new Uint8Array(Buffer.concat([riff, fmtChunk, dataHead, body])));
    chunkSeconds.push(body.byteLength / frameBytes / rateHz);
  }
  return { chunks, chunkSeconds };
}

export interface DiarizeLoadOptions {
  /** The full URL of POST /v1/audio/diarization/sessions. */
  sessionsUrl: string;
  model: string;
  sessions: number;
  recording: ChunkedRecording;
  /** realtime: a session sends a chunk every chunk length (sessions start spread over one chunk length); asap: as answers come. */
  pacing: 'realtime' | 'asap';
  timeoutMs: number;
  apiKey?: string;
  /**
   * This process's part of a run spread over several bench processes: the sessions whose index
   * modulo `of` is `index` (each keeps the start it has in the whole run). @default all sessions
   */
  share?: { index: number; of: number };
  /** Wait before the run's start, so that every process of a spread run starts at one moment. @default 0 */
  startInMs?: number;
}

export interface DiarizeChunkSample {
  session: number;
  seq: number;
  latencyMs: number;
  /** How long after its time in the schedule the chunk was sent (realtime pacing: a session sends its
   * next chunk only once the last is answered, so a slow answer delays it); 0 with asap pacing. */
  lateMs: number;
  audioS: number;
  errorCode?: string;
}

export interface DiarizeLoadRun {
  chunks: DiarizeChunkSample[];
  /** Sessions that could not be created, by error code. */
  createErrors: Record<string, number>;
  wallS: number;
  isInterrupted: boolean;
}

export async function runDiarizeLoad(options: DiarizeLoadOptions, deps: DiarizeRunDeps): Promise<DiarizeLoadRun> {
  const samples: DiarizeChunkSample[] = [];
  const createErrors: Record<string, number> = {};
  const auth = options.apiKey === undefined ? {} : { apiKey: options.apiKey };
  const { chunks, chunkSeconds } = options.recording;
  const chunkMs = (chunkSeconds[0] ?? 1) * 1000;
  const startMs = deps.clock.nowMs() + Math.max(0, options.startInMs ?? 0);
  const sleepUntil = (atMs: number) =>
    new Promise<void>((resolve) => {
      const waitMs = atMs - deps.clock.nowMs();
      if (waitMs <= 0 || deps.signal?.aborted === true) return resolve();
      const handle = deps.clock.setTimeout(resolve, waitMs);
      deps.signal?.addEventListener('abort', () => (handle.cancel(), resolve()), { once: true });
    });
  const isAborted = () => deps.signal?.aborted === true;
  const runSession = async (index: number): Promise<void> => {
    const offsetMs = options.pacing === 'realtime' ? (chunkMs * index) / options.sessions : 0;
    await sleepUntil(startMs + offsetMs);
    if (isAborted()) return;
    const body = new Uint8Array(Buffer.from(JSON.stringify({ model: options.model })));
    const created = await call(
      options.sessionsUrl,
      { method: 'POST', body, contentType: 'application/json', timeoutMs: options.timeoutMs, ...auth },
      deps,
    );
    const id = (parseJson(created.text) as { id?: unknown } | undefined)?.id;
    if (created.errorCode !== undefined || typeof id !== 'string') {
      const code = created.errorCode ?? 'bad_response';
      createErrors[code] = (createErrors[code] ?? 0) + 1;
      return;
    }
    const sessionUrl = `${options.sessionsUrl}/${encodeURIComponent(id)}`;
    for (let seq = 0; seq < chunks.length && !isAborted(); seq++) {
      const dueMs = startMs + offsetMs + seq * chunkMs;
      if (options.pacing === 'realtime') await sleepUntil(dueMs);
      const lateMs = options.pacing === 'realtime' ? Math.max(0, deps.clock.nowMs() - dueMs) : 0;
      const fields: [string, string][] = [['seq', String(seq)]];
      if (seq === chunks.length - 1) fields.push(['is_last', 'true']);
      const multipart = buildMultipartBody(
        { field: 'file', fileName: `chunk-${seq}.wav`, contentType: 'audio/wav', bytes: chunks[seq]! },
        fields,
      );
      const result = await call(
        `${sessionUrl}/chunks`,
        { method: 'POST', body: multipart.body, contentType: multipart.contentType, timeoutMs: options.timeoutMs, ...auth },
        deps,
      );
      samples.push({
        session: index,
        seq,
        latencyMs: result.latencyMs,
        lateMs,
        audioS: chunkSeconds[seq]!,
        ...(result.errorCode === undefined ? {} : { errorCode: result.errorCode }),
      });
      if (result.errorCode === 'session_expired' || result.errorCode === 'session_not_found') return;
    }
    await call(sessionUrl, { method: 'DELETE', timeoutMs: options.timeoutMs, ...auth }, deps);
  };
  const share = options.share ?? { index: 0, of: 1 };
  const mine = Array.from({ length: options.sessions }, (_, i) => i).filter((i) => i % share.of === share.index);
  await Promise.all(mine.map((i) => runSession(i)));
  return {
    chunks: samples,
    createErrors,
    wallS: Math.max(0, deps.clock.nowMs() - startMs) / 1000,
    isInterrupted: deps.signal?.aborted === true,
  };
}

/** One run from the parts of a run spread over several bench processes (same start): samples and errors together, the longest wall time. */
export function mergeDiarizeLoadRuns(parts: readonly DiarizeLoadRun[]): DiarizeLoadRun {
  const createErrors: Record<string, number> = {};
  for (const part of parts) for (const [code, n] of Object.entries(part.createErrors)) createErrors[code] = (createErrors[code] ?? 0) + n;
  return {
    chunks: parts.flatMap((p) => p.chunks).sort((a, b) => a.session - b.session || a.seq - b.seq),
    createErrors,
    wallS: Math.max(0, ...parts.map((p) => p.wallS)),
    isInterrupted: parts.some((p) => p.isInterrupted),
  };
}
