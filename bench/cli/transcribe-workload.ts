/**
 * The transcription workload: one multipart POST to an OpenAI-compatible
 * /v1/audio/transcriptions endpoint per request, with `stream=true` (SSE) when asked.
 */
import {
  isOpenAiErrorEnvelope,
  isTranscriptionJson,
  isTranscriptTextDeltaEvent,
  isTranscriptTextDoneEvent,
} from '../../src/api/openai-audio.js';
import type { AudioInput } from './audio-input.js';
import { buildMultipartBody, type MultipartBody } from './multipart-body.js';
import { toTransportErrorCode, type RequestContext, type RequestOutcome, type Workload } from './workload.js';

/** A response body larger than this is an error: transcripts are small, and memory is bounded. */
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

export interface TranscribeWorkloadOptions {
  /** The full URL of the transcriptions endpoint. */
  endpoint: string;
  model: string;
  inputs: readonly AudioInput[];
  /** Sends `stream=true` and reads the answer as SSE. */
  isStreaming: boolean;
  /** Sent as `response_format` unless it is `json` (the default of every server). */
  responseFormat: string;
  /** Extra multipart fields, such as `language=en`, sent with every request. */
  extraFields: ReadonlyArray<readonly [string, string]>;
  apiKey?: string;
}

export interface TranscribeWorkloadDeps {
  fetch: typeof globalThis.fetch;
}

export function createTranscribeWorkload(options: TranscribeWorkloadOptions, deps: TranscribeWorkloadDeps): Workload {
  const fields: [string, string][] = [['model', options.model]];
  if (options.responseFormat !== 'json') fields.push(['response_format', options.responseFormat]);
  if (options.isStreaming) fields.push(['stream', 'true']);
  for (const [key, value] of options.extraFields) fields.push([key, value]);
  // Every request of an input sends the same bytes: each body is encoded once, here.
  const inputs = options.inputs.map((input) => ({
    input,
    multipart: buildMultipartBody({ field: 'file', fileName: input.fileName, contentType: input.contentType, bytes: input.bytes }, fields),
  }));
  const known = options.inputs.filter((input) => input.audioSeconds !== undefined);
  const meanAudioSeconds =
    known.length === options.inputs.length && known.length > 0
      ? known.reduce((sum, input) => sum + (input.audioSeconds ?? 0), 0) / known.length
      : undefined;
  const headers: Record<string, string> = { accept: options.isStreaming ? 'text/event-stream' : 'application/json' };
  if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`;
  const settings: Record<string, string> = { responseFormat: options.responseFormat };
  for (const [key, value] of options.extraFields) settings[`field.${key}`] = value;

  return {
    info: {
      kind: 'transcribe',
      endpoint: options.endpoint,
      model: options.model,
      isStreaming: options.isStreaming,
      inputCount: options.inputs.length,
      ...(meanAudioSeconds === undefined ? {} : { meanAudioSeconds }),
      settings,
    },
    async makeRequest(context: RequestContext): Promise<RequestOutcome> {
      const entry = inputs[context.sequence % inputs.length]!;
      const startMs = context.clock.nowMs();
      const measured = await send(entry.multipart, context);
      return {
        startMs,
        endMs: context.clock.nowMs(),
        ...measured,
        ...(entry.input.audioSeconds === undefined ? {} : { audioSeconds: entry.input.audioSeconds }),
      };
    },
  };

  async function send(multipart: MultipartBody, context: RequestContext): Promise<Pick<RequestOutcome, 'status' | 'errorCode' | 'ttfbMs'>> {
    const startMs = context.clock.nowMs();
    let status: number | undefined;
    try {
      // NOTE: redirects are never followed, so every byte goes to the URL the user named.
      const response = await deps.fetch(options.endpoint, {
        method: 'POST',
        body: multipart.body,
        headers: { ...headers, 'content-type': multipart.contentType },
        signal: context.signal,
        redirect: 'manual',
      });
      status = response.status;
      if (status >= 300 && status < 400) {
        await response.body?.cancel();
        return { status, errorCode: 'redirect' };
      }
      const contentType = response.headers.get('content-type') ?? '';
      if (status < 200 || status >= 300) {
        const text = await readText(response, context.signal);
        return { status, errorCode: errorCodeFromBody(text, status) };
      }
      if (contentType.includes('text/event-stream')) return { status, ...(await readSse(response, context, startMs)) };
      const isChunked = (response.headers.get('transfer-encoding') ?? '').includes('chunked');
      let ttfbMs: number | undefined;
      const text = await readText(response, context.signal, () => {
        if (isChunked) ttfbMs = context.clock.nowMs() - startMs;
      });
      const errorCode = validateBody(text, contentType);
      return {
        status,
        ...(errorCode === undefined ? {} : { errorCode }),
        ...(ttfbMs === undefined || errorCode !== undefined ? {} : { ttfbMs }),
      };
    } catch (err) {
      return { ...(status === undefined ? {} : { status }), errorCode: toTransportErrorCode(err, context.signal) };
    }
  }

  function validateBody(text: string, contentType: string): string | undefined {
    const isJsonFormat = options.responseFormat === 'json' || options.responseFormat === 'verbose_json';
    if (!isJsonFormat && !contentType.includes('application/json')) return undefined;
    try {
      return isTranscriptionJson(JSON.parse(text)) ? undefined : 'bad_response';
    } catch {
      return 'bad_response';
    }
  }
}

class ResponseTooLarge extends Error {
  readonly code = 'response_too_large';
}

/**
 * Reads a body as UTF-8 text with a size bound (beyond it, throws an error whose `code` is
 * `response_too_large`); `onFirstChunk` runs when the first bytes arrive.
 */
export async function readText(response: Response, signal: AbortSignal, onFirstChunk?: () => void): Promise<string> {
  if (response.body === null) return '';
  const decoder = new TextDecoder();
  const reader = response.body.getReader();
  let text = '';
  let bytes = 0;
  let isFirst = true;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (isFirst && value.byteLength > 0) {
      isFirst = false;
      onFirstChunk?.();
    }
    bytes += value.byteLength;
    if (bytes > MAX_RESPONSE_BYTES) {
      await reader.cancel();
      throw new ResponseTooLarge('The response body is too large');
    }
    text += decoder.decode(value, { stream: true });
    if (signal.aborted) throw signal.reason;
  }
  return text + decoder.decode();
}

async function readSse(
  response: Response,
  context: RequestContext,
  startMs: number,
): Promise<Pick<RequestOutcome, 'errorCode' | 'ttfbMs'>> {
  const parser = createSseParser();
  let ttfbMs: number | undefined;
  let firstEventMs: number | undefined;
  let isDone = false;
  const handle = (events: SseEvent[]): string | undefined => {
    for (const event of events) {
      if (event.data === '[DONE]') {
        isDone = true;
        continue;
      }
      firstEventMs ??= context.clock.nowMs() - startMs;
      let payload: unknown;
      try {
        payload = JSON.parse(event.data);
      } catch {
        return 'bad_response';
      }
      if (event.event === 'error' || (payload as { type?: unknown }).type === 'error' || isOpenAiErrorEnvelope(payload)) {
        return errorCodeFromPayload(payload) ?? 'stream_error';
      }
      if (isTranscriptTextDeltaEvent(payload)) ttfbMs ??= context.clock.nowMs() - startMs;
      if (isTranscriptTextDoneEvent(payload)) isDone = true;
    }
    return undefined;
  };
  if (response.body === null) return { errorCode: 'incomplete_stream' };
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    if (bytes > MAX_RESPONSE_BYTES) {
      await reader.cancel();
      return { errorCode: 'response_too_large' };
    }
    const errorCode = handle(parser.push(decoder.decode(value, { stream: true })));
    if (errorCode !== undefined) {
      await reader.cancel();
      return { errorCode };
    }
  }
  const errorCode = handle(parser.end(decoder.decode()));
  if (errorCode !== undefined) return { errorCode };
  if (!isDone) return { errorCode: 'incomplete_stream' };
  // A stream whose text arrives only in the done event still has a first byte: that event.
  const first = ttfbMs ?? firstEventMs;
  return first === undefined ? {} : { ttfbMs: first };
}

/** The error code of a non-2xx answer: the OpenAI envelope's code or type, else http_<status>. */
export function errorCodeFromBody(text: string, status: number): string {
  try {
    return errorCodeFromPayload(JSON.parse(text)) ?? `http_${status}`;
  } catch {
    return `http_${status}`;
  }
}

function errorCodeFromPayload(payload: unknown): string | undefined {
  if (isOpenAiErrorEnvelope(payload)) {
    const { code, type } = payload.error;
    if (typeof code === 'string' && code.length > 0) return code;
    if (typeof type === 'string' && type.length > 0) return type;
    return undefined;
  }
  const inner = payload as { code?: unknown; error?: unknown };
  if (typeof inner.code === 'string' && inner.code.length > 0) return inner.code;
  return undefined;
}

export interface SseEvent {
  /** The `event:` field, when the server sent one. */
  event?: string;
  /** The `data:` lines joined by newlines. */
  data: string;
}

export interface SseParser {
  /** Feeds decoded text; returns the events it completed. */
  push(text: string): SseEvent[];
  /** Feeds the last text and flushes an event left without its blank line. */
  end(text?: string): SseEvent[];
}

/** An incremental Server-Sent Events parser (the WHATWG rules that matter for JSON events). */
export function createSseParser(): SseParser {
  let buffer = '';
  let dataLines: string[] = [];
  let eventName: string | undefined;

  const takeLine = (line: string, out: SseEvent[]): void => {
    if (line === '') {
      if (dataLines.length > 0) out.push({ ...(eventName === undefined ? {} : { event: eventName }), data: dataLines.join('\n') });
      dataLines = [];
      eventName = undefined;
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') dataLines.push(value);
    else if (field === 'event') eventName = value;
  };

  const drain = (isFinal: boolean): SseEvent[] => {
    const out: SseEvent[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(buffer);
      // A lone trailing \r may be the first half of \r\n: wait for more text.
      if (match === null || (match[0] === '\r' && match.index === buffer.length - 1 && !isFinal)) break;
      takeLine(buffer.slice(0, match.index), out);
      buffer = buffer.slice(match.index + match[0].length);
    }
    if (isFinal) {
      if (buffer.length > 0) takeLine(buffer, out);
      buffer = '';
      takeLine('', out);
    }
    return out;
  };

  return {
    push(text) {
      buffer += text;
      return drain(false);
    },
    end(text = '') {
      buffer += text;
      return drain(true);
    },
  };
}
