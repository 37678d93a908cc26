/**
 * OpenAI-compatible transcription API shapes (POST /v1/audio/transcriptions), shared by the
 * gateway and the bench. TypeBox schemas validate the form fields after coercion from strings.
 */
import { Type, type Static } from '@sinclair/typebox';

export const RESPONSE_FORMATS = ['json', 'text', 'srt', 'vtt', 'verbose_json'] as const;
export type ResponseFormat = (typeof RESPONSE_FORMATS)[number];
export const TIMESTAMP_GRANULARITIES = ['word', 'segment'] as const;
/** What the response_format field accepts: the transcript formats, and diarized_json (speaker segments). */
export const FIELD_RESPONSE_FORMATS = [...RESPONSE_FORMATS, 'diarized_json'] as const;

/** The longest `prompt` a transcription takes (the realtime session's transcription prompt too). */
export const MAX_PROMPT_CHARS = 8192;

export const TranscriptionFieldsSchema = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 256 }),
    language: Type.Optional(Type.String({ pattern: '^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})?$' })),
    prompt: Type.Optional(Type.String({ maxLength: MAX_PROMPT_CHARS })),
    response_format: Type.Union(
      FIELD_RESPONSE_FORMATS.map((f) => Type.Literal(f)),
      { default: 'json' },
    ),
    temperature: Type.Number({ minimum: 0, maximum: 1, default: 0 }),
    timestamp_granularities: Type.Array(Type.Union(TIMESTAMP_GRANULARITIES.map((g) => Type.Literal(g))), {
      default: ['segment'],
      maxItems: 2,
    }),
    stream: Type.Boolean({ default: false }),
  },
  { additionalProperties: false },
);
export type TranscriptionFields = Static<typeof TranscriptionFieldsSchema>;

/** `verbose_json` segment, with the fields OpenAI's SDK types declare. */
export interface VerboseSegment {
  id: number;
  seek: number;
  start: number;
  end: number;
  text: string;
  tokens: number[];
  temperature: number;
  avg_logprob: number;
  compression_ratio: number;
  no_speech_prob: number;
}

export interface VerboseTranscription {
  task: 'transcribe' | 'translate';
  language: string;
  duration: number;
  text: string;
  segments: VerboseSegment[];
  words?: { word: string; start: number; end: number }[];
  usage: { type: 'duration'; seconds: number };
  /**
   * voxmux's extension. `language_source`: `requested` (the call named the language), `assumed`
   * (the model recognises one language and the call named none: it was not detected) or `reported`
   * (the engine said so).
   */
  voxmux?: { language_source: 'requested' | 'assumed' | 'reported' };
}

export interface JsonTranscription {
  text: string;
  usage: { type: 'duration'; seconds: number };
}

/** Server-sent events of a streamed transcription. */
export type TranscriptStreamEvent =
  | { type: 'transcript.text.delta'; delta: string }
  | { type: 'transcript.text.done'; text: string; usage: { type: 'duration'; seconds: number } };

export type { OpenAiErrorEnvelope } from './openai-audio.js';
