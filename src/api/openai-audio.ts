/**
 * OpenAI-compatible audio API shapes: transcription responses, the streamed transcription events,
 * the model list and the error envelope. Plain types and type guards with no dependencies, shared
 * by the gateway (which produces them) and the bench (which reads them from any compatible server).
 */

/** `response_format=json`: the default transcription response. */
export interface TranscriptionJson {
  text: string;
}

export interface TranscriptionSegment {
  id: number;
  start: number;
  end: number;
  text: string;
}

/** `response_format=verbose_json`. `duration` is in seconds, as OpenAI sends it. */
export interface TranscriptionVerboseJson extends TranscriptionJson {
  language?: string;
  duration?: number;
  segments?: TranscriptionSegment[];
}

/** The response formats of POST /v1/audio/transcriptions. */
export const TRANSCRIPTION_RESPONSE_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt', 'diarized_json'] as const;
export type TranscriptionResponseFormat = (typeof TRANSCRIPTION_RESPONSE_FORMATS)[number];

/** One SSE event of a streamed transcription (`stream=true`): a piece of text. */
export interface TranscriptTextDeltaEvent {
  type: 'transcript.text.delta';
  delta: string;
}

/** The last SSE event of a streamed transcription: the whole text. */
export interface TranscriptTextDoneEvent {
  type: 'transcript.text.done';
  text: string;
}

/** The error envelope of every non-2xx response, and of an SSE `error` event. */
export interface OpenAiErrorEnvelope {
  error: {
    message: string;
    type: string;
    param: string | null;
    code: string | null;
  };
}

/** GET /v1/models. */
export interface ModelList {
  object: 'list';
  data: Array<{ id: string; object: 'model'; created?: number; owned_by?: string }>;
}

export type TranscriptionStreamEvent = TranscriptTextDeltaEvent | TranscriptTextDoneEvent;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function isTranscriptionJson(value: unknown): value is TranscriptionJson {
  return isRecord(value) && typeof value.text === 'string';
}

export function isTranscriptTextDeltaEvent(value: unknown): value is TranscriptTextDeltaEvent {
  return isRecord(value) && value.type === 'transcript.text.delta' && typeof value.delta === 'string';
}

export function isTranscriptTextDoneEvent(value: unknown): value is TranscriptTextDoneEvent {
  return isRecord(value) && value.type === 'transcript.text.done' && typeof value.text === 'string';
}

/** Accepts envelopes whose `code` or `param` is missing, as some compatible servers send them. */
export function isOpenAiErrorEnvelope(value: unknown): value is OpenAiErrorEnvelope {
  return isRecord(value) && isRecord(value.error) && typeof value.error.message === 'string';
}

export function isModelList(value: unknown): value is ModelList {
  return isRecord(value) && Array.isArray(value.data) && value.data.every((entry) => isRecord(entry) && typeof entry.id === 'string');
}
