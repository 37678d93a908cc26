/**
 * OpenAI Realtime API shapes (WebSocket /v1/realtime) that the gateway and the bench share: the
 * audio formats, the limits and the client event names. Server events are built in the gateway
 * with GA names and renamed for beta clients there (gateway/realtime/event-names.ts).
 */

/** Audio formats of a realtime session, by their beta names (GA: audio/pcm at 24 kHz, audio/pcmu, audio/pcma). */
export const REALTIME_AUDIO_FORMATS = ['pcm16', 'g711_ulaw', 'g711_alaw'] as const;
export type RealtimeAudioFormat = (typeof REALTIME_AUDIO_FORMATS)[number];

/** Sample rate of each format: pcm16 is 24 kHz (the only rate OpenAI accepts), G.711 8 kHz. */
export const REALTIME_FORMAT_RATE_HZ: Readonly<Record<RealtimeAudioFormat, number>> = {
  pcm16: 24_000,
  g711_ulaw: 8_000,
  g711_alaw: 8_000,
};

/** Bytes per sample of each format. */
export const REALTIME_FORMAT_SAMPLE_BYTES: Readonly<Record<RealtimeAudioFormat, number>> = {
  pcm16: 2,
  g711_ulaw: 1,
  g711_alaw: 1,
};

/** GA `format.type` of each format. */
export const REALTIME_GA_FORMAT_TYPES: Readonly<Record<RealtimeAudioFormat, string>> = {
  pcm16: 'audio/pcm',
  g711_ulaw: 'audio/pcmu',
  g711_alaw: 'audio/pcma',
};

/** The client events a session answers (GA names; beta clients send the same, plus transcription_session.update). */
export const REALTIME_CLIENT_EVENTS = [
  'session.update',
  'transcription_session.update',
  'input_audio_buffer.append',
  'input_audio_buffer.commit',
  'input_audio_buffer.clear',
  'conversation.item.create',
  'conversation.item.delete',
  'conversation.item.retrieve',
  'conversation.item.truncate',
  'response.create',
  'response.cancel',
] as const;
export type RealtimeClientEventType = (typeof REALTIME_CLIENT_EVENTS)[number];

/** The subprotocol a browser client offers first, and the prefix of the one that carries its API key. */
export const REALTIME_SUBPROTOCOL = 'realtime';
export const REALTIME_KEY_SUBPROTOCOL_PREFIX = 'openai-insecure-api-key.';
/** What marks a beta client: this header value, or this subprotocol. */
export const REALTIME_BETA_HEADER_VALUE = 'realtime=v1';
export const REALTIME_BETA_SUBPROTOCOL = 'openai-beta.realtime-v1';

/** The least audio an input_audio_buffer.commit of the client's takes, in milliseconds (OpenAI's rule; server VAD commits are not held to it). */
export const MIN_COMMIT_MS = 100;

/** Server VAD settings OpenAI documents as defaults. */
export const DEFAULT_VAD_THRESHOLD = 0.5;
export const DEFAULT_VAD_PREFIX_PADDING_MS = 300;
export const DEFAULT_VAD_SILENCE_DURATION_MS = 500;

/** An `error` server event: the session stays open. */
export interface RealtimeErrorEvent {
  type: 'error';
  event_id: string;
  error: { type: string; code: string; message: string; param: string | null; event_id: string | null };
}

/** One limit of a rate_limits.updated event, as OpenAI reports it. */
export interface RealtimeRateLimit {
  name: 'requests' | 'tokens';
  limit: number;
  remaining: number;
  /** Seconds until the limit resets. */
  reset_seconds: number;
}

/** Token usage of a response (response.done), as OpenAI reports it. */
export interface RealtimeResponseUsage {
  total_tokens: number;
  input_tokens: number;
  output_tokens: number;
  input_token_details: { text_tokens: number; audio_tokens: number; cached_tokens: number };
  output_token_details: { text_tokens: number; audio_tokens: number };
}
