/**
 * Every error code the system uses, declared once: its kind, its message and the remedy that
 * docs/errors.md shows. Components raise errors through the `errors` factories below.
 */
import { ServiceError, type ErrorKind, type PlainServiceError } from './errors.js';

interface CatalogEntry {
  kind: ErrorKind;
  /** One line for docs/errors.md: what the caller can do about it. */
  remedy: string;
}

export const ERROR_CATALOG = {
  // gateway: the call itself
  invalid_parameter: { kind: 'invalid_argument', remedy: 'Fix the named parameter.' },
  missing_parameter: { kind: 'invalid_argument', remedy: 'Send the named parameter.' },
  invalid_content_type: { kind: 'invalid_argument', remedy: 'Send multipart/form-data (transcriptions) or application/json (speech).' },
  route_not_found: { kind: 'not_found', remedy: 'Check the method and path.' },
  body_too_large: { kind: 'payload_too_large', remedy: 'Send a smaller file or raise gateway.maxBodyBytes.' },
  missing_api_key: { kind: 'unauthenticated', remedy: 'Send Authorization: Bearer <key>.' },
  invalid_api_key: { kind: 'unauthenticated', remedy: 'Send a configured API key.' },
  // gateway: audio
  invalid_audio: { kind: 'invalid_argument', remedy: 'Send a complete, valid audio file.' },
  empty_audio: { kind: 'invalid_argument', remedy: 'Send audio with at least one sample.' },
  unsupported_audio_format: {
    kind: 'unsupported_media',
    remedy: 'Send WAV, FLAC, MP3, M4A/AAC, Ogg (Opus or Vorbis) or WebM (Opus).',
  },
  audio_too_long: { kind: 'payload_too_large', remedy: 'Split the audio or raise gateway.maxAudioDurationMs.' },
  // models and scheduling
  model_not_found: { kind: 'not_found', remedy: 'Use a model listed by GET /v1/models.' },
  queue_full: { kind: 'resource_exhausted', remedy: 'Retry after the Retry-After delay, or add instances.' },
  no_ready_instance: { kind: 'unavailable', remedy: 'Retry after the Retry-After delay; see /health/ready.' },
  deadline_exceeded: { kind: 'deadline_exceeded', remedy: 'Retry, or raise gateway.requestTimeoutMs.' },
  shutting_down: { kind: 'unavailable', remedy: 'Retry against another node.' },
  // model lifecycle (idle stop and wake) and budget guards
  model_wake_failed: {
    kind: 'unavailable',
    remedy: 'Retry after the Retry-After delay (the next request wakes the model again); see the instance log and /health/ready.',
  },
  model_wake_timeout: {
    kind: 'unavailable',
    remedy: "Retry after the Retry-After delay, or raise the model's wakeTimeoutMs.",
  },
  gpu_budget_exhausted: {
    kind: 'unavailable',
    remedy: 'Wait for the next day or month, or raise budget.monthlyBudgetUsd / budget.dailyUptimeLimitHours.',
  },
  client_disconnected: { kind: 'cancelled', remedy: 'None: the client went away.' },
  // instances (codes that cross the wire, see docs/protocol.md)
  instance_crashed: { kind: 'unavailable', remedy: 'Retry; the instance is being restarted.' },
  instance_wedged: { kind: 'unavailable', remedy: 'Retry; the instance is being replaced.' },
  model_failed: { kind: 'internal', remedy: 'Report it with the request id; see the instance log.' },
  out_of_memory: { kind: 'unavailable', remedy: 'Retry with shorter audio or fewer instances per GPU.' },
  unsupported_option: { kind: 'invalid_argument', remedy: 'Drop the option this model does not support.' },
  load_failed: { kind: 'unavailable', remedy: 'Fix the model configuration; see the instance log.' },
  protocol_mismatch: { kind: 'internal', remedy: 'Run a model host of the same protocol version.' },
  bad_frame: { kind: 'internal', remedy: 'Report it: a protocol frame was malformed.' },
  stream_cancelled: { kind: 'cancelled', remedy: 'None: the stream was cancelled before it ended.' },
  session_state_missing: { kind: 'unavailable', remedy: 'Retry; the item is then sent with its session state attached.' },
  resource_not_found: { kind: 'not_found', remedy: 'Use a resource the model provides, such as a listed voice.' },
  state_too_large: { kind: 'internal', remedy: 'Report it: a session state exceeded the 1 MiB limit.' },
  // programmer errors surfaced to clients
  internal_error: { kind: 'internal', remedy: 'Report it with the request id.' },
  // scheduler: sessions (sequence work) and streams
  session_not_found: { kind: 'not_found', remedy: 'Start the session again from sequence number 0.' },
  session_expired: { kind: 'not_found', remedy: 'Start the session again from sequence number 0, or send items more often.' },
  sequence_gap: { kind: 'invalid_argument', remedy: 'Send the missing sequence number first.' },
  sequence_out_of_order: { kind: 'invalid_argument', remedy: 'Send each sequence number once, in order.' },
  // gateway: the HTTP layer (requests the server cannot read)
  malformed_request: {
    kind: 'invalid_argument',
    remedy: 'Send a well-formed HTTP/1.1 request: printable header values, valid chunked encoding, a body of the declared length.',
  },
  headers_too_large: { kind: 'headers_too_large', remedy: 'Send fewer or shorter headers (at most 16 KiB in all).' },
  body_timeout: {
    kind: 'request_timeout',
    remedy: 'Send the whole request within gateway.bodyTimeoutMs, with a body as long as its Content-Length, or raise the limit.',
  },
  // scheduler: admission by predicted completion
  deadline_unreachable: {
    kind: 'resource_exhausted',
    remedy: 'Retry after the Retry-After delay (the predicted drain time), send a longer voxmux-deadline-ms, or add instances.',
  },
  // gateway: speaker diarization (POST /v1/audio/diarization and its sessions)
  chunk_too_long: { kind: 'payload_too_large', remedy: 'Send shorter chunks, or raise gateway.maxDiarizationChunkMs.' },
  session_already_exists: { kind: 'invalid_argument', remedy: 'Choose another session id, or leave it out to get a fresh one.' },
  no_diarization_model: {
    kind: 'invalid_argument',
    remedy: 'Configure a diarization model (models.<name>.task diarization) or set the transcription model diarizationModel.',
  },
  // gateway: speech synthesis (POST /v1/audio/speech)
  input_empty: { kind: 'invalid_argument', remedy: 'Send input with some text to speak.' },
  input_too_long: { kind: 'invalid_argument', remedy: 'Send at most 4096 characters of input, or split the text into several calls.' },
  unknown_voice: { kind: 'invalid_argument', remedy: "Use an OpenAI voice name or one of the model's voices (GET /v1/audio/voices)." },
  unsupported_response_format: {
    kind: 'invalid_argument',
    remedy:
      'Use a response_format the endpoint lists in the message (speech: mp3, opus, aac, flac, wav or pcm; diarization: json or rttm).',
  },
  speed_out_of_range: { kind: 'invalid_argument', remedy: 'Send a speed from 0.25 to 4.0.' },
  unsupported_stream_format: { kind: 'invalid_argument', remedy: 'Use stream_format audio or sse.' },
  model_task_mismatch: {
    kind: 'invalid_argument',
    remedy:
      'Use a speech model for /v1/audio/speech and a transcription model for /v1/audio/transcriptions (GET /v1/models lists each voxmux.task).',
  },
  // gateway: realtime sessions (WebSocket /v1/realtime); each is an error event, the session stays open
  invalid_event: { kind: 'invalid_argument', remedy: 'Send each event as a JSON object with a string type.' },
  unknown_event: { kind: 'invalid_argument', remedy: 'Send a client event of the Realtime API (docs/realtime.md lists them).' },
  append_too_large: { kind: 'payload_too_large', remedy: 'Send the audio in smaller appends (realtime.maxAppendBytes).' },
  input_audio_buffer_full: { kind: 'payload_too_large', remedy: 'Commit or clear the input audio buffer more often.' },
  unsupported_realtime_audio_format: {
    kind: 'unsupported_media',
    remedy: 'Use audio/pcm at 24000 Hz, audio/pcmu or audio/pcma (beta: pcm16, g711_ulaw, g711_alaw).',
  },
  invalid_audio_data: {
    kind: 'invalid_argument',
    remedy: 'Send base64 audio in the session input format (whole 16-bit samples for pcm16).',
  },
  session_not_configured: { kind: 'invalid_argument', remedy: 'Send session.update before the first input_audio_buffer.append.' },
  input_audio_buffer_commit_empty: { kind: 'invalid_argument', remedy: 'Append at least 100 ms of audio before committing the buffer.' },
  cannot_update_voice: {
    kind: 'invalid_argument',
    remedy: 'Choose the voice before the first audio reply; a session keeps it after that (open a new session for another voice).',
  },
  conversation_already_has_active_response: { kind: 'invalid_argument', remedy: 'Wait for response.done, or send response.cancel first.' },
  response_cancel_not_active: { kind: 'invalid_argument', remedy: 'Send response.cancel only while a response is in progress.' },
  item_not_found: { kind: 'invalid_argument', remedy: 'Name an item of this session.' },
  too_many_sessions: { kind: 'resource_exhausted', remedy: 'Retry after the Retry-After delay, or raise realtime.maxSessions.' },
  llm_failed: {
    kind: 'unavailable',
    remedy: 'Check the LLM endpoint (realtime.llm.baseUrl) and its logs; the turn got the fallback reply.',
  },
} as const satisfies Record<string, CatalogEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

/** Codes a model host may send in an Error frame or a per-request batch result. */
export const WIRE_ERROR_CODES = [
  'invalid_audio',
  'model_failed',
  'out_of_memory',
  'unsupported_option',
  'load_failed',
  'protocol_mismatch',
  'bad_frame',
  'instance_wedged',
  'stream_cancelled',
  'session_state_missing',
  'resource_not_found',
  'state_too_large',
] as const satisfies readonly ErrorCode[];
export type WireErrorCode = (typeof WIRE_ERROR_CODES)[number];

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ERROR_CATALOG, value);
}

function make(
  code: ErrorCode,
  message: string,
  extra: { param?: string; details?: Record<string, unknown>; cause?: unknown; retryAfterMs?: number } = {},
): ServiceError {
  return new ServiceError({ code, kind: ERROR_CATALOG[code].kind, message, ...extra });
}

/** Factories: the only way components construct a ServiceError. */
export const errors = {
  invalidParameter: (p: { param: string; expected: string; got: unknown }) =>
    make('invalid_parameter', `Expected ${p.param} to be ${p.expected}: got ${describe(p.got)}`, {
      param: p.param,
    }),
  missingParameter: (p: { param: string }) => make('missing_parameter', `Missing required parameter: ${p.param}`, { param: p.param }),
  invalidContentType: (p: { contentType: string | undefined; expected?: string }) =>
    make('invalid_content_type', `Expected a ${p.expected ?? 'multipart/form-data'} body: got ${p.contentType ?? 'no content type'}`),
  routeNotFound: (p: { method: string; url: string }) => make('route_not_found', `No route for ${p.method} ${p.url}`),
  bodyTooLarge: (p: { maxBodyBytes: number }) =>
    make('body_too_large', `The request body exceeds the limit of ${p.maxBodyBytes} bytes`, {
      details: { maxBodyBytes: p.maxBodyBytes },
    }),
  missingApiKey: () => make('missing_api_key', 'Missing API key: send Authorization: Bearer <key>'),
  invalidApiKey: () => make('invalid_api_key', 'The API key is not valid'),
  invalidAudio: (p: { reason: string; cause?: unknown }) =>
    make('invalid_audio', `The audio could not be decoded: ${p.reason}`, { param: 'file', cause: p.cause }),
  emptyAudio: () => make('empty_audio', 'The audio contains no samples', { param: 'file' }),
  unsupportedAudioFormat: (p: { detected: string }) =>
    make('unsupported_audio_format', `Unsupported audio format: ${p.detected}`, { param: 'file' }),
  audioTooLong: (p: { durationMs: number; maxAudioDurationMs: number }) =>
    make('audio_too_long', `Expected audio of at most ${p.maxAudioDurationMs} ms: got ${Math.round(p.durationMs)} ms`, {
      param: 'file',
      details: { durationMs: Math.round(p.durationMs), maxAudioDurationMs: p.maxAudioDurationMs },
    }),
  modelNotFound: (p: { model: string }) =>
    make('model_not_found', `The model '${p.model}' does not exist`, { param: 'model', details: { model: p.model } }),
  queueFull: (p: { model: string; queued: number; retryAfterMs: number }) =>
    make('queue_full', `The queue for model '${p.model}' is full: ${p.queued} requests queued`, {
      details: { model: p.model, queued: p.queued },
      retryAfterMs: p.retryAfterMs,
    }),
  noReadyInstance: (p: { model: string; retryAfterMs: number }) =>
    make('no_ready_instance', `No ready instance of model '${p.model}'`, {
      details: { model: p.model },
      retryAfterMs: p.retryAfterMs,
    }),
  deadlineExceeded: (p: { requestId: string; timeoutMs: number }) =>
    make('deadline_exceeded', `The request did not finish within ${p.timeoutMs} ms`, {
      details: { requestId: p.requestId, timeoutMs: p.timeoutMs },
    }),
  modelWakeFailed: (p: { model: string; reason: string; retryAfterMs: number }) =>
    make('model_wake_failed', `The model '${p.model}' could not be started: ${p.reason}`, {
      details: { model: p.model },
      retryAfterMs: p.retryAfterMs,
    }),
  modelWakeTimeout: (p: { model: string; wakeTimeoutMs: number; retryAfterMs: number }) =>
    make('model_wake_timeout', `The model '${p.model}' did not become ready within ${p.wakeTimeoutMs} ms of its wake`, {
      details: { model: p.model, wakeTimeoutMs: p.wakeTimeoutMs },
      retryAfterMs: p.retryAfterMs,
    }),
  gpuBudgetExhausted: (p: { model: string; guard: string; retryAfterMs: number }) =>
    make('gpu_budget_exhausted', `The model '${p.model}' is stopped and may not be woken: the ${p.guard} is used up`, {
      details: { model: p.model, guard: p.guard },
      retryAfterMs: p.retryAfterMs,
    }),
  shuttingDown: () => make('shutting_down', 'The server is shutting down', { retryAfterMs: 1000 }),
  clientDisconnected: (p: { requestId: string }) =>
    make('client_disconnected', 'The client disconnected', { details: { requestId: p.requestId } }),
  instanceCrashed: (p: { instanceId: string; reason: string }) =>
    make('instance_crashed', `The model instance failed: ${p.reason}`, {
      details: { instanceId: p.instanceId },
      retryAfterMs: 1000,
    }),
  instanceWedged: (p: { instanceId: string; reason: string }) =>
    make('instance_wedged', `The model instance stopped responding: ${p.reason}`, {
      details: { instanceId: p.instanceId },
      retryAfterMs: 1000,
    }),
  fromWire: (p: { code: string; message: string; instanceId: string }) => {
    const code: ErrorCode = isErrorCode(p.code) ? p.code : 'model_failed';
    // invalid_audio from an instance is the caller's audio; everything else names the instance.
    return make(code, p.message, { details: { instanceId: p.instanceId }, param: code === 'invalid_audio' ? 'file' : undefined });
  },
  /** A ServiceError that crossed from another thread as its plain fields (core/errors.ts toPlainError). */
  fromPlain: (p: PlainServiceError) => {
    const code: ErrorCode = isErrorCode(p.code) ? p.code : 'internal_error';
    return make(code, p.message, {
      ...(p.param === undefined ? {} : { param: p.param }),
      details: p.details,
      ...(p.retryAfterMs === undefined ? {} : { retryAfterMs: p.retryAfterMs }),
    });
  },
  protocolMismatch: (p: { expected: number; got: unknown }) =>
    make('protocol_mismatch', `Expected protocol version ${p.expected}: got ${describe(p.got)}`),
  badFrame: (p: { reason: string }) => make('bad_frame', `Malformed protocol frame: ${p.reason}`),
  loadFailed: (p: { model: string; reason: string }) => make('load_failed', `Model '${p.model}' failed to load: ${p.reason}`),
  internal: (p: { cause: unknown }) => make('internal_error', 'Internal server error', { cause: p.cause }),
  // scheduler: sessions (sequence work) and streams
  sessionNotFound: (p: { model: string; sessionId: string }) =>
    make('session_not_found', `The session '${p.sessionId}' does not exist`, { details: { model: p.model, sessionId: p.sessionId } }),
  sessionExpired: (p: { model: string; sessionId: string; sessionIdleTimeoutMs: number }) =>
    make('session_expired', `The session '${p.sessionId}' expired after ${p.sessionIdleTimeoutMs} ms without items`, {
      details: { model: p.model, sessionId: p.sessionId, sessionIdleTimeoutMs: p.sessionIdleTimeoutMs },
    }),
  sequenceGap: (p: { sessionId: string; expectedSeq: number; seq: number }) =>
    make('sequence_gap', `Expected sequence number ${p.expectedSeq}: got ${p.seq}`, {
      param: 'seq',
      details: { sessionId: p.sessionId, expectedSeq: p.expectedSeq, seq: p.seq },
    }),
  sequenceOutOfOrder: (p: { sessionId: string; lastCompletedSeq: number; seq: number }) =>
    make('sequence_out_of_order', `Expected a sequence number after ${p.lastCompletedSeq}: got ${p.seq}`, {
      param: 'seq',
      details: { sessionId: p.sessionId, lastCompletedSeq: p.lastCompletedSeq, seq: p.seq },
    }),
  sessionStateTooLarge: (p: { sessionId: string; stateBytes: number; maxStateBytes: number }) =>
    make('state_too_large', 'Internal server error', {
      details: { sessionId: p.sessionId, stateBytes: p.stateBytes, maxStateBytes: p.maxStateBytes },
    }),
  streamCancelled: (p: { requestId: string }) =>
    make('stream_cancelled', 'The stream was cancelled', { details: { requestId: p.requestId } }),
  // gateway: the HTTP layer
  malformedRequest: (p: { reason: string }) => make('malformed_request', `The HTTP request is malformed: ${p.reason}`),
  headersTooLarge: () => make('headers_too_large', 'The request headers exceed the server limit'),
  bodyTimeout: (p: { bodyTimeoutMs: number }) =>
    make('body_timeout', `The request was not received within ${p.bodyTimeoutMs} ms`, {
      details: { bodyTimeoutMs: p.bodyTimeoutMs },
    }),
  // gateway: diarized_json
  knownSpeakersUnsupported: (p: { param: 'known_speaker_names' | 'known_speaker_references' }) =>
    make('unsupported_option', 'Known speakers are not supported: diarized_json labels speakers A, B, ... in order of first appearance', {
      param: p.param,
    }),
  // gateway: a language the model does not recognise (GET /v1/models lists each model's)
  unsupportedLanguage: (p: { model: string; language: string; languages: readonly string[]; param?: string }) =>
    make('unsupported_option', `Model '${p.model}' recognises ${p.languages.join(', ')} only: got language ${describe(p.language)}`, {
      param: p.param ?? 'language',
      details: { model: p.model, languages: p.languages },
    }),
  // scheduler: admission by predicted completion
  deadlineUnreachable: (p: { model: string; timeoutMs: number; predictedMs: number; drainMs: number }) =>
    make(
      'deadline_unreachable',
      `Model '${p.model}' cannot finish this request within its deadline of ${p.timeoutMs} ms: predicted ${Math.round(p.predictedMs)} ms`,
      {
        details: { model: p.model, timeoutMs: p.timeoutMs, predictedMs: Math.round(p.predictedMs), drainMs: Math.round(p.drainMs) },
        retryAfterMs: Math.max(1, Math.round(p.drainMs)),
      },
    ),
  // gateway: speech synthesis
  inputEmpty: () => make('input_empty', 'Expected input to hold text to speak: got none', { param: 'input' }),
  inputTooLong: (p: { characters: number; maxCharacters: number }) =>
    make('input_too_long', `Expected input of at most ${p.maxCharacters} characters: got ${p.characters}`, {
      param: 'input',
      details: { characters: p.characters, maxCharacters: p.maxCharacters },
    }),
  unknownVoice: (p: { model: string; voice: string }) =>
    make('unknown_voice', `Model '${p.model}' has no voice ${describe(p.voice)}`, { param: 'voice', details: { model: p.model } }),
  unsupportedResponseFormat: (p: { got: unknown; formats: readonly string[] }) =>
    make('unsupported_response_format', `Expected response_format to be one of ${p.formats.join(', ')}: got ${describe(p.got)}`, {
      param: 'response_format',
    }),
  speedOutOfRange: (p: { got: unknown; min: number; max: number }) =>
    make('speed_out_of_range', `Expected speed to be a number from ${p.min} to ${p.max}: got ${describe(p.got)}`, { param: 'speed' }),
  unsupportedStreamFormat: (p: { got: unknown; formats: readonly string[] }) =>
    make('unsupported_stream_format', `Expected stream_format to be one of ${p.formats.join(', ')}: got ${describe(p.got)}`, {
      param: 'stream_format',
    }),
  chunkTooLong: (p: { durationMs: number; maxChunkMs: number }) =>
    make('chunk_too_long', `Expected a chunk of at most ${p.maxChunkMs} ms: got ${Math.round(p.durationMs)} ms`, {
      param: 'file',
      details: { durationMs: Math.round(p.durationMs), maxChunkMs: p.maxChunkMs },
    }),
  sessionAlreadyExists: (p: { sessionId: string }) =>
    make('session_already_exists', `The session '${p.sessionId}' already exists`, { param: 'id', details: { sessionId: p.sessionId } }),
  noDiarizationModel: (p: { model: string }) =>
    make('no_diarization_model', `Model '${p.model}' has no diarization model to find the speakers of diarized_json`, {
      param: 'response_format',
      details: { model: p.model },
    }),
  modelTaskMismatch: (p: { model: string; task: string; endpoint: string }) =>
    make('model_task_mismatch', `Model '${p.model}' serves ${p.task}: it cannot answer ${p.endpoint}`, {
      param: 'model',
      details: { model: p.model, task: p.task },
    }),
  // gateway: realtime sessions
  invalidEvent: (p: { reason: string }) => make('invalid_event', `The event is not valid: ${p.reason}`),
  unknownEvent: (p: { type: string }) => make('unknown_event', `Unknown event type ${describe(p.type)}`, { param: 'type' }),
  appendTooLarge: (p: { bytes: number; maxAppendBytes: number }) =>
    make('append_too_large', `Expected at most ${p.maxAppendBytes} bytes of audio in one append: got ${p.bytes}`, {
      param: 'audio',
      details: { bytes: p.bytes, maxAppendBytes: p.maxAppendBytes },
    }),
  inputAudioBufferFull: (p: { maxBufferMs: number }) =>
    make('input_audio_buffer_full', `The input audio buffer holds at most ${p.maxBufferMs} ms: commit or clear it`, {
      param: 'audio',
      details: { maxBufferMs: p.maxBufferMs },
    }),
  unsupportedRealtimeFormat: (p: { param: string; got: unknown }) =>
    make(
      'unsupported_realtime_audio_format',
      `Expected ${p.param} to be audio/pcm at 24000 Hz, audio/pcmu or audio/pcma (beta: pcm16, g711_ulaw, g711_alaw): got ${describe(p.got)}`,
      { param: p.param },
    ),
  invalidAudioData: (p: { reason: string }) =>
    make('invalid_audio_data', `The appended audio is not valid: ${p.reason}`, { param: 'audio' }),
  sessionNotConfigured: () => make('session_not_configured', 'Expected session.update before the first audio'),
  /** OpenAI's words, so clients that match them keep working. */
  inputAudioBufferCommitEmpty: (p: { bufferMs: number; minMs: number }) =>
    make(
      'input_audio_buffer_commit_empty',
      `Error committing input audio buffer: buffer too small. Expected at least ${p.minMs}ms of audio, but buffer only has ${p.bufferMs.toFixed(2)}ms of audio.`,
    ),
  /** OpenAI's words, so clients that match them keep working. */
  cannotUpdateVoice: () => make('cannot_update_voice', "Cannot update a conversation's voice if assistant audio is present."),
  conversationAlreadyHasActiveResponse: (p: { responseId: string }) =>
    make('conversation_already_has_active_response', `Response ${p.responseId} is still in progress`, {
      details: { responseId: p.responseId },
    }),
  responseCancelNotActive: () => make('response_cancel_not_active', 'No response is in progress'),
  itemNotFound: (p: { itemId: unknown; param?: string }) =>
    make('item_not_found', `No item ${describe(p.itemId)} in this session`, { param: p.param ?? 'item_id' }),
  tooManySessions: (p: { maxSessions: number; retryAfterMs: number }) =>
    make('too_many_sessions', `The server holds its limit of ${p.maxSessions} realtime sessions`, {
      details: { maxSessions: p.maxSessions },
      retryAfterMs: p.retryAfterMs,
    }),
  llmFailed: (p: { reason: string; cause?: unknown }) => make('llm_failed', `The LLM failed: ${p.reason}`, { cause: p.cause }),
};

function describe(value: unknown): string {
  if (typeof value === 'string') return `'${value.length > 64 ? `${value.slice(0, 64)}...` : value}'`;
  if (value === undefined) return 'nothing';
  try {
    const text = JSON.stringify(value);
    return text.length > 64 ? `${text.slice(0, 64)}...` : text;
  } catch {
    return String(value);
  }
}
