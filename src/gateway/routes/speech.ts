/**
 * POST /v1/audio/speech: JSON body → sentences → one scheduler stream → each chunk resampled to
 * 24 kHz → encoded in the call's response_format → written as it comes (a chunked audio body, or
 * SSE `speech.audio.delta` events then `speech.audio.done`).
 *
 * The response opens with the first encoded bytes: an error before then answers with its status
 * and the OpenAI envelope. After it, an SSE call ends with an `error` event carrying the envelope;
 * an audio call is aborted (its connection destroyed before the chunked body's last chunk), so the
 * client sees a failed transfer, never a short file that looks whole. A client that leaves cancels
 * the stream (its instance is freed at once) and kills the call's encoder.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { Value } from '@sinclair/typebox/value';
import {
  MAX_SPEECH_INPUT_CHARS,
  MAX_SPEECH_INSTRUCTIONS_CHARS,
  MAX_SPEECH_SPEED,
  MIN_SPEECH_SPEED,
  SPEECH_RESPONSE_FORMATS,
  SPEECH_SAMPLE_RATE_HZ,
  SPEECH_STREAM_FORMATS,
  SpeechBodySchema,
  type SpeechAudioDeltaEvent,
  type SpeechAudioDoneEvent,
  type SpeechFields,
  type SpeechResponseFormat,
  type SpeechStreamFormat,
} from '../../api/speech.js';
import { errors } from '../../core/error-catalog.js';
import type { ServiceError } from '../../core/errors.js';
import { createFirKernel, type FirKernel } from '../audio/fir-kernel.js';
import { floatToPcm16, pcm16LittleEndian } from '../audio/pcm16.js';
import { createStreamResampler, type StreamResampler } from '../audio/resampler.js';
import { toHttpError, toServiceError } from '../error-mapping.js';
import type { CatalogEntry } from '../../scheduler/index.js';
import type { GatewayDeps, GatewayOptions, SpeechModelSettings } from '../gateway-types.js';
import { createSpeechEncoder, SPEECH_CONTENT_TYPES } from '../speech/speech-encoder.js';
import { isBlankSpeechText, splitSpeechText } from '../speech/split-text.js';
import { voiceAliasesOf } from '../speech/voice-aliases.js';
import { createCallRecord, noteDispatch } from '../call-record.js';
import { openCall, type CallContext } from './call-context.js';

/**
 * Largest JSON body: 4096 characters of input and of instructions, each up to 12 bytes as JSON
 * escapes (a surrogate pair as two \uXXXX), and the other fields.
 */
const MAX_SPEECH_BODY_BYTES = 128 * 1024;
/** gateway.speechBufferBytes's default (config/schema.ts): 16 MiB hold the longest input's audio (4096 characters, about 5 minutes) in every format. */
export const DEFAULT_SPEECH_BUFFER_BYTES = 16 * 1024 * 1024;
const KNOWN_FIELDS = new Set(Object.keys(SpeechBodySchema.properties));

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isOneOf<T extends string>(list: readonly T[], value: unknown): value is T {
  return typeof value === 'string' && (list as readonly string[]).includes(value);
}

/**
 * Validates a parsed JSON body. Each rule has its own code: input_empty, input_too_long,
 * unsupported_response_format, unsupported_stream_format, speed_out_of_range; anything else is
 * missing_parameter or invalid_parameter, with the offending parameter named.
 */
export function parseSpeechBody(body: unknown): SpeechFields {
  if (!isRecord(body)) throw errors.invalidParameter({ param: 'body', expected: 'a JSON object', got: body });
  for (const key of Object.keys(body)) {
    if (!KNOWN_FIELDS.has(key)) throw errors.invalidParameter({ param: key, expected: 'a known parameter', got: key });
  }
  for (const param of ['model', 'input', 'voice'] as const) {
    if (body[param] === undefined || body[param] === null || body[param] === '') {
      if (param === 'input' && body[param] === '') throw errors.inputEmpty();
      throw errors.missingParameter({ param });
    }
  }
  const input = body.input;
  if (typeof input !== 'string') throw errors.invalidParameter({ param: 'input', expected: 'a string', got: input });
  const characters = [...input].length;
  if (characters > MAX_SPEECH_INPUT_CHARS) throw errors.inputTooLong({ characters, maxCharacters: MAX_SPEECH_INPUT_CHARS });
  if (isBlankSpeechText(input)) throw errors.inputEmpty();
  const responseFormat = body.response_format ?? 'mp3';
  if (!isOneOf(SPEECH_RESPONSE_FORMATS, responseFormat)) {
    throw errors.unsupportedResponseFormat({ got: responseFormat, formats: SPEECH_RESPONSE_FORMATS });
  }
  const streamFormat = body.stream_format ?? 'audio';
  if (!isOneOf(SPEECH_STREAM_FORMATS, streamFormat)) {
    throw errors.unsupportedStreamFormat({ got: streamFormat, formats: SPEECH_STREAM_FORMATS });
  }
  const speed = body.speed ?? 1;
  if (typeof speed !== 'number' || !Number.isFinite(speed) || speed < MIN_SPEECH_SPEED || speed > MAX_SPEECH_SPEED) {
    throw errors.speedOutOfRange({ got: speed, min: MIN_SPEECH_SPEED, max: MAX_SPEECH_SPEED });
  }
  const instructions = body.instructions;
  if (instructions !== undefined && (typeof instructions !== 'string' || [...instructions].length > MAX_SPEECH_INSTRUCTIONS_CHARS)) {
    throw errors.invalidParameter({
      param: 'instructions',
      expected: `a string of at most ${MAX_SPEECH_INSTRUCTIONS_CHARS} characters`,
      got: typeof instructions === 'string' ? `${[...instructions].length} characters` : instructions,
    });
  }
  const first = Value.Errors(SpeechBodySchema, Value.Default(SpeechBodySchema, structuredClone(body))).First();
  if (first !== undefined) {
    const param = first.path.split('/')[1] ?? 'body';
    const expected = param === 'voice' ? 'a voice name or {"id": name}' : `a valid value (${first.message})`;
    throw errors.invalidParameter({ param, expected, got: first.value });
  }
  const voice = body.voice as string | { id: string };
  return {
    model: body.model as string,
    input,
    voice: typeof voice === 'string' ? voice : voice.id,
    responseFormat,
    speed,
    streamFormat,
  };
}

/**
 * Retry-After of a call for a name that follows the catalogue of a model that has declared no
 * voice yet (its instances are loading, or a gateway thread has not been sent the catalogue yet).
 */
const CATALOG_PENDING_RETRY_AFTER_MS = 1000;

/**
 * The engine voice id for a requested voice: an alias of the model (OpenAI's names: its fixed
 * table, and the names laid onto its catalogue, speech/voice-aliases.ts), or a voice its instances
 * declared. Alias lookups use own properties only ("constructor" is no voice). Once the model has
 * declared its voices, an alias of a voice it does not serve (left out by its `voices` option) is
 * no voice either: GET /v1/audio/voices does not list it, and its instances would refuse it.
 * @throws unknown_voice; no_ready_instance for a name that follows the catalogue of a model that
 *   has declared no voice yet (isAwaitingCatalog)
 */
export function resolveVoice(
  voice: string,
  context: { model: string; settings: SpeechModelSettings; catalog: readonly CatalogEntry[] },
): string {
  const aliases = voiceAliasesOf(context.settings, context.catalog);
  const voices = context.catalog.filter((entry) => entry.kind === 'voice');
  if (Object.hasOwn(aliases, voice)) {
    const target = aliases[voice]!;
    if (voices.length === 0 || voices.some((entry) => entry.name === target)) return target;
    throw errors.unknownVoice({ model: context.model, voice });
  }
  if (context.catalog.some((entry) => entry.name === voice)) return voice;
  if (isAwaitingCatalog(voice, context)) {
    throw errors.noReadyInstance({ model: context.model, retryAfterMs: CATALOG_PENDING_RETRY_AFTER_MS });
  }
  throw errors.unknownVoice({ model: context.model, voice });
}

/**
 * resolveVoice, after waking the model and waiting for it when the voice is a name that follows the
 * catalogue of a model that has declared no voice yet (isAwaitingCatalog): the voice the name falls
 * on is known once an instance has loaded and declared its voices. The wait is a call held for a
 * waking model's (up to the model's wakeTimeoutMs; a failed wake answers with its own error).
 * Without a lifecycle, nothing wakes: resolveVoice answers.
 * @throws as resolveVoice, and the errors of a failed wake
 */
export async function resolveVoiceAfterWake(
  voice: string,
  context: { model: string; settings: SpeechModelSettings; deps: Pick<GatewayDeps, 'voices' | 'lifecycle'> },
): Promise<string> {
  const { model, settings, deps } = context;
  let catalog = deps.voices.catalog(model);
  if (deps.lifecycle !== undefined && isAwaitingCatalog(voice, { settings, catalog })) {
    await deps.lifecycle.wake(model, { isWaiting: true });
    catalog = deps.voices.catalog(model);
  }
  return resolveVoice(voice, { model, settings, catalog });
}

/**
 * The voice is a name that follows the model's catalogue, and the model has declared no voice yet
 * (none of its instances has loaded since the server started, or a gateway thread has not been sent
 * the catalogue): which voice the name falls on is not known.
 */
function isAwaitingCatalog(voice: string, context: { settings: SpeechModelSettings; catalog: readonly CatalogEntry[] }): boolean {
  return (
    !context.catalog.some((entry) => entry.kind === 'voice') &&
    !Object.hasOwn(context.settings.voiceAliases, voice) &&
    (context.settings.catalogVoiceAliases ?? []).includes(voice)
  );
}

/** `usage` of speech.audio.done: characters in, whole seconds of audio out (rounded up). */
export function speechUsage(input: string, audioSamples: number): SpeechAudioDoneEvent['usage'] {
  const inputTokens = [...input].length;
  const outputTokens = Math.ceil(audioSamples / SPEECH_SAMPLE_RATE_HZ);
  return { input_tokens: inputTokens, output_tokens: outputTokens, total_tokens: inputTokens + outputTokens };
}

function checkContentType(contentType: string | undefined): void {
  const mediaType = contentType?.split(';')[0]?.trim().toLowerCase();
  if (mediaType !== 'application/json') throw errors.invalidContentType({ contentType, expected: 'application/json' });
}

function parseJson(body: unknown): unknown {
  const text = Buffer.isBuffer(body) ? body.toString('utf8') : '';
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw errors.invalidParameter({ param: 'body', expected: 'a JSON object', got: (err as Error).message });
  }
}

/**
 * Resolves when `res` can take more, or has closed. What counts is its socket: a response not
 * attached by an HTTP server's connection listener (fastify's inject) never emits 'drain' itself.
 */
function drained(res: ServerResponse): Promise<void> {
  const socket = res.socket;
  if (!res.writableNeedDrain || res.destroyed || (socket !== null && !socket.writableNeedDrain)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      socket?.off('drain', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
    socket?.on('drain', done);
  });
}

function toFloat(samples: Int16Array): Float32Array {
  const out = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i += 1) out[i] = samples[i]! / 32768;
  return out;
}

/**
 * What a call whose engine said nothing ("...", an emoji alone: flite and Festival give no audio)
 * answers: 100 ms of silence. Without it, mp3, opus and aac came out as files no decoder reads (an
 * ID3 tag alone, an Ogg header alone, no bytes at all), and wav and pcm as no audio.
 */
const SILENCE_FOR_NO_AUDIO_SAMPLES = SPEECH_SAMPLE_RATE_HZ / 10;

interface SpeechCall {
  model: string;
  fields: SpeechFields;
  voice: string;
  sentences: string[];
  settings: SpeechModelSettings;
  arrivedMs: number;
  /** The call's deadline in milliseconds from its arrival (arrivedMs). */
  timeoutMs: number;
  priority: CallContext['priority'];
  signal: AbortSignal;
}

/** Runs one call's stream to its end; see the file comment for what an error does at each stage. */
async function synthesize(
  call: SpeechCall,
  context: { request: FastifyRequest; reply: FastifyReply; options: GatewayOptions; deps: GatewayDeps; kernel: FirKernel },
): Promise<void> {
  const { request, reply, deps } = context;
  const { fields, model } = call;
  const res = reply.raw;
  const isSse = fields.streamFormat === 'sse';
  let isOpen = false;
  let sentSamples = 0;
  const open = () => {
    if (isOpen) return;
    isOpen = true;
    reply.hijack();
    res.writeHead(200, {
      'content-type': isSse ? 'text/event-stream; charset=utf-8' : SPEECH_CONTENT_TYPES[fields.responseFormat],
      'cache-control': 'no-cache',
      'x-request-id': String(request.id),
      ...(isSse ? { connection: 'keep-alive' } : {}),
    });
    deps.metrics.speechFirstByte.observe({ model, format: fields.responseFormat }, (deps.clock.nowMs() - call.arrivedMs) / 1000);
  };
  const writeEvent = (event: SpeechAudioDeltaEvent | SpeechAudioDoneEvent | Record<string, unknown>) => {
    res.write(`data: ${JSON.stringify(event)}\n\n`);
  };
  const stream = deps.openStream(
    model,
    {
      requestId: String(request.id),
      resource: call.settings.hasVoiceResources ? call.voice : null,
      params: { sentences: call.sentences, voice: call.voice, speed: fields.speed },
      body: new Uint8Array(0),
    },
    {
      // The deadline counts from the call's arrival: a wait for a waking model's voices used part of it.
      timeoutMs: Math.max(1, call.timeoutMs - (deps.clock.nowMs() - call.arrivedMs)),
      signal: call.signal,
      priority: call.priority,
      onDispatched: (dispatch) => {
        if (request.voxmuxCall !== undefined) noteDispatch(request.voxmuxCall, dispatch, deps.clock.nowMs());
      },
    },
  );
  const chunks = stream[Symbol.asyncIterator]();
  const first = chunks.next();
  // A stream the scheduler refuses (queue full, no instance, shutting down) has failed before the
  // next turn of the event loop: it answers without an encoder. Any other starts its encoder now,
  // so that ffmpeg's start-up overlaps the synthesis of the first sentence.
  first.catch(() => undefined);
  const isRefused = await Promise.race([
    first.then(
      () => false,
      () => true,
    ),
    new Promise<boolean>((resolve) => setImmediate(() => resolve(false))),
  ]);
  if (isRefused) await first;
  const encoder = createSpeechEncoder({
    format: fields.responseFormat,
    ffmpegPath: context.options.ffmpegPath ?? 'ffmpeg',
    onData: (bytes) => {
      if (res.destroyed) return;
      open();
      if (isSse) writeEvent({ type: 'speech.audio.delta', audio: Buffer.from(bytes).toString('base64') });
      else res.write(bytes);
    },
  });
  const onAbort = () => encoder.destroy();
  call.signal.addEventListener('abort', onAbort, { once: true });
  if (call.signal.aborted) encoder.destroy();
  const emit = async (samples: Float32Array) => {
    if (samples.length === 0) return;
    sentSamples += samples.length;
    // Kept current, so that a call cut short is recorded with the audio made until then.
    if (request.voxmuxCall !== undefined) request.voxmuxCall.audioOutSeconds = sentSamples / SPEECH_SAMPLE_RATE_HZ;
    await encoder.write(floatToPcm16(samples));
  };
  const bufferBytes = context.options.speechBufferBytes ?? DEFAULT_SPEECH_BUFFER_BYTES;
  let resampler: StreamResampler | undefined;
  let sourceRateHz = 0;
  // A client that stops reading must not hold the call past its deadline (or its stream's end):
  // the wait for the socket to drain gives way to either.
  const stopped = new Promise<void>((resolve) => {
    if (call.signal.aborted) resolve();
    else call.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  const streamEnded = stream.done.then(
    () => undefined,
    () => undefined,
  );
  try {
    for (let next = await first; next.done !== true; next = await chunks.next()) {
      const chunk = next.value;
      const rateHz = chunk.meta.sampleRate;
      if (typeof rateHz !== 'number' || !Number.isInteger(rateHz) || rateHz <= 0) {
        throw errors.internal({
          cause: new Error(`Expected a stream chunk's meta.sampleRate to be a positive integer: got ${String(rateHz)}`),
        });
      }
      if (rateHz !== sourceRateHz) {
        if (resampler !== undefined) await emit(resampler.flush());
        resampler = createStreamResampler({ fromRateHz: rateHz, toRateHz: SPEECH_SAMPLE_RATE_HZ, kernel: context.kernel });
        sourceRateHz = rateHz;
      }
      await emit(resampler!.push(toFloat(pcm16LittleEndian(chunk.bytes, 0, chunk.bytes.length >> 1))));
      // Audio made faster than the client reads it waits in the response, up to speechBufferBytes, so
      // that the stream ends (and frees its instance) at the synthesis's pace. Beyond that, the reader
      // holds the stream back (the scheduler's credit then stops the instance) until the deadline.
      if (res.writableLength > bufferBytes) await Promise.race([drained(res), stopped, streamEnded]);
      call.signal.throwIfAborted();
    }
    if (resampler !== undefined) await emit(resampler.flush());
    if (sentSamples === 0) await emit(new Float32Array(SILENCE_FOR_NO_AUDIO_SAMPLES));
    await encoder.end();
    call.signal.throwIfAborted();
    open();
    if (isSse) writeEvent({ type: 'speech.audio.done', usage: speechUsage(fields.input, sentSamples) });
    res.end();
  } catch (err) {
    encoder.destroy();
    stream.cancel();
    if (!isOpen) throw err;
    const error = toServiceError(err, { maxBodyBytes: 0, contentType: undefined });
    request.voxmuxOutcome = error.kind;
    request.voxmuxCode = error.code;
    if (error.kind === 'internal') deps.log.error({ err: error.cause ?? err, code: error.code, requestId: request.id }, 'request failed');
    if (isSse && error.kind !== 'cancelled' && !res.destroyed) {
      writeEvent({ type: 'error', ...toHttpError(error).body });
      res.end();
    } else {
      res.destroy();
    }
    throw new StreamFailedAfterOpen(error);
  } finally {
    call.signal.removeEventListener('abort', onAbort);
    deps.metrics.speechAudio.inc({ model }, sentSamples / SPEECH_SAMPLE_RATE_HZ);
    if (request.voxmuxCall !== undefined) request.voxmuxCall.resultMs = deps.clock.nowMs();
  }
}

/** A failure after the response opened: already answered (an error event, or an aborted body). */
class StreamFailedAfterOpen extends Error {
  readonly error: ServiceError;
  constructor(error: ServiceError) {
    super(error.message);
    this.error = error;
  }
}

export function registerSpeechRoute(app: FastifyInstance, options: GatewayOptions, deps: GatewayDeps): void {
  let kernel: FirKernel | undefined;
  void app.register(async (scope) => {
    // The body is read raw, so that a body that is not JSON gets this endpoint's own answer.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_SPEECH_BODY_BYTES }, (_request, body, done) => done(null, body));
    scope.post('/v1/audio/speech', async (request: FastifyRequest, reply: FastifyReply) => {
      let format: SpeechResponseFormat | 'invalid' = 'invalid';
      let streamFormat: SpeechStreamFormat | 'invalid' = 'invalid';
      const record = createCallRecord('speech');
      request.voxmuxCall = record;
      try {
        const { abort, arrivedMs, priority, deadlineMs } = openCall(request, reply, deps, options);
        checkContentType(request.headers['content-type']);
        const fields = parseSpeechBody(parseJson(request.body));
        format = fields.responseFormat;
        streamFormat = fields.streamFormat;
        record.model = fields.model;
        const model = deps.models.resolve(fields.model);
        if (model === undefined) throw errors.modelNotFound({ model: fields.model });
        record.model = model;
        const entry = deps.models.list().find((m) => m.id === model);
        const settings = entry?.speech;
        if (entry?.task !== 'speech' || settings === undefined) {
          throw errors.modelTaskMismatch({ model, task: entry?.task ?? 'transcription', endpoint: 'POST /v1/audio/speech' });
        }
        const voice = await resolveVoiceAfterWake(fields.voice, { model, settings, deps });
        const sentences = splitSpeechText(fields.input);
        if (sentences.length === 0) throw errors.inputEmpty();
        kernel ??= createFirKernel();
        await synthesize(
          {
            model,
            fields,
            voice,
            sentences,
            settings,
            arrivedMs,
            timeoutMs: deadlineMs,
            priority,
            signal: abort.signal,
          },
          { request, reply, options, deps, kernel },
        );
        deps.metrics.speechCalls.inc({ format, stream_format: streamFormat, outcome: 'ok' });
        return reply;
      } catch (err) {
        const error =
          err instanceof StreamFailedAfterOpen
            ? err.error
            : toServiceError(err, { maxBodyBytes: MAX_SPEECH_BODY_BYTES, contentType: undefined });
        deps.metrics.speechCalls.inc({ format, stream_format: streamFormat, outcome: error.code });
        if (err instanceof StreamFailedAfterOpen) return reply;
        throw err;
      }
    });
  });
}
