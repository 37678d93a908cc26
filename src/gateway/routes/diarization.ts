/**
 * Speaker diarization (docs/operations.md#speaker-diarization):
 * - POST /v1/audio/diarization: a whole file, run as a one-chunk session;
 * - POST /v1/audio/diarization/sessions: opens a session (the client may name it);
 * - POST /v1/audio/diarization/sessions/{id}/chunks: the next chunk, by sequence number;
 * - GET and DELETE /v1/audio/diarization/sessions/{id}: the timeline so far; DELETE closes it (after
 *   the engine's final step when no chunk was is_last).
 *
 * Chunks run as sequence work: the scheduler keeps each session's engine state and runs its chunks
 * in order, on the instance that holds the state (or anywhere, with the state attached). The
 * sessions' API side (chunk offsets, the timeline, the last answer) is the session service's
 * (diarization/session-service.ts); these routes read and decode the uploads. A chunk rejected
 * (malformed, too long, a gap) never reaches the scheduler, so the session stays usable.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DIARIZATION_RESPONSE_FORMATS, type DiarizationJson, type DiarizationResponseFormat } from '../../api/diarization.js';
import { errors } from '../../core/error-catalog.js';
import type { GatewayDeps, GatewayOptions, ModelEntry } from '../gateway-types.js';
import { DiarizationSessionService, type DiarizationSessions } from '../diarization/session-service.js';
import type { SpeakerBounds } from '../diarization/session-store.js';
import { diarizeRecording, SAMPLE_RATE_HZ, speechRegionsOf } from '../diarization/diarize-recording.js';
import { toRttm } from '../diarization/timeline.js';
import { createCallRecord, noteDispatch } from '../call-record.js';
import type { UploadPool } from '../upload-pool.js';
import { openCall } from './call-context.js';
import { AUDIO_TRUNCATED_HEADER, readFormWithin } from './transcriptions.js';

/**
 * Client-chosen session ids: letters, digits and `._:-`, as in a URL path segment; not `.` nor `..`,
 * which URL parsers resolve away (`sessions/../chunks` is `/v1/audio/diarization/chunks`).
 */
const SESSION_ID_PATTERN = /^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$/;
const MAX_SESSION_BODY_BYTES = 4096;
const MAX_SPEAKERS = 64;

type DiarizationModel = ModelEntry & { diarization: NonNullable<ModelEntry['diarization']> };

function resolveDiarizationModel(name: string | undefined, deps: GatewayDeps, endpoint: string): DiarizationModel {
  if (name === undefined || name === '') throw errors.missingParameter({ param: 'model' });
  const model = deps.models.resolve(name);
  if (model === undefined) throw errors.modelNotFound({ model: name });
  const entry = deps.models.list().find((m) => m.id === model);
  if (entry?.task !== 'diarization' || entry.diarization === undefined || deps.sequences === undefined) {
    throw errors.modelTaskMismatch({ model, task: entry?.task ?? 'transcription', endpoint });
  }
  return { ...entry, id: model } as DiarizationModel;
}

function parseCount(param: string, value: unknown): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const n = typeof value === 'string' && /^[0-9]{1,3}$/.test(value.trim()) ? Number(value.trim()) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_SPEAKERS) {
    throw errors.invalidParameter({ param, expected: `an integer from 1 to ${MAX_SPEAKERS}`, got: value });
  }
  return n;
}

/** A whole file's RTTM file id: the uploaded file's name, without its folders and extension ('audio' when none is left). */
function rttmFileId(fileName: string): string {
  const base = fileName.split(/[\\/]/).pop() ?? '';
  const dot = base.lastIndexOf('.');
  return (dot > 0 ? base.slice(0, dot) : dot === 0 ? '' : base) || 'audio';
}

/**
 * min_speakers and max_speakers, checked against each other and min_speakers against the most
 * speakers the model's engine finds (it would fail every item; a larger max_speakers it caps).
 */
export function parseSpeakerBounds(raw: Readonly<Record<string, unknown>>, model?: DiarizationModel): SpeakerBounds {
  const minSpeakers = parseCount('min_speakers', raw.min_speakers);
  const maxSpeakers = parseCount('max_speakers', raw.max_speakers);
  const most = model?.diarization.maxSpeakers;
  if (model !== undefined && most !== undefined && minSpeakers !== undefined && minSpeakers > most) {
    throw errors.invalidParameter({
      param: 'min_speakers',
      expected: `at most ${most} (the most speakers model '${model.id}' finds)`,
      got: minSpeakers,
    });
  }
  if (minSpeakers !== undefined && maxSpeakers !== undefined && minSpeakers > maxSpeakers) {
    throw errors.invalidParameter({ param: 'max_speakers', expected: `at least min_speakers (${minSpeakers})`, got: maxSpeakers });
  }
  return { ...(minSpeakers === undefined ? {} : { minSpeakers }), ...(maxSpeakers === undefined ? {} : { maxSpeakers }) };
}

function parseResponseFormat(value: unknown): DiarizationResponseFormat {
  if (value === undefined || value === '') return 'json';
  if (typeof value === 'string' && (DIARIZATION_RESPONSE_FORMATS as readonly string[]).includes(value)) {
    return value as DiarizationResponseFormat;
  }
  throw errors.unsupportedResponseFormat({ got: value, formats: DIARIZATION_RESPONSE_FORMATS });
}

function parseSeq(value: string | undefined): number {
  if (value === undefined || value === '') throw errors.missingParameter({ param: 'seq' });
  if (!/^[0-9]{1,9}$/.test(value.trim())) {
    throw errors.invalidParameter({ param: 'seq', expected: 'a non-negative integer', got: value });
  }
  return Number(value.trim());
}

function parseFlag(param: string, value: string | undefined): boolean {
  if (value === undefined || value === '' || value === 'false') return false;
  if (value === 'true') return true;
  throw errors.invalidParameter({ param, expected: 'true or false', got: value });
}

function singleFields(fields: Map<string, string[]>, known: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, values] of fields) {
    if (!known.includes(name)) throw errors.invalidParameter({ param: name, expected: 'a known parameter', got: name });
    if (values.length > 1) throw errors.invalidParameter({ param: name, expected: 'a single value', got: `${values.length} values` });
    out[name] = values[0]!;
  }
  return out;
}

function sendTimeline(
  reply: FastifyReply,
  format: DiarizationResponseFormat,
  p: { fileId: string; json: DiarizationJson & Record<string, unknown> },
): FastifyReply {
  if (format === 'rttm') return reply.type('text/plain; charset=utf-8').send(toRttm(p.fileId, p.json.segments));
  return reply.type('application/json; charset=utf-8').send(p.json);
}

export function registerDiarizationRoutes(
  app: FastifyInstance,
  options: GatewayOptions,
  deps: GatewayDeps,
  uploads: UploadPool,
): DiarizationSessions | undefined {
  const { clock } = deps;
  // The main thread's service, given by the server; built here where a gateway stands alone (tests).
  const sessions =
    deps.diarizationSessions ??
    (deps.sequences === undefined
      ? undefined
      : new DiarizationSessionService({
          sequences: deps.sequences,
          clock,
          metrics: deps.metrics,
          log: deps.log,
          maxChunkMs: options.maxDiarizationChunkMs ?? 60_000,
        }));
  if (sessions instanceof DiarizationSessionService && deps.diarizationSessions === undefined) {
    app.addHook('onClose', async () => sessions.shutdown());
  }

  app.post('/v1/audio/diarization', async (request: FastifyRequest, reply: FastifyReply) => {
    const record = createCallRecord('diarization');
    request.voxmuxCall = record;
    const { abort, arrivedMs, priority, deadlineMs } = openCall(request, reply, deps, options);
    const form = await readFormWithin(request, { uploads, options, clock, arrivedMs });
    // Until the audio is decoded nothing else reads the upload: a call refused by then gives it back.
    const { model, bounds, format, file, audio } = await uploads.giveBackOnFailure(form.file, async () => {
      const fields = singleFields(form.fields, ['model', 'min_speakers', 'max_speakers', 'response_format']);
      record.model = fields.model ?? '';
      const model = resolveDiarizationModel(fields.model, deps, 'POST /v1/audio/diarization');
      record.model = model.id;
      const bounds = parseSpeakerBounds(fields, model);
      const format = parseResponseFormat(fields.response_format);
      const file = form.file;
      if (file === undefined) throw errors.missingParameter({ param: 'file' });
      const audio = await deps.decoder.decode(file, abort.signal);
      if (audio.samples.length === 0) throw errors.emptyAudio();
      return { model, bounds, format, file, audio };
    });
    record.audioInSeconds = audio.samples.length / SAMPLE_RATE_HZ;
    const { segments, speakers } = await diarizeRecording(
      {
        model: model.id,
        wantsSpeechRegions: model.diarization.wantsSpeechRegions,
        maxItemMs: model.diarization.maxItemMs,
        samples: audio.samples,
        bounds,
        submitOptions: {
          timeoutMs: Math.max(1, deadlineMs - (clock.nowMs() - arrivedMs)),
          signal: abort.signal,
          requestId: String(request.id),
          priority,
          onDispatched: (dispatch) => noteDispatch(record, dispatch, clock.nowMs()),
        },
      },
      deps,
    );
    record.resultMs = clock.nowMs();
    // The result is in, so the hosts have read the audio (it may be a view of the upload).
    uploads.giveBack(file);
    const duration = Math.round((audio.samples.length / SAMPLE_RATE_HZ) * 1000) / 1000;
    if (audio.isTruncated) reply.header(AUDIO_TRUNCATED_HEADER, 'true');
    return sendTimeline(reply, format, { fileId: rttmFileId(form.fileName), json: { duration, speakers, segments } });
  });

  if (sessions === undefined) return undefined;
  const service = sessions;

  void app.register(async (scope) => {
    // The body is read raw, so that a body that is not JSON gets this endpoint's own answer.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_SESSION_BODY_BYTES }, (_request, body, done) => done(null, body));
    scope.post('/v1/audio/diarization/sessions', async (request: FastifyRequest, reply: FastifyReply) => {
      const mediaType = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
      if (mediaType !== 'application/json') {
        throw errors.invalidContentType({ contentType: request.headers['content-type'], expected: 'application/json' });
      }
      const body = parseJsonObject(request.body);
      for (const key of Object.keys(body)) {
        if (!['model', 'id', 'min_speakers', 'max_speakers'].includes(key)) {
          throw errors.invalidParameter({ param: key, expected: 'a known parameter', got: key });
        }
      }
      if (body.model !== undefined && typeof body.model !== 'string') {
        throw errors.invalidParameter({ param: 'model', expected: 'a string', got: body.model });
      }
      const model = resolveDiarizationModel(body.model as string | undefined, deps, 'POST /v1/audio/diarization/sessions');
      const bounds = parseSpeakerBounds(body, model);
      let id = `diar-${randomUUID()}`;
      if (body.id !== undefined) {
        if (typeof body.id !== 'string' || !SESSION_ID_PATTERN.test(body.id)) {
          throw errors.invalidParameter({
            param: 'id',
            expected: '1 to 128 letters, digits, dots, colons, dashes or underscores, other than . and ..',
            got: body.id,
          });
        }
        id = body.id;
      }
      const created = await service.create({ id, model: model.id, bounds, idleTimeoutMs: model.diarization.sessionIdleTimeoutMs });
      return reply.code(201).type('application/json; charset=utf-8').send(created);
    });
  });

  app.post('/v1/audio/diarization/sessions/:id/chunks', async (request: FastifyRequest, reply: FastifyReply) => {
    const { id } = request.params as { id: string };
    const record = createCallRecord('diarization');
    request.voxmuxCall = record;
    const { abort, arrivedMs, priority, deadlineMs } = openCall(request, reply, deps, options);
    // An unknown or expired session is answered before its upload is read.
    record.model = await service.modelOf(id);
    const form = await readFormWithin(request, { uploads, options, clock, arrivedMs });
    // As for a whole file: a chunk refused before it is submitted gives its upload back.
    const { seq, isLast, decoded, maxItemMs } = await uploads.giveBackOnFailure(form.file, async () => {
      const fields = singleFields(form.fields, ['seq', 'is_last']);
      const seq = parseSeq(fields.seq);
      const isLast = parseFlag('is_last', fields.is_last);
      const model = resolveDiarizationModel(record.model, deps, 'POST /v1/audio/diarization/sessions/{id}/chunks');
      const decoded = form.file === undefined ? undefined : await decodeChunk(form.file, { model, signal: abort.signal });
      return { seq, isLast, decoded, maxItemMs: model.diarization.maxItemMs };
    });
    if (decoded !== undefined) record.audioInSeconds = decoded.samples.length / SAMPLE_RATE_HZ;
    const body = await service.chunk(
      {
        id,
        seq,
        isLast,
        ...(decoded === undefined ? {} : { samples: decoded.samples }),
        ...(decoded?.speech === undefined ? {} : { speech: decoded.speech }),
        ...(maxItemMs === undefined ? {} : { maxItemMs }),
      },
      {
        timeoutMs: Math.max(1, deadlineMs - (clock.nowMs() - arrivedMs)),
        requestId: String(request.id),
        priority,
        onDispatched: (dispatch) => noteDispatch(record, dispatch, clock.nowMs()),
      },
    );
    record.resultMs = clock.nowMs();
    // The chunk's result is in, so its host has read the audio (a view of the upload for a 16 kHz
    // 16-bit WAV): the upload's memory serves the next one. (A failed chunk leaves it to the
    // garbage collector: it may be on its way to an instance still.)
    if (form.file !== undefined) uploads.giveBack(form.file);
    if (decoded?.isTruncated === true) reply.header(AUDIO_TRUNCATED_HEADER, 'true');
    return reply.type('application/json; charset=utf-8').send(body);
  });

  /** Decodes an upload to 16 kHz PCM, with the speech regions its model wants. */
  async function decodeChunk(file: Buffer, p: { model: DiarizationModel; signal: AbortSignal }) {
    const audio = await deps.decoder.decode(file, p.signal);
    if (audio.samples.length === 0) throw errors.emptyAudio();
    const speech = await speechRegionsOf(
      audio.samples,
      { wantsSpeechRegions: p.model.diarization.wantsSpeechRegions, signal: p.signal },
      deps,
    );
    return { samples: audio.samples, speech, isTruncated: audio.isTruncated };
  }

  app.get('/v1/audio/diarization/sessions/:id', async (request: FastifyRequest, reply: FastifyReply) => {
    const { id } = request.params as { id: string };
    const format = parseResponseFormat((request.query as Record<string, unknown>).response_format);
    return sendTimeline(reply, format, { fileId: id, json: { ...(await service.timeline(id)) } });
  });

  app.delete('/v1/audio/diarization/sessions/:id', async (request: FastifyRequest, reply: FastifyReply) => {
    const { id } = request.params as { id: string };
    const format = parseResponseFormat((request.query as Record<string, unknown>).response_format);
    const { arrivedMs, priority, deadlineMs } = openCall(request, reply, deps, options);
    // The engine's final step (when no chunk was is_last) runs under the call's deadline and priority.
    const closed = await service.close(id, {
      timeoutMs: Math.max(1, deadlineMs - (clock.nowMs() - arrivedMs)),
      requestId: String(request.id),
      priority,
    });
    return sendTimeline(reply, format, { fileId: id, json: { ...closed } });
  });

  return service;
}

function parseJsonObject(body: unknown): Record<string, unknown> {
  const text = Buffer.isBuffer(body) ? body.toString('utf8') : '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw errors.invalidParameter({ param: 'body', expected: 'a JSON object', got: (err as Error).message });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw errors.invalidParameter({ param: 'body', expected: 'a JSON object', got: parsed });
  }
  return parsed as Record<string, unknown>;
}
