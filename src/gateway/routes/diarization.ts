/**
 * Speaker diarization (docs/diarization.md):
 * - POST /v1/audio/diarization: a whole file, run as a one-chunk session;
 * - POST /v1/audio/diarization/sessions: opens a session (the client may name it);
 * - POST /v1/audio/diarization/sessions/{id}/chunks: the next chunk, by sequence number;
 * - GET and DELETE /v1/audio/diarization/sessions/{id}: the timeline so far; DELETE closes it.
 *
 * Chunks run as sequence work: the scheduler keeps each session's engine state and runs its chunks
 * in order, on the instance that holds the state (or anywhere, with the state attached). The
 * gateway keeps the API side (session-store.ts): chunk offsets, the timeline and the last answer.
 * A chunk the gateway rejects (malformed, too long, a gap) never reaches the scheduler, so the
 * session stays usable.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  DIARIZATION_RESPONSE_FORMATS,
  type DiarizationChunkResult,
  type DiarizationJson,
  type DiarizationResponseFormat,
  type DiarizationSessionCreated,
  type DiarizationSessionTimeline,
} from '../../api/diarization.js';
import { errors } from '../../core/error-catalog.js';
import type { ServiceError } from '../../core/errors.js';
import type { GatewayDeps, GatewayOptions, ModelEntry } from '../gateway-types.js';
import { DiarizationSessionStore, type DiarizationSession, type SpeakerBounds } from '../diarization/session-store.js';
import { diarizeRecording, SAMPLE_RATE_HZ, speechRegionsOf } from '../diarization/diarize-recording.js';
import { toEngineOutput, toRttm, toSpeakerSegments } from '../diarization/timeline.js';
import { createCallRecord, noteDispatch } from '../call-record.js';
import type { UploadPool } from '../upload-pool.js';
import { openCall } from './call-context.js';
import { readFormWithin } from './transcriptions.js';

/** Client-chosen session ids: letters, digits and `._:-`, as in a URL path segment. */
const SESSION_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
const MAX_SESSION_BODY_BYTES = 4096;
const MAX_SPEAKERS = 64;

/** Errors raised before the scheduler took the item: the sequence number was not used. */
const NOT_TAKEN = new Set(['queue_full', 'shutting_down', 'model_not_found', 'no_ready_instance', 'sequence_gap', 'sequence_out_of_order']);

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

/** min_speakers and max_speakers, checked against each other. */
export function parseSpeakerBounds(raw: Readonly<Record<string, unknown>>): SpeakerBounds {
  const minSpeakers = parseCount('min_speakers', raw.min_speakers);
  const maxSpeakers = parseCount('max_speakers', raw.max_speakers);
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

function durationS(session: DiarizationSession): number {
  return Math.round((session.chunkSamples.reduce((a, b) => a + b, 0) / SAMPLE_RATE_HZ) * 1000) / 1000;
}

function timelineOf(session: DiarizationSession, status: 'open' | 'closed'): DiarizationSessionTimeline {
  // A closed session's provisional segments are its final ones: no later chunk will change them.
  const finalized = toSpeakerSegments(session.finalized);
  const provisional = toSpeakerSegments(session.provisional);
  return {
    id: session.id,
    object: 'diarization.session',
    status,
    chunks: session.chunkSamples.length,
    duration: durationS(session),
    speakers: session.speakers,
    segments: [...finalized, ...provisional],
    finalized: status === 'closed' ? finalized.length + provisional.length : finalized.length,
  };
}

export function registerDiarizationRoutes(
  app: FastifyInstance,
  options: GatewayOptions,
  deps: GatewayDeps,
  uploads: UploadPool,
): DiarizationSessionStore {
  const { clock, metrics } = deps;
  const store = new DiarizationSessionStore({
    clock,
    onExpired: (session) => {
      metrics.diarizationSessionsExpired.inc({ model: session.model });
      void deps.sequences?.end(session.model, session.id);
      deps.log.debug({ model: session.model, sessionId: session.id }, 'diarization session expired');
    },
  });
  app.addHook('onClose', async () => store.close());
  const expiresAt = (session: DiarizationSession) => Math.round((clock.wallMs() + session.idleTimeoutMs) / 1000);
  const maxChunkMs = options.maxDiarizationChunkMs ?? 60_000;

  /** Decodes an upload to 16 kHz PCM, with the speech regions its model wants. */
  async function decodeChunk(file: Buffer, p: { model: DiarizationModel; signal: AbortSignal }) {
    const audio = await deps.decoder.decode(file, p.signal);
    if (audio.samples.length === 0) throw errors.emptyAudio();
    const speech = await speechRegionsOf(
      audio.samples,
      { wantsSpeechRegions: p.model.diarization.wantsSpeechRegions, signal: p.signal },
      deps,
    );
    return { samples: audio.samples, speech };
  }

  app.post('/v1/audio/diarization', async (request: FastifyRequest, reply: FastifyReply) => {
    const record = createCallRecord('diarization');
    request.voxmuxCall = record;
    const { abort, arrivedMs, priority, deadlineMs } = openCall(request, reply, deps, options);
    const form = await readFormWithin(request, { uploads, options, clock, arrivedMs });
    const fields = singleFields(form.fields, ['model', 'min_speakers', 'max_speakers', 'response_format']);
    record.model = fields.model ?? '';
    const model = resolveDiarizationModel(fields.model, deps, 'POST /v1/audio/diarization');
    record.model = model.id;
    const bounds = parseSpeakerBounds(fields);
    const format = parseResponseFormat(fields.response_format);
    if (form.file === undefined) throw errors.missingParameter({ param: 'file' });
    const audio = await deps.decoder.decode(form.file, abort.signal);
    if (audio.samples.length === 0) throw errors.emptyAudio();
    record.audioInSeconds = audio.samples.length / SAMPLE_RATE_HZ;
    const { segments, speakers } = await diarizeRecording(
      {
        model: model.id,
        wantsSpeechRegions: model.diarization.wantsSpeechRegions,
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
    uploads.giveBack(form.file);
    const duration = Math.round((audio.samples.length / SAMPLE_RATE_HZ) * 1000) / 1000;
    return sendTimeline(reply, format, { fileId: 'audio', json: { duration, speakers, segments } });
  });

  // A gateway thread passes sessions on to the main thread, which keeps their store (routes/forward.ts).
  if (options.forwardTo !== undefined) return store;

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
      const bounds = parseSpeakerBounds(body);
      let id = `diar-${randomUUID()}`;
      if (body.id !== undefined) {
        if (typeof body.id !== 'string' || !SESSION_ID_PATTERN.test(body.id)) {
          throw errors.invalidParameter({
            param: 'id',
            expected: '1 to 128 letters, digits, dots, colons, dashes or underscores',
            got: body.id,
          });
        }
        id = body.id;
      }
      const session = store.create({ id, model: model.id, bounds, idleTimeoutMs: model.diarization.sessionIdleTimeoutMs });
      const created: DiarizationSessionCreated = {
        id,
        object: 'diarization.session',
        model: model.id,
        expires_at: expiresAt(session),
        idle_timeout: session.idleTimeoutMs / 1000,
      };
      return reply.code(201).type('application/json; charset=utf-8').send(created);
    });
  });

  app.post('/v1/audio/diarization/sessions/:id/chunks', async (request: FastifyRequest, reply: FastifyReply) => {
    const { id } = request.params as { id: string };
    const record = createCallRecord('diarization');
    request.voxmuxCall = record;
    const { abort, arrivedMs, priority, deadlineMs } = openCall(request, reply, deps, options);
    record.model = store.get(id).model;
    const form = await readFormWithin(request, { uploads, options, clock, arrivedMs });
    const fields = singleFields(form.fields, ['seq', 'is_last']);
    const seq = parseSeq(fields.seq);
    const isLast = parseFlag('is_last', fields.is_last);
    // Looked up again: the session may have expired or closed while the upload arrived.
    const session = store.get(id);
    const replayed = replay(session, seq);
    if (replayed !== undefined) return reply.type('application/json; charset=utf-8').send(await replayed);
    const nextSeq = session.chunkSamples.length;
    if (seq > nextSeq) throw errors.sequenceGap({ sessionId: id, expectedSeq: nextSeq, seq });
    if (seq < nextSeq) throw errors.sequenceOutOfOrder({ sessionId: id, lastCompletedSeq: session.lastAnswer?.seq ?? -1, seq });
    if (form.file === undefined) throw errors.missingParameter({ param: 'file' });
    const model = resolveDiarizationModel(session.model, deps, 'POST /v1/audio/diarization/sessions/{id}/chunks');
    const { samples, speech } = await decodeChunk(form.file, { model, signal: abort.signal });
    record.audioInSeconds = samples.length / SAMPLE_RATE_HZ;
    const chunkMs = (samples.length / SAMPLE_RATE_HZ) * 1000;
    if (chunkMs > maxChunkMs) throw errors.chunkTooLong({ durationMs: chunkMs, maxChunkMs });
    // Checked again after the decode: a retry of this number may have taken it meanwhile.
    if (store.get(id) !== session || session.chunkSamples.length !== seq) {
      const taken = replay(session, seq);
      if (taken !== undefined) return reply.type('application/json; charset=utf-8').send(await taken);
      throw errors.sequenceOutOfOrder({ sessionId: id, lastCompletedSeq: session.lastAnswer?.seq ?? -1, seq });
    }
    const chunkOffsetS = session.chunkSamples.reduce((a, b) => a + b, 0) / SAMPLE_RATE_HZ;
    session.chunkSamples.push(samples.length);
    const answer = runChunk(session, {
      seq,
      audio: samples,
      isLast,
      itemOptions: { ...session.bounds, chunkOffsetS, ...(speech === undefined ? {} : { speech }) },
      // NOTE: no abort signal: a chunk whose client left still runs, and its answer is kept for the
      // client's retry; a cancelled chunk would leave its number unusable in the scheduler.
      submitOptions: {
        timeoutMs: Math.max(1, deadlineMs - (clock.nowMs() - arrivedMs)),
        requestId: String(request.id),
        priority,
        onDispatched: (dispatch) => noteDispatch(record, dispatch, clock.nowMs()),
      },
    });
    session.running.set(seq, answer);
    store.touch(session);
    const body = await answer;
    record.resultMs = clock.nowMs();
    // The chunk's result is in, so its host has read the audio (a view of the upload for a 16 kHz
    // 16-bit WAV): the upload's memory serves the next one. (A failed chunk leaves it to the
    // garbage collector: it may be on its way to an instance still.)
    uploads.giveBack(form.file);
    return reply.type('application/json; charset=utf-8').send(body);
  });

  /** The answer to a number already sent: the last answered one again, or the one still running. */
  function replay(session: DiarizationSession, seq: number): Promise<DiarizationChunkResult> | undefined {
    if (session.lastAnswer?.seq === seq) {
      const { outcome } = session.lastAnswer;
      return outcome.ok ? Promise.resolve(outcome.body) : Promise.reject(outcome.error);
    }
    return session.running.get(seq);
  }

  async function runChunk(
    session: DiarizationSession,
    p: {
      seq: number;
      audio: Int16Array;
      isLast: boolean;
      itemOptions: Record<string, unknown>;
      submitOptions: Parameters<NonNullable<GatewayDeps['sequences']>['submit']>[2];
    },
  ): Promise<DiarizationChunkResult> {
    try {
      const result = await deps.sequences!.submit(
        session.model,
        { sessionId: session.id, seq: p.seq, audio: p.audio, isLast: p.isLast, options: p.itemOptions },
        p.submitOptions,
      );
      const output = toEngineOutput(result.output, session.model);
      session.finalized.push(...output.finalized);
      session.provisional = output.provisional;
      session.speakers = output.speakers;
      const body: DiarizationChunkResult = {
        id: session.id,
        seq: p.seq,
        duration: durationS(session),
        speakers: session.speakers,
        finalized: toSpeakerSegments(session.finalized),
        provisional: toSpeakerSegments(output.provisional),
        expires_at: expiresAt(session),
      };
      session.lastAnswer = { seq: p.seq, outcome: { ok: true, body } };
      return body;
    } catch (err) {
      const error = err as ServiceError;
      if (error.code === 'session_expired' || error.code === 'session_not_found') {
        store.markExpired(session);
      } else if (NOT_TAKEN.has(error.code)) {
        // The scheduler never took it, nor (their turn) any later number: they may be sent again.
        session.chunkSamples.length = Math.min(session.chunkSamples.length, p.seq);
      } else {
        session.lastAnswer = { seq: p.seq, outcome: { ok: false, error } };
      }
      throw err;
    } finally {
      session.running.delete(p.seq);
      store.touch(session);
    }
  }

  async function closeSession(session: DiarizationSession): Promise<DiarizationSessionTimeline> {
    session.isClosing = true;
    await Promise.all([...session.running.values()].map((answer) => answer.catch(() => undefined)));
    store.delete(session);
    await deps.sequences?.end(session.model, session.id);
    return timelineOf(session, 'closed');
  }

  app.get('/v1/audio/diarization/sessions/:id', async (request: FastifyRequest, reply: FastifyReply) => {
    const { id } = request.params as { id: string };
    const format = parseResponseFormat((request.query as Record<string, unknown>).response_format);
    const session = store.get(id);
    return sendTimeline(reply, format, { fileId: id, json: { ...timelineOf(session, 'open') } });
  });

  app.delete('/v1/audio/diarization/sessions/:id', async (request: FastifyRequest, reply: FastifyReply) => {
    const { id } = request.params as { id: string };
    const format = parseResponseFormat((request.query as Record<string, unknown>).response_format);
    const timeline = await closeSession(store.get(id));
    return sendTimeline(reply, format, { fileId: id, json: { ...timeline } });
  });

  return store;
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
