/**
 * POST /v1/audio/transcriptions: multipart upload → decode → scheduler → response format or SSE; and the
 * same path for POST /v1/audio/translations (routes/translations.ts), with OpenAI's fewer fields.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Value } from '@sinclair/typebox/value';
import { FIELD_RESPONSE_FORMATS, TranscriptionFieldsSchema, type TranscriptionFields } from '../../api/transcription.js';
import { errors } from '../../core/error-catalog.js';
import type { Clock, TimerHandle } from '../../core/clock.js';
import type { Dispatch, SubmitOptions, TranscriptionRequest, TranscriptionTask } from '../../scheduler/index.js';
import type { GatewayDeps, GatewayOptions, ModelEntry } from '../gateway-types.js';
import { invariant } from '../../core/invariant.js';
import { toDiarizedStreamEvents, toDiarizedTranscription } from '../diarization/assign-speakers.js';
import { diarizeRecording } from '../diarization/diarize-recording.js';
import { renderTranscript, toStreamEvents, type LanguageSource } from '../transcript-formats.js';
import { toHttpError, toServiceError } from '../error-mapping.js';
import { DEFAULT_MIN_PAUSE_MS, DEFAULT_SPEECH_THRESHOLD, planCuts, toPieceRanges } from '../pieces/split-policy.js';
import { transcribeInPieces, type PieceRange } from '../pieces/transcribe-in-pieces.js';
import { readIntoPool, type UploadPool } from '../upload-pool.js';
import { createCallRecord, noteDispatch, type CallRecord } from '../call-record.js';
import type { DecodedAudio } from '../audio/index.js';
import { openCall } from './call-context.js';

const KNOWN_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'language',
  'prompt',
  'response_format',
  'temperature',
  'timestamp_granularities',
  'stream',
]);

/** What differs between the routes that turn speech into text. */
export interface SpeechToTextEndpoint {
  path: '/v1/audio/transcriptions' | '/v1/audio/translations';
  task: TranscriptionTask;
  /** The form fields the route accepts (OpenAI's, for that endpoint). */
  knownFields: ReadonlySet<string>;
  /** The response formats the route accepts (OpenAI's, for that endpoint). */
  responseFormats: readonly TranscriptionFields['response_format'][];
}

const TRANSCRIPTIONS: SpeechToTextEndpoint = {
  path: '/v1/audio/transcriptions',
  task: 'transcribe',
  knownFields: KNOWN_FIELDS,
  responseFormats: FIELD_RESPONSE_FORMATS,
};
/** Fields the OpenAI API defines that voxmux accepts and ignores, so unmodified clients work. */
const IGNORED_FIELDS = new Set(['chunking_strategy', 'include', 'include[]', 'known_speaker_names', 'known_speaker_references']);

export interface ParsedForm {
  file: Buffer | undefined;
  /** The file part's filename, as the client sent it ('' when it sent none). */
  fileName: string;
  fields: Map<string, string[]>;
}

/** RFC 2046 allows boundaries of 1 to 70 characters; busboy throws a plain Error past 256. */
const MAX_BOUNDARY_CHARS = 70;

function checkBoundary(contentType: string | undefined): void {
  const match = /;\s*boundary\s*=\s*(?:"([^"]*)"|([^;\s]*))/i.exec(contentType ?? '');
  const boundary = match?.[1] ?? match?.[2];
  if (boundary !== undefined && boundary.length > MAX_BOUNDARY_CHARS) {
    throw errors.invalidParameter({
      param: 'content-type',
      expected: `a multipart boundary of 1 to ${MAX_BOUNDARY_CHARS} characters`,
      got: `${boundary.length} characters`,
    });
  }
}

async function readForm(request: FastifyRequest, uploads: UploadPool, maxBodyBytes: number): Promise<ParsedForm> {
  if (!request.isMultipart()) throw errors.invalidContentType({ contentType: request.headers['content-type'] });
  checkBoundary(request.headers['content-type']);
  const fields = new Map<string, string[]>();
  let file: Buffer | undefined;
  let fileName = '';
  try {
    for await (const part of request.parts()) {
      if (typeof part.fieldname !== 'string' || part.fieldname === '') {
        if (part.type === 'file') await part.toBuffer();
        throw errors.invalidParameter({
          param: 'body',
          expected: 'a name in each part (Content-Disposition: form-data; name="...")',
          got: 'a part without one',
        });
      }
      if (part.type === 'file') {
        if (part.fieldname !== 'file') {
          await part.toBuffer();
          throw errors.invalidParameter({ param: part.fieldname, expected: 'no file field other than file', got: part.fieldname });
        }
        fileName = part.filename ?? '';
        const declared = Number(request.headers['content-length']);
        // The file is part of the body, so the body's declared length bounds it.
        file = Number.isSafeInteger(declared) && declared > 0 ? await readIntoPool(part.file, declared, uploads) : await part.toBuffer();
        if (part.file.truncated) throw errors.bodyTooLarge({ maxBodyBytes });
      } else if (part.fieldname === 'file') {
        throw errors.invalidParameter({ param: 'file', expected: 'a file upload', got: 'a text field' });
      } else {
        const name = part.fieldname.endsWith('[]') && part.fieldname !== 'include[]' ? part.fieldname.slice(0, -2) : part.fieldname;
        const list = fields.get(name) ?? [];
        list.push(String(part.value));
        fields.set(name, list);
      }
    }
  } catch (err) {
    // The form failed once its file was read (too large, a second file, a malformed part after
    // it): nothing will read the file.
    if (file !== undefined) uploads.giveBack(file);
    // The multipart limits allow one file: a second file part, whatever its name, ends the form here.
    if (err instanceof Error && (err as { code?: unknown }).code === 'FST_FILES_LIMIT') {
      throw errors.invalidParameter({ param: 'file', expected: 'one file part', got: 'more than one' });
    }
    throw err;
  }
  return { file, fileName, fields };
}

/**
 * readForm, bounded by the body timeout counted from the call's arrival. A client that stalls, or
 * declares a longer Content-Length than it sends, gets body_timeout; the error handler then closes
 * the connection, which ends the read left behind (its upload, if any, goes back to the pool).
 */
export async function readFormWithin(
  request: FastifyRequest,
  context: { uploads: UploadPool; options: GatewayOptions; clock: Clock; arrivedMs: number },
): Promise<ParsedForm> {
  const { uploads, options, clock } = context;
  const reading = readForm(request, uploads, options.maxBodyBytes);
  let timer: TimerHandle | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    const leftMs = options.bodyTimeoutMs - (clock.nowMs() - context.arrivedMs);
    timer = clock.setTimeout(() => reject(errors.bodyTimeout({ bodyTimeoutMs: options.bodyTimeoutMs })), leftMs);
  });
  try {
    return await Promise.race([reading, expired]);
  } catch (err) {
    reading.then(
      (form) => form.file !== undefined && uploads.giveBack(form.file),
      () => {},
    );
    throw err;
  } finally {
    timer?.cancel();
  }
}

/** Coerces form strings to the schema's types, then validates with TypeBox. */
export function parseFields(raw: Map<string, string[]>, knownFields: ReadonlySet<string> = KNOWN_FIELDS): TranscriptionFields {
  const candidate: Record<string, unknown> = {};
  for (const [name, values] of raw) {
    // The openai SDK sends an object as bracketed keys: chunking_strategy[type]=server_vad, ...
    if (IGNORED_FIELDS.has(name) || IGNORED_FIELDS.has(name.replace(/\[[^\]]*\]$/, ''))) continue;
    if (!knownFields.has(name)) throw errors.invalidParameter({ param: name, expected: 'a known parameter', got: name });
    const last = values.at(-1)!;
    switch (name) {
      case 'timestamp_granularities':
        candidate[name] = values
          .flatMap((v) => v.split(','))
          .map((v) => v.trim())
          .filter((v) => v !== '');
        break;
      case 'temperature': {
        const n = Number(last);
        candidate[name] = last.trim() === '' || !Number.isFinite(n) ? last : n;
        break;
      }
      case 'stream':
        candidate[name] = last === 'true' ? true : last === 'false' ? false : last;
        break;
      default:
        if (values.length > 1) throw errors.invalidParameter({ param: name, expected: 'a single value', got: `${values.length} values` });
        candidate[name] = last;
    }
  }
  if (candidate.model === undefined || candidate.model === '') throw errors.missingParameter({ param: 'model' });
  const withDefaults = Value.Default(TranscriptionFieldsSchema, candidate);
  const first = Value.Errors(TranscriptionFieldsSchema, withDefaults).First();
  if (first !== undefined) {
    const param = first.path.split('/')[1] ?? 'body';
    throw errors.invalidParameter({ param, expected: describeSchema(param), got: first.value });
  }
  const fields = withDefaults as TranscriptionFields;
  if (fields.stream && !['json', 'text', 'diarized_json'].includes(fields.response_format)) {
    throw errors.invalidParameter({ param: 'stream', expected: 'false with response_format srt, vtt or verbose_json', got: true });
  }
  return fields;
}

function describeSchema(param: string): string {
  switch (param) {
    case 'response_format':
      return 'one of json, text, srt, vtt, verbose_json, diarized_json';
    case 'temperature':
      return 'a number from 0 to 1';
    case 'timestamp_granularities':
      return 'word and/or segment';
    case 'stream':
      return 'true or false';
    case 'language':
      return 'an ISO-639-1 language code such as en';
    default:
      return 'a valid value';
  }
}

/**
 * Where verbose_json's language comes from: the call named it; the model knows one language and
 * none was named, so it was assumed, not detected (speech in another language comes back as words
 * of that one); or the engine reported it.
 */
export function languageSourceOf(requested: string | undefined, languages: readonly string[] | undefined): LanguageSource {
  if (requested !== undefined) return 'requested';
  return languages?.length === 1 ? 'assumed' : 'reported';
}

/** Set to `true` on a response whose WAV upload held fewer samples than its header declared. */
export const AUDIO_TRUNCATED_HEADER = 'voxmux-audio-truncated';

const SAMPLE_RATE_HZ = 16_000;

/** The pieces of a recording longer than splitAboveMs, cut at pauses; [] for one left whole. */
async function pieceRangesOf(
  samples: Int16Array,
  context: { options: GatewayOptions; deps: GatewayDeps; signal: AbortSignal },
): Promise<PieceRange[]> {
  const { options, deps } = context;
  if (options.splitAboveMs === 0 || samples.length <= (options.splitAboveMs * SAMPLE_RATE_HZ) / 1000) return [];
  const startMs = deps.clock.nowMs();
  const activity = await deps.voiceActivity.detect(samples, context.signal);
  deps.metrics.voiceActivityDuration.observe({ detector: deps.voiceActivity.name }, (deps.clock.nowMs() - startMs) / 1000);
  const cuts = planCuts(activity, samples.length, {
    sampleRateHz: SAMPLE_RATE_HZ,
    splitAboveMs: options.splitAboveMs,
    pieceTargetMs: options.pieceTargetMs,
    maxPieceMs: options.maxPieceMs,
    minPauseMs: DEFAULT_MIN_PAUSE_MS,
    speechThreshold: DEFAULT_SPEECH_THRESHOLD,
  });
  for (const cut of cuts) deps.metrics.audioCuts.inc({ kind: cut.kind });
  return cuts.length === 0 ? [] : toPieceRanges(cuts, samples.length);
}

/**
 * A streamed call in pieces: the event stream opens with the first piece that has text (an error
 * before then still answers with its status and envelope), each piece's text goes as a delta once
 * it and every piece before it are done, then the done event. An error after the stream opened
 * ends it with an `error` event that carries the OpenAI envelope.
 */
async function streamPieces(context: {
  ranges: readonly PieceRange[];
  transcription: TranscriptionRequest;
  submitOptions: SubmitOptions;
  model: string;
  openStream: () => void;
  writeEvent: (event: unknown) => void;
  deps: GatewayDeps;
  request: FastifyRequest;
  reply: FastifyReply;
}): Promise<boolean> {
  const { deps, writeEvent } = context;
  let isOpen = false;
  let isWhole = false;
  const open = () => {
    if (isOpen) return;
    isOpen = true;
    context.openStream();
  };
  try {
    const result = await transcribeInPieces({
      request: context.transcription,
      ranges: context.ranges,
      sampleRateHz: SAMPLE_RATE_HZ,
      options: context.submitOptions,
      submit: (piece, pieceOptions) => deps.transcribe(context.model, piece, pieceOptions),
      onReady: ({ delta }) => {
        if (delta === '') return;
        open();
        writeEvent({ type: 'transcript.text.delta', delta });
      },
    });
    if (context.request.voxmuxCall !== undefined) context.request.voxmuxCall.resultMs = deps.clock.nowMs();
    open();
    writeEvent({ type: 'transcript.text.done', text: result.text, usage: { type: 'duration', seconds: Math.ceil(result.durationS) } });
    isWhole = true;
  } catch (err) {
    if (!isOpen) throw err;
    const error = toServiceError(err, { maxBodyBytes: 0, contentType: undefined });
    context.request.voxmuxOutcome = error.kind;
    context.request.voxmuxCode = error.code;
    if (error.kind === 'internal')
      deps.log.error({ err: error.cause ?? err, code: error.code, requestId: context.request.id }, 'request failed');
    if (error.kind !== 'cancelled') writeEvent({ type: 'error', ...toHttpError(error).body });
  }
  context.reply.raw.end();
  return isWhole;
}

/** A transcription model's diarization model, as diarizeRecording takes it. */
interface Diarizer {
  model: string;
  wantsSpeechRegions: boolean;
  maxItemMs: number | undefined;
}

/** The diarization model that serves a transcription model's diarized_json. @throws no_diarization_model */
function diarizerOf(model: string, entry: ModelEntry | undefined, deps: GatewayDeps): Diarizer {
  const name = entry?.diarizationModel;
  const settings = deps.models.list().find((m) => m.id === name)?.diarization;
  if (name === undefined || settings === undefined || deps.sequences === undefined) throw errors.noDiarizationModel({ model });
  return { model: name, wantsSpeechRegions: settings.wantsSpeechRegions, maxItemMs: settings.maxItemMs };
}

interface AcceptedUpload {
  fields: TranscriptionFields;
  model: string;
  entry: ModelEntry | undefined;
  /** Set for diarized_json. */
  diarizer: Diarizer | undefined;
  file: Buffer;
  audio: DecodedAudio;
}

/**
 * diarized_json names a known speaker (OpenAI's known_speaker_names[] and known_speaker_references[],
 * also as the Node SDK's extra_body[...] keys) by its label; no engine here matches voices to
 * references, so a call that names them is refused rather than answered with A, B, ...
 * @throws unsupported_option
 */
function refuseKnownSpeakers(fields: ReadonlyMap<string, string[]>): void {
  for (const name of fields.keys()) {
    const match = /(?:^|\[)(known_speaker_names|known_speaker_references)(?:\]|$)/.exec(name);
    if (match !== null) throw errors.knownSpeakersUnsupported({ param: match[1] as 'known_speaker_names' | 'known_speaker_references' });
  }
}

/** Checks a call's fields and model, then decodes its upload. @throws what the call is refused with */
async function acceptUpload(
  form: ParsedForm,
  context: { endpoint: SpeechToTextEndpoint; deps: GatewayDeps; record: CallRecord; signal: AbortSignal },
): Promise<AcceptedUpload> {
  const { endpoint, deps, record } = context;
  const isTranslation = endpoint.task === 'translate';
  if (form.fields.get('response_format')?.at(-1) === 'diarized_json') refuseKnownSpeakers(form.fields);
  const fields = parseFields(form.fields, endpoint.knownFields);
  if (!endpoint.responseFormats.includes(fields.response_format)) {
    const formats = endpoint.responseFormats;
    throw errors.invalidParameter({
      param: 'response_format',
      expected: `one of ${formats.slice(0, -1).join(', ')} or ${formats.at(-1)!}`,
      got: fields.response_format,
    });
  }
  record.model = fields.model;
  const model = deps.models.resolve(fields.model);
  if (model === undefined) throw errors.modelNotFound({ model: fields.model });
  record.model = model;
  const entry = deps.models.list().find((m) => m.id === model);
  if ((entry?.task ?? 'transcription') !== 'transcription' || (isTranslation && entry?.translates !== true)) {
    throw errors.modelTaskMismatch({ model, task: entry?.task ?? 'transcription', endpoint: `POST ${endpoint.path}` });
  }
  const isDiarized = fields.response_format === 'diarized_json';
  const diarizer = isDiarized ? diarizerOf(model, entry, deps) : undefined;
  const languages = entry?.languages;
  if (fields.language !== undefined && languages !== undefined && !languages.includes(fields.language)) {
    throw errors.unsupportedLanguage({ model, language: fields.language, languages });
  }
  if (form.file === undefined) throw errors.missingParameter({ param: 'file' });
  const decodeStartMs = deps.clock.nowMs();
  const audio = await deps.decoder.decode(form.file, context.signal);
  deps.metrics.gatewayDecodeDuration.observe({ format: audio.format }, (deps.clock.nowMs() - decodeStartMs) / 1000);
  return { fields, model, entry, diarizer, file: form.file, audio };
}

export function registerTranscriptionRoute(app: FastifyInstance, options: GatewayOptions, deps: GatewayDeps, uploads: UploadPool): void {
  registerSpeechToTextRoute(app, options, deps, TRANSCRIPTIONS, uploads);
}

/** POST endpoint.path: a transcription (task transcribe) or a translation into English (task translate). */
export function registerSpeechToTextRoute(
  app: FastifyInstance,
  options: GatewayOptions,
  deps: GatewayDeps,
  endpoint: SpeechToTextEndpoint,
  uploads: UploadPool,
): void {
  const isTranslation = endpoint.task === 'translate';
  app.post(endpoint.path, async (request: FastifyRequest, reply: FastifyReply) => {
    // The client may leave at any time: its queued request is then dropped by the scheduler.
    const record = createCallRecord('transcription');
    request.voxmuxCall = record;
    const { abort, arrivedMs, priority, deadlineMs } = openCall(request, reply, deps, options);
    const form = await readFormWithin(request, { uploads, options, clock: deps.clock, arrivedMs });
    // Until the audio is decoded nothing else reads the upload: a call refused by then gives it back.
    const { fields, model, entry, diarizer, file, audio } = await uploads.giveBackOnFailure(form.file, () =>
      acceptUpload(form, { endpoint, deps, record, signal: abort.signal }),
    );
    const isDiarized = diarizer !== undefined;
    const languages = entry?.languages;
    record.audioInSeconds = audio.samples.length / SAMPLE_RATE_HZ;
    // Word timestamps cost the engine a pass of their own (whisper's alignment), and only
    // verbose_json carries them: OpenAI reads timestamp_granularities with verbose_json alone.
    const shouldIncludeWords = fields.response_format === 'verbose_json' && fields.timestamp_granularities.includes('word');
    const transcription = {
      audio: audio.samples,
      language: fields.language ?? null,
      prompt: fields.prompt ?? null,
      wordTimestamps: shouldIncludeWords || isDiarized,
      task: endpoint.task,
      temperature: fields.temperature,
    };
    const ranges = await pieceRangesOf(audio.samples, { options, deps, signal: abort.signal });
    const submitOptions = {
      // The deadline counts from the call's arrival: upload, decoding and pause finding are part of it.
      timeoutMs: Math.max(1, deadlineMs - (deps.clock.nowMs() - arrivedMs)),
      signal: abort.signal,
      requestId: String(request.id),
      priority,
      onDispatched: (dispatch: Dispatch) => noteDispatch(record, dispatch, deps.clock.nowMs()),
    };
    const truncatedHeader: Record<string, string> = audio.isTruncated ? { [AUDIO_TRUNCATED_HEADER]: 'true' } : {};
    const openStream = () => {
      reply.hijack();
      reply.raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        ...truncatedHeader,
      });
    };
    const writeEvent = (event: unknown) => reply.raw.write(`data: ${JSON.stringify(event)}\n\n`);
    if (diarizer !== undefined) {
      // The transcription and the diarization run side by side; when one fails, the other is dropped.
      const sides = new AbortController();
      const onCallAbort = () => sides.abort(abort.signal.reason);
      abort.signal.addEventListener('abort', onCallAbort, { once: true });
      if (abort.signal.aborted) onCallAbort();
      const sideOptions: SubmitOptions = { ...submitOptions, signal: sides.signal };
      const [result, diarization] = await Promise.all([
        ranges.length > 1
          ? transcribeInPieces({
              request: transcription,
              ranges,
              sampleRateHz: SAMPLE_RATE_HZ,
              options: sideOptions,
              submit: (piece, pieceOptions) => deps.transcribe(model, piece, pieceOptions),
            })
          : deps.transcribe(model, transcription, sideOptions),
        diarizeRecording({ ...diarizer, samples: audio.samples, bounds: {}, submitOptions: sideOptions }, deps),
      ])
        .catch((err: unknown) => {
          sides.abort(err);
          throw err;
        })
        .finally(() => abort.signal.removeEventListener('abort', onCallAbort));
      record.resultMs = deps.clock.nowMs();
      uploads.giveBack(file);
      const body = toDiarizedTranscription(result, diarization.segments);
      if (fields.stream) {
        openStream();
        for (const event of toDiarizedStreamEvents(body)) writeEvent(event);
        reply.raw.end();
        return reply;
      }
      return reply.headers(truncatedHeader).type('application/json; charset=utf-8').send(body);
    }
    if (ranges.length > 1) {
      deps.metrics.audioPieces.inc({ model }, ranges.length);
      if (fields.stream) {
        // Given back only when every piece answered: after an error the others' batches may still read it.
        if (await streamPieces({ ranges, transcription, submitOptions, model, openStream, writeEvent, deps, request, reply }))
          uploads.giveBack(file);
        return reply;
      }
    }
    const result =
      ranges.length > 1
        ? await transcribeInPieces({
            request: transcription,
            ranges,
            sampleRateHz: SAMPLE_RATE_HZ,
            options: submitOptions,
            submit: (piece, pieceOptions) => deps.transcribe(model, piece, pieceOptions),
          })
        : await deps.transcribe(model, transcription, submitOptions);
    record.resultMs = deps.clock.nowMs();
    // The result is in, so the host has read the audio: nothing reads the upload any more. (A call
    // that fails once submitted leaves its upload to the garbage collector: its batch may still be
    // on its way.)
    uploads.giveBack(file);
    // NOTE: a truncated WAV is decoded up to its last whole frame (wav-parser.ts); the caller learns
    // it from the voxmux-audio-truncated header, on every response format.
    if (fields.stream) {
      openStream();
      for (const event of toStreamEvents(result)) writeEvent(event);
      reply.raw.end();
      return reply;
    }
    invariant(fields.response_format !== 'diarized_json', 'diarized_json is answered above');
    const rendered = renderTranscript(result, fields.response_format, {
      includeWords: shouldIncludeWords,
      includeSegments: fields.timestamp_granularities.includes('segment') || !shouldIncludeWords,
      languageSource: isTranslation ? 'reported' : languageSourceOf(fields.language, languages),
      task: endpoint.task,
    });
    return reply.headers(truncatedHeader).type(rendered.contentType).send(rendered.body);
  });
}
