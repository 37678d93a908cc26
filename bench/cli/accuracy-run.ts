/**
 * Runs the accuracy bench: each manifest item is transcribed once (at most `concurrency` at a
 * time), and its transcript is scored against its reference, and against a baseline run's
 * transcript of the same audio when one is given.
 */
import { readFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { isTranscriptionJson } from '../../src/api/openai-audio.js';
import type { Clock } from '../../src/core/clock.js';
import { occurrenceKeys, type AccuracyItem } from './accuracy-manifest.js';
import { AUDIO_CONTENT_TYPES } from './audio-input.js';
import { buildMultipartBody } from './multipart-body.js';
import { errorCodeFromBody, readText } from './transcribe-workload.js';
import { countWordErrors, type WordErrors } from './word-error-rate.js';
import { RequestAbort, toTransportErrorCode } from './workload.js';

export interface AccuracyRunOptions {
  /** The full URL of the transcriptions endpoint. */
  endpoint: string;
  model: string;
  items: readonly AccuracyItem[];
  concurrency: number;
  timeoutMs: number;
  /** Extra multipart fields, such as `language=en`. */
  extraFields: ReadonlyArray<readonly [string, string]>;
  apiKey?: string;
  /** Transcripts of an earlier run, by `occurrenceKeys` of its items. */
  baseline?: ReadonlyMap<string, string>;
}

export interface AccuracyRunDeps {
  fetch: typeof globalThis.fetch;
  clock: Clock;
  /** Aborting it stops the run: items not yet sent are left out, items in flight fail as interrupted. */
  signal?: AbortSignal;
  /** Called as each item finishes, in completion order. */
  onItem?: (result: AccuracyItemResult, done: number) => void;
}

export interface AccuracyItemResult {
  audio: string;
  reference?: string;
  hypothesis?: string;
  /** Against the reference, when there is one and the call succeeded. */
  errors?: WordErrors;
  /** Against the baseline's transcript, when there is one and the call succeeded. */
  baselineErrors?: WordErrors;
  latencyMs: number;
  status?: number;
  /** Why the call failed: the server's error code, a transport error, or `bad_response`. */
  errorCode?: string;
}

export interface AccuracyRun {
  /** In manifest order; items never sent (interrupted runs) are left out. */
  items: AccuracyItemResult[];
  isInterrupted: boolean;
}

export async function runAccuracy(options: AccuracyRunOptions, deps: AccuracyRunDeps): Promise<AccuracyRun> {
  const fields: Array<readonly [string, string]> = [['model', options.model], ...options.extraFields];
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`;
  const results: Array<AccuracyItemResult | undefined> = new Array(options.items.length);
  const keys = occurrenceKeys(options.items.map((item) => item.audio));
  let next = 0;
  let done = 0;

  const worker = async (): Promise<void> => {
    while (next < options.items.length && deps.signal?.aborted !== true) {
      const index = next;
      next += 1;
      const result = await transcribeOne(options.items[index]!, keys[index]!);
      results[index] = result;
      done += 1;
      deps.onItem?.(result, done);
    }
  };

  async function transcribeOne(item: AccuracyItem, key: string): Promise<AccuracyItemResult> {
    const base = { audio: item.audio, ...(item.reference === undefined ? {} : { reference: item.reference }) };
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(await readFile(item.audioPath));
    } catch {
      return { ...base, latencyMs: 0, errorCode: 'audio_unreadable' };
    }
    const multipart = buildMultipartBody(
      {
        field: 'file',
        fileName: basename(item.audioPath),
        contentType: AUDIO_CONTENT_TYPES[extname(item.audioPath).toLowerCase()] ?? 'application/octet-stream',
        bytes,
      },
      fields,
    );
    const controller = new AbortController();
    const timer = deps.clock.setTimeout(() => controller.abort(new RequestAbort('timeout')), options.timeoutMs);
    const onAbort = (): void => controller.abort(new RequestAbort('interrupted'));
    deps.signal?.addEventListener('abort', onAbort, { once: true });
    const startMs = deps.clock.nowMs();
    let status: number | undefined;
    try {
      const response = await deps.fetch(options.endpoint, {
        method: 'POST',
        body: multipart.body,
        headers: { ...headers, 'content-type': multipart.contentType },
        signal: controller.signal,
        redirect: 'manual',
      });
      status = response.status;
      const text = await readText(response, controller.signal);
      const latencyMs = deps.clock.nowMs() - startMs;
      if (status < 200 || status >= 300) return { ...base, latencyMs, status, errorCode: errorCodeFromBody(text, status) };
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      if (!isTranscriptionJson(body)) return { ...base, latencyMs, status, errorCode: 'bad_response' };
      const hypothesis = body.text;
      const baselineText = options.baseline?.get(key);
      return {
        ...base,
        hypothesis,
        ...(item.reference === undefined ? {} : { errors: countWordErrors(item.reference, hypothesis) }),
        ...(baselineText === undefined ? {} : { baselineErrors: countWordErrors(baselineText, hypothesis) }),
        latencyMs,
        status,
      };
    } catch (err) {
      return {
        ...base,
        latencyMs: deps.clock.nowMs() - startMs,
        ...(status === undefined ? {} : { status }),
        errorCode: toTransportErrorCode(err, controller.signal),
      };
    } finally {
      timer.cancel();
      deps.signal?.removeEventListener('abort', onAbort);
    }
  }

  await Promise.all(Array.from({ length: Math.min(options.concurrency, options.items.length) }, () => worker()));
  return {
    items: results.filter((result): result is AccuracyItemResult => result !== undefined),
    isInterrupted: deps.signal?.aborted === true,
  };
}
