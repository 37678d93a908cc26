/**
 * Server events are built with GA names; a beta client (OpenAI-Beta: realtime=v1) gets the beta
 * names. GA's conversation.item.added is beta's conversation.item.created, and beta has no
 * conversation.item.done (undefined: not sent).
 */
const BETA_NAMES: Readonly<Record<string, string | undefined>> = {
  'response.output_audio.delta': 'response.audio.delta',
  'response.output_audio.done': 'response.audio.done',
  'response.output_audio_transcript.delta': 'response.audio_transcript.delta',
  'response.output_audio_transcript.done': 'response.audio_transcript.done',
  'response.output_text.delta': 'response.text.delta',
  'response.output_text.done': 'response.text.done',
  'conversation.item.added': 'conversation.item.created',
  'conversation.item.done': undefined,
};

/** The event's name for the client's API shape; undefined when that shape has no such event. */
export function toClientEventName(type: string, shape: 'ga' | 'beta'): string | undefined {
  if (shape === 'ga' || !Object.hasOwn(BETA_NAMES, type)) return type;
  return BETA_NAMES[type];
}
