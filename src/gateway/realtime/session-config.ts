/**
 * A realtime session's settings: what session.update changes (GA nested shape or beta flat
 * shape), and the session object that session.created and session.updated carry back, in the
 * client's shape. Unknown fields of OpenAI's (tools, tracing, noise reduction...) are accepted and
 * ignored; a field voxmux reads and cannot honour is an error.
 */
import {
  DEFAULT_VAD_PREFIX_PADDING_MS,
  DEFAULT_VAD_SILENCE_DURATION_MS,
  DEFAULT_VAD_THRESHOLD,
  REALTIME_AUDIO_FORMATS,
  REALTIME_FORMAT_RATE_HZ,
  REALTIME_GA_FORMAT_TYPES,
  type RealtimeAudioFormat,
} from '../../api/realtime.js';
import { MAX_PROMPT_CHARS } from '../../api/transcription.js';
import { errors } from '../../core/error-catalog.js';
import type { ChatTool, ChatToolChoice } from './chat-responder.js';

export interface TurnDetectionSettings {
  threshold: number;
  prefixPaddingMs: number;
  silenceDurationMs: number;
  createResponse: boolean;
  interruptResponse: boolean;
}

export interface SessionSettings {
  /** realtime: speech to speech; transcription: input transcription only (intent=transcription). */
  kind: 'realtime' | 'transcription';
  model: string;
  instructions: string;
  outputModalities: readonly ('audio' | 'text')[];
  inputFormat: RealtimeAudioFormat;
  outputFormat: RealtimeAudioFormat;
  voice: string;
  speed: number;
  /** The model clients named for input transcription (events are sent only when set). */
  transcriptionModel: string | undefined;
  language: string | undefined;
  /** Text that guides the recogniser (vocabulary, spelling, style), as the transcription API's prompt. */
  transcriptionPrompt: string | undefined;
  /** Undefined: turn_detection null, the client commits. */
  turnDetection: TurnDetectionSettings | undefined;
  maxOutputTokens: number | 'inf';
  /** Functions the LLM may call (passed to an OpenAI-compatible LLM as chat-completion tools). */
  tools: readonly ChatTool[];
  toolChoice: ChatToolChoice;
}

/** Most functions a session may declare. */
export const MAX_TOOLS = 128;

export const DEFAULT_TURN_DETECTION: TurnDetectionSettings = {
  threshold: DEFAULT_VAD_THRESHOLD,
  prefixPaddingMs: DEFAULT_VAD_PREFIX_PADDING_MS,
  silenceDurationMs: DEFAULT_VAD_SILENCE_DURATION_MS,
  createResponse: true,
  interruptResponse: true,
};

/** A new session's settings, before any session.update: the realtime API's defaults. */
export function newSessionSettings(p: { kind: SessionSettings['kind']; model: string; instructions: string }): SessionSettings {
  return {
    ...p,
    outputModalities: ['audio'],
    inputFormat: 'pcm16',
    outputFormat: 'pcm16',
    voice: 'alloy',
    speed: 1,
    transcriptionModel: undefined,
    language: undefined,
    transcriptionPrompt: undefined,
    turnDetection: { ...DEFAULT_TURN_DETECTION },
    maxOutputTokens: 'inf',
    tools: [],
    toolChoice: 'auto',
  };
}

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function field<T>(value: unknown, param: string, check: (v: unknown) => v is T, expected: string): T | undefined {
  if (value === undefined) return undefined;
  if (!check(value)) throw errors.invalidParameter({ param, expected, got: value });
  return value;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isPrompt = (v: unknown): v is string => isString(v) && v.length <= MAX_PROMPT_CHARS;
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';

/** GA audio.output.voice: a voice name, or a custom voice reference `{id}` (its name). */
function gaVoice(value: unknown): string | undefined {
  if (isRecord(value) && typeof value.id === 'string') return value.id;
  return field(value, 'session.audio.output.voice', isString, 'a voice name or {"id": name}');
}

function betaFormat(value: unknown, param: string): RealtimeAudioFormat | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string' && (REALTIME_AUDIO_FORMATS as readonly string[]).includes(value)) return value as RealtimeAudioFormat;
  throw errors.unsupportedRealtimeFormat({ param, got: value });
}

function gaFormat(value: unknown, param: string): RealtimeAudioFormat | undefined {
  if (value === undefined) return undefined;
  if (!isRecord(value)) throw errors.unsupportedRealtimeFormat({ param, got: value });
  const format = REALTIME_AUDIO_FORMATS.find((f) => REALTIME_GA_FORMAT_TYPES[f] === value.type);
  if (format === undefined) throw errors.unsupportedRealtimeFormat({ param, got: value });
  if (value.rate !== undefined && value.rate !== REALTIME_FORMAT_RATE_HZ[format])
    throw errors.unsupportedRealtimeFormat({ param, got: value });
  return format;
}

function turnDetection(
  value: unknown,
  param: string,
  current: TurnDetectionSettings | undefined,
): TurnDetectionSettings | undefined | 'keep' {
  if (value === undefined) return 'keep';
  if (value === null) return undefined;
  if (!isRecord(value)) throw errors.invalidParameter({ param, expected: 'an object or null', got: value });
  if (value.type !== undefined && value.type !== 'server_vad') {
    throw errors.invalidParameter({ param: `${param}.type`, expected: "'server_vad' (or turn_detection null)", got: value.type });
  }
  const base = current ?? DEFAULT_TURN_DETECTION;
  const threshold = field(value.threshold, `${param}.threshold`, isNumber, 'a number from 0 to 1') ?? base.threshold;
  if (threshold < 0 || threshold > 1)
    throw errors.invalidParameter({ param: `${param}.threshold`, expected: 'a number from 0 to 1', got: threshold });
  const ms = (v: unknown, name: string, fallback: number) => {
    const got = field(v, `${param}.${name}`, isNumber, 'a number of milliseconds from 0 to 10000') ?? fallback;
    if (got < 0 || got > 10_000)
      throw errors.invalidParameter({ param: `${param}.${name}`, expected: 'a number of milliseconds from 0 to 10000', got });
    return got;
  };
  return {
    threshold,
    prefixPaddingMs: ms(value.prefix_padding_ms, 'prefix_padding_ms', base.prefixPaddingMs),
    silenceDurationMs: ms(value.silence_duration_ms, 'silence_duration_ms', base.silenceDurationMs),
    createResponse: field(value.create_response, `${param}.create_response`, isBoolean, 'a boolean') ?? base.createResponse,
    interruptResponse: field(value.interrupt_response, `${param}.interrupt_response`, isBoolean, 'a boolean') ?? base.interruptResponse,
  };
}

type TranscriptionSettings = Pick<SessionSettings, 'transcriptionModel' | 'language' | 'transcriptionPrompt'>;

function transcription(value: unknown, param: string): TranscriptionSettings | 'keep' {
  if (value === undefined) return 'keep';
  if (value === null) return { transcriptionModel: undefined, language: undefined, transcriptionPrompt: undefined };
  if (!isRecord(value)) throw errors.invalidParameter({ param, expected: 'an object or null', got: value });
  return {
    transcriptionModel: field(value.model, `${param}.model`, isString, 'a string') ?? 'whisper-1',
    language: field(value.language, `${param}.language`, isString, 'a language code'),
    transcriptionPrompt: field(value.prompt, `${param}.prompt`, isPrompt, `a string of at most ${MAX_PROMPT_CHARS} characters`),
  };
}

function modalities(value: unknown, param: string): ('audio' | 'text')[] | undefined {
  if (value === undefined) return undefined;
  const isValid = Array.isArray(value) && value.length > 0 && value.every((m) => m === 'audio' || m === 'text');
  if (!isValid) throw errors.invalidParameter({ param, expected: "['audio'] or ['text']", got: value });
  // Audio output always carries its transcript: ['audio', 'text'] (beta) is audio.
  return (value as string[]).includes('audio') ? ['audio'] : ['text'];
}

/**
 * What a response.create may override of the session: `instructions` and `output_modalities`
 * (beta `modalities`), checked as session.update checks them.
 * @throws invalid_parameter
 */
export function parseResponseOverrides(response: unknown): { instructions?: string; outputModalities?: readonly ('audio' | 'text')[] } {
  if (response === undefined || response === null) return {};
  if (!isRecord(response)) throw errors.invalidParameter({ param: 'response', expected: 'an object', got: response });
  const instructions = field(response.instructions, 'response.instructions', isString, 'a string');
  const outputModalities =
    modalities(response.output_modalities, 'response.output_modalities') ?? modalities(response.modalities, 'response.modalities');
  return { ...(instructions === undefined ? {} : { instructions }), ...(outputModalities === undefined ? {} : { outputModalities }) };
}

function maxTokens(value: unknown, param: string): number | 'inf' | undefined {
  if (value === undefined || value === 'inf') return value;
  if (isNumber(value) && Number.isInteger(value) && value >= 1 && value <= 4096) return value;
  throw errors.invalidParameter({ param, expected: "an integer from 1 to 4096 or 'inf'", got: value });
}

/**
 * The settings after a session.update (`session` is the event's session object).
 * @throws missing_parameter (GA session.type), invalid_parameter, unsupported_realtime_audio_format
 */
export function applySessionUpdate(current: SessionSettings, session: unknown, shape: 'ga' | 'beta'): SessionSettings {
  if (!isRecord(session)) throw errors.invalidParameter({ param: 'session', expected: 'an object', got: session });
  const next: SessionSettings = { ...current };
  if (shape === 'ga') {
    if (session.type === undefined) throw errors.missingParameter({ param: 'session.type' });
    if (session.type !== 'realtime' && session.type !== 'transcription') {
      throw errors.invalidParameter({ param: 'session.type', expected: "'realtime' or 'transcription'", got: session.type });
    }
    next.kind = session.type;
    const audio = field(session.audio, 'session.audio', isRecord, 'an object') ?? {};
    const input = field(audio.input, 'session.audio.input', isRecord, 'an object') ?? {};
    const output = field(audio.output, 'session.audio.output', isRecord, 'an object') ?? {};
    next.inputFormat = gaFormat(input.format, 'session.audio.input.format') ?? next.inputFormat;
    next.outputFormat = gaFormat(output.format, 'session.audio.output.format') ?? next.outputFormat;
    next.voice = gaVoice(output.voice) ?? next.voice;
    next.speed = speed(output.speed, 'session.audio.output.speed') ?? next.speed;
    const td = turnDetection(input.turn_detection, 'session.audio.input.turn_detection', current.turnDetection);
    if (td !== 'keep') next.turnDetection = td;
    const tr = transcription(input.transcription, 'session.audio.input.transcription');
    if (tr !== 'keep') Object.assign(next, tr);
    next.outputModalities = modalities(session.output_modalities, 'session.output_modalities') ?? next.outputModalities;
    next.maxOutputTokens = maxTokens(session.max_output_tokens, 'session.max_output_tokens') ?? next.maxOutputTokens;
  } else {
    next.inputFormat = betaFormat(session.input_audio_format, 'session.input_audio_format') ?? next.inputFormat;
    next.outputFormat = betaFormat(session.output_audio_format, 'session.output_audio_format') ?? next.outputFormat;
    next.voice = field(session.voice, 'session.voice', isString, 'a voice name') ?? next.voice;
    next.speed = speed(session.speed, 'session.speed') ?? next.speed;
    const td = turnDetection(session.turn_detection, 'session.turn_detection', current.turnDetection);
    if (td !== 'keep') next.turnDetection = td;
    const tr = transcription(session.input_audio_transcription, 'session.input_audio_transcription');
    if (tr !== 'keep') Object.assign(next, tr);
    next.outputModalities = modalities(session.modalities, 'session.modalities') ?? next.outputModalities;
    next.maxOutputTokens = maxTokens(session.max_response_output_tokens, 'session.max_response_output_tokens') ?? next.maxOutputTokens;
  }
  next.instructions = field(session.instructions, 'session.instructions', isString, 'a string') ?? next.instructions;
  next.tools = tools(session.tools, 'session.tools') ?? next.tools;
  next.toolChoice = toolChoice(session.tool_choice, 'session.tool_choice') ?? next.toolChoice;
  return next;
}

/** The speed of the output audio, 0.25 to 1.5, at `param` (the field the client sent). */
function speed(value: unknown, param: string): number | undefined {
  const got = field(value, param, isNumber, 'a number from 0.25 to 1.5');
  if (got !== undefined && (got < 0.25 || got > 1.5)) throw errors.invalidParameter({ param, expected: 'a number from 0.25 to 1.5', got });
  return got;
}

const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** session.tools: `[{type: 'function', name, description?, parameters?}]`, the same in both shapes. */
function tools(value: unknown, param: string): ChatTool[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length > MAX_TOOLS) {
    throw errors.invalidParameter({ param, expected: `a list of at most ${MAX_TOOLS} function tools`, got: value });
  }
  return value.map((tool: unknown, i) => {
    const at = `${param}[${i}]`;
    if (!isRecord(tool) || tool.type !== 'function')
      throw errors.invalidParameter({ param: at, expected: "{type: 'function', name, ...}", got: tool });
    if (typeof tool.name !== 'string' || !FUNCTION_NAME.test(tool.name)) {
      throw errors.invalidParameter({ param: `${at}.name`, expected: '1 to 64 letters, digits, underscores or dashes', got: tool.name });
    }
    return {
      name: tool.name,
      description: field(tool.description, `${at}.description`, isString, 'a string') ?? '',
      parameters: field(tool.parameters, `${at}.parameters`, isRecord, 'a JSON Schema object') ?? { type: 'object', properties: {} },
    };
  });
}

/** session.tool_choice: 'auto', 'none', 'required' or {type: 'function', name}. */
function toolChoice(value: unknown, param: string): ChatToolChoice | undefined {
  if (value === undefined) return undefined;
  if (value === 'auto' || value === 'none' || value === 'required') return value;
  if (isRecord(value) && value.type === 'function' && typeof value.name === 'string') return { name: value.name };
  throw errors.invalidParameter({ param, expected: "'auto', 'none', 'required' or {type: 'function', name}", got: value });
}

function toolObjects(settings: SessionSettings): Json[] {
  return settings.tools.map((t) => ({ type: 'function', name: t.name, description: t.description, parameters: t.parameters }));
}

function toolChoiceObject(choice: ChatToolChoice): Json | string {
  return typeof choice === 'string' ? choice : { type: 'function', name: choice.name };
}

/** A format as GA shows it (session objects, response.audio.output.format). */
export function gaFormatObject(format: RealtimeAudioFormat): Json {
  return format === 'pcm16' ? { type: 'audio/pcm', rate: REALTIME_FORMAT_RATE_HZ.pcm16 } : { type: REALTIME_GA_FORMAT_TYPES[format] };
}

function turnDetectionObject(td: TurnDetectionSettings | undefined): Json | null {
  if (td === undefined) return null;
  return {
    type: 'server_vad',
    threshold: td.threshold,
    prefix_padding_ms: td.prefixPaddingMs,
    silence_duration_ms: td.silenceDurationMs,
    create_response: td.createResponse,
    interrupt_response: td.interruptResponse,
    idle_timeout_ms: null,
  };
}

/** The session object of session.created and session.updated, in the client's shape. */
export function toSessionObject(settings: SessionSettings, context: { sessionId: string; shape: 'ga' | 'beta' }): Json {
  const transcriptionObject =
    settings.transcriptionModel === undefined
      ? null
      : {
          model: settings.transcriptionModel,
          ...(settings.language === undefined ? {} : { language: settings.language }),
          ...(settings.transcriptionPrompt === undefined ? {} : { prompt: settings.transcriptionPrompt }),
        };
  if (context.shape === 'beta') {
    return {
      id: context.sessionId,
      object: 'realtime.session',
      model: settings.model,
      modalities: settings.outputModalities.includes('audio') ? ['audio', 'text'] : ['text'],
      instructions: settings.instructions,
      voice: settings.voice,
      speed: settings.speed,
      input_audio_format: settings.inputFormat,
      output_audio_format: settings.outputFormat,
      input_audio_transcription: transcriptionObject,
      turn_detection: turnDetectionObject(settings.turnDetection),
      tools: toolObjects(settings),
      tool_choice: toolChoiceObject(settings.toolChoice),
      temperature: 0.8,
      max_response_output_tokens: settings.maxOutputTokens,
    };
  }
  const input = {
    format: gaFormatObject(settings.inputFormat),
    transcription: transcriptionObject,
    noise_reduction: null,
    turn_detection: turnDetectionObject(settings.turnDetection),
  };
  if (settings.kind === 'transcription') {
    return { type: 'transcription', object: 'realtime.transcription_session', id: context.sessionId, audio: { input }, include: null };
  }
  return {
    type: 'realtime',
    object: 'realtime.session',
    id: context.sessionId,
    model: settings.model,
    output_modalities: settings.outputModalities,
    instructions: settings.instructions,
    tools: toolObjects(settings),
    tool_choice: toolChoiceObject(settings.toolChoice),
    max_output_tokens: settings.maxOutputTokens,
    tracing: null,
    prompt: null,
    expires_at: 0,
    include: null,
    audio: { input, output: { format: gaFormatObject(settings.outputFormat), voice: settings.voice, speed: settings.speed } },
  };
}
