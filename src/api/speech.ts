/**
 * OpenAI-compatible speech API shapes (POST /v1/audio/speech), shared by the gateway and the
 * bench: the JSON body as a TypeBox schema, the response formats and the SSE events.
 */
import { Type, type Static } from '@sinclair/typebox';

export const SPEECH_RESPONSE_FORMATS = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const;
export type SpeechResponseFormat = (typeof SPEECH_RESPONSE_FORMATS)[number];
export const SPEECH_STREAM_FORMATS = ['audio', 'sse'] as const;
export type SpeechStreamFormat = (typeof SPEECH_STREAM_FORMATS)[number];

/** Longest input, in characters (Unicode code points), as OpenAI documents it. */
export const MAX_SPEECH_INPUT_CHARS = 4096;
/** Longest instructions, in characters. */
export const MAX_SPEECH_INSTRUCTIONS_CHARS = 4096;
export const MIN_SPEECH_SPEED = 0.25;
export const MAX_SPEECH_SPEED = 4;
/** The rate of every response format: OpenAI's pcm is 24 kHz 16-bit mono little-endian. */
export const SPEECH_SAMPLE_RATE_HZ = 24_000;

/**
 * The body. `voice` is a name or OpenAI's `{ "id": ... }` form; `instructions` is accepted and
 * ignored (no engine takes style prompts). The gateway checks lengths, the speed range and the
 * formats itself, so that each gets its own error code.
 */
export const SpeechBodySchema = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 256 }),
    input: Type.String(),
    voice: Type.Union([Type.String({ minLength: 1, maxLength: 256 }), Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) })]),
    instructions: Type.Optional(Type.String()),
    response_format: Type.String({ default: 'mp3' }),
    speed: Type.Number({ default: 1 }),
    stream_format: Type.String({ default: 'audio' }),
  },
  { additionalProperties: false },
);
export type SpeechBody = Static<typeof SpeechBodySchema>;

/** The validated call: formats narrowed, voice as a name. */
export interface SpeechFields {
  model: string;
  input: string;
  voice: string;
  responseFormat: SpeechResponseFormat;
  speed: number;
  streamFormat: SpeechStreamFormat;
}

/** One SSE event of `stream_format=sse`: a piece of the audio, in the call's response_format, base64. */
export interface SpeechAudioDeltaEvent {
  type: 'speech.audio.delta';
  audio: string;
}

/**
 * The last SSE event. voxmux counts `input_tokens` as the input's characters and `output_tokens`
 * as the seconds of audio, rounded up (no tokenizer is involved).
 */
export interface SpeechAudioDoneEvent {
  type: 'speech.audio.done';
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
}

export type SpeechStreamEvent = SpeechAudioDeltaEvent | SpeechAudioDoneEvent;
