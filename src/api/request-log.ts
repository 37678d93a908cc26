/**
 * One line of the request log: a finished API call, written as one JSON object a line by the
 * server (gateway.requestLog) and read back by `voxmux cost`. It holds what a call cost and how it
 * went, never its audio, text or prompt.
 */
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

const NullableMs = (description: string) => Type.Union([Type.Number({ minimum: 0 }), Type.Null()], { description });

export const RequestLogKindSchema = Type.Union([
  Type.Literal('transcription'),
  Type.Literal('speech'),
  // A whole file (POST /v1/audio/diarization) or one chunk of a session.
  Type.Literal('diarization'),
  // A whole voice call (WebSocket /v1/realtime), written when it ends.
  Type.Literal('realtime'),
]);
export type RequestLogKind = Static<typeof RequestLogKindSchema>;

export const RequestLogLineSchema = Type.Object(
  {
    time: Type.String({ description: 'When the call arrived, ISO 8601 in UTC.' }),
    durationMs: Type.Number({
      minimum: 0,
      description: 'From arrival to the last byte of the answer (a realtime call: to its end), in milliseconds.',
    }),
    model: Type.String({ description: 'The canonical model name (aliases resolved); the name asked for where none resolved.' }),
    kind: RequestLogKindSchema,
    audioInSeconds: Type.Number({
      minimum: 0,
      description: "Transcription and diarization: the decoded audio; realtime: the caller's audio received; speech: 0. In seconds.",
    }),
    audioOutSeconds: Type.Number({
      minimum: 0,
      description: 'Speech and realtime: the audio synthesized, in seconds; transcription and diarization: 0.',
    }),
    queueMs: NullableMs('Time queued before an instance took the work, in milliseconds; null where unknown.'),
    serviceMs: NullableMs('Time from dispatch to the result, in milliseconds; null where unknown.'),
    status: Type.Integer({ description: 'The HTTP status answered.' }),
    code: Type.Union([Type.String(), Type.Null()], { description: 'The error code (docs/errors.md), or null.' }),
    instanceId: Type.Union([Type.String(), Type.Null()], { description: 'The instance that served the call; null where none did.' }),
    gpu: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: "The served instance's GPU index; null on CPU or unknown.",
    }),
    gpuSeconds: Type.Union([Type.Number({ minimum: 0 }), Type.Null()], {
      description:
        "Service time on a GPU instance, in seconds; 0 on CPU or when nothing ran; null where unknown. A realtime call: its transcriptions' and speech's busy time on GPU instances.",
    }),
  },
  { additionalProperties: false },
);
export type RequestLogLine = Static<typeof RequestLogLineSchema>;

/** Parses one line of a request log; undefined for a line that is not a valid entry (a torn last line). */
export function parseRequestLogLine(text: string): RequestLogLine | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return Value.Check(RequestLogLineSchema, value) ? value : undefined;
}
