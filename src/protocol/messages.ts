/**
 * Typed protocol messages. ControllerMessage goes down to an instance, HostMessage comes up.
 * Incoming meta is validated against a TypeBox schema before anything reads it.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { errors } from '../core/error-catalog.js';
import { encodeFrameChunks, MessageTag, messageNameOf, type Frame } from './frame.js';

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const WordSchema = Type.Object({ word: Type.String(), start: Type.Number(), end: Type.Number() });
export const SegmentSchema = Type.Object({ start: Type.Number(), end: Type.Number(), text: Type.String() });

const ResultOk = Type.Object({
  requestId: Type.String(),
  ok: Type.Literal(true),
  text: Type.String(),
  language: Type.String(),
  durationS: Type.Number(),
  segments: Nullable(Type.Array(SegmentSchema)),
  words: Nullable(Type.Array(WordSchema)),
});
const ResultFailed = Type.Object({
  requestId: Type.String(),
  ok: Type.Literal(false),
  code: Type.String(),
  message: Type.String(),
});

const HostMetaSchemas = {
  Hello: Type.Object({
    protocolVersion: Type.Integer(),
    hostVersion: Type.String(),
    pid: Type.Integer(),
    adapters: Type.Array(Type.String()),
  }),
  LoadResult: Type.Object({
    model: Type.String(),
    device: Type.String(),
    parameters: Type.Integer(),
    memoryBytes: Type.Integer(),
    loadMs: Type.Integer(),
  }),
  WarmupResult: Type.Object({ warmupMs: Type.Integer(), graphsCaptured: Type.Integer() }),
  BatchResult: Type.Object({
    batchId: Type.String(),
    results: Type.Array(Type.Union([ResultOk, ResultFailed])),
    computeMs: Type.Number(),
  }),
  HeartbeatAck: Type.Object({
    seq: Type.Integer(),
    state: Type.Union([Type.Literal('idle'), Type.Literal('busy'), Type.Literal('wedged')]),
    busyMs: Type.Integer(),
    queuedBatches: Type.Integer(),
    memoryBytes: Type.Integer(),
    eagerBatches: Type.Integer(),
    graphReplays: Type.Integer(),
  }),
  Closed: Type.Object({}),
  Error: Type.Object({ code: Type.String(), message: Type.String(), requestId: Nullable(Type.String()) }),
} as const;

type HostMetas = { [K in keyof typeof HostMetaSchemas]: Static<(typeof HostMetaSchemas)[K]> };
export type HostMessage = {
  [K in keyof HostMetas]: { type: K; correlationId: number } & HostMetas[K];
}[keyof HostMetas];
export type BatchItemResult = Static<typeof ResultOk> | Static<typeof ResultFailed>;
export type Word = Static<typeof WordSchema>;
export type Segment = Static<typeof SegmentSchema>;

export interface RunBatchRequest {
  requestId: string;
  /** 16 kHz mono 16-bit PCM: the wire format of RunBatch bodies. */
  audio: Int16Array;
  language: string | null;
  prompt: string | null;
  wordTimestamps: boolean;
}

export type ControllerMessage =
  | {
      type: 'LoadRequest';
      correlationId: number;
      instanceId: string;
      model: string;
      adapter: string;
      options: Record<string, unknown>;
      loadLockPath: string | null;
    }
  | { type: 'WarmupRequest'; correlationId: number }
  | { type: 'RunBatch'; correlationId: number; batchId: string; requests: readonly RunBatchRequest[] }
  | { type: 'Heartbeat'; correlationId: number; seq: number }
  | { type: 'Close'; correlationId: number };

/** Validates an incoming frame as a HostMessage; a frame of a down type or bad meta is a bad_frame. */
export function toHostMessage(frame: Frame): HostMessage {
  const name = messageNameOf(frame.type);
  if (name === undefined || !(name in HostMetaSchemas)) {
    throw errors.badFrame({ reason: `type 0x${frame.type.toString(16)} is not a host message` });
  }
  const schema = HostMetaSchemas[name as keyof typeof HostMetaSchemas];
  if (!Value.Check(schema, frame.meta)) {
    const first = Value.Errors(schema, frame.meta).First();
    throw errors.badFrame({ reason: `${name} meta ${first?.path ?? ''}: ${first?.message ?? 'invalid'}` });
  }
  return { type: name, correlationId: frame.correlationId, ...frame.meta } as HostMessage;
}

/**
 * Encodes a ControllerMessage as the chunks of one frame, to be written in order (see
 * encodeFrameChunks): a RunBatch's audio is not copied, its requests' PCM buffers are chunks.
 */
export function fromControllerMessage(message: ControllerMessage): Uint8Array[] {
  const frame = (type: number, meta: Record<string, unknown>, body: readonly Uint8Array[] = []) =>
    encodeFrameChunks({ type: type as Frame['type'], correlationId: message.correlationId, meta }, body);
  switch (message.type) {
    case 'LoadRequest':
      return frame(MessageTag.LoadRequest, {
        instanceId: message.instanceId,
        model: message.model,
        adapter: message.adapter,
        options: message.options,
        loadLockPath: message.loadLockPath,
      });
    case 'WarmupRequest':
      return frame(MessageTag.WarmupRequest, {});
    case 'RunBatch':
      // Int16Array is little-endian on every platform Node supports: the views are the wire bytes.
      return frame(
        MessageTag.RunBatch,
        {
          batchId: message.batchId,
          requests: message.requests.map((r) => ({
            requestId: r.requestId,
            samples: r.audio.length,
            language: r.language,
            prompt: r.prompt,
            wordTimestamps: r.wordTimestamps,
          })),
        },
        message.requests.map((r) => new Uint8Array(r.audio.buffer, r.audio.byteOffset, r.audio.byteLength)),
      );
    case 'Heartbeat':
      return frame(MessageTag.Heartbeat, { seq: message.seq });
    case 'Close':
      return frame(MessageTag.Close, {});
  }
}
