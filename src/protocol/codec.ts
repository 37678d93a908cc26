/**
 * Typed protocol messages, encoded and decoded from the message table (message-table.ts).
 *
 * - `ControllerMessage` goes down to an instance, `HostMessage` comes up. Each is a discriminated
 *   union on `type`; a member holds `correlationId`, the message's meta fields and, when its body
 *   layout is not 'none', `body`.
 * - `decodeMessage` (and the direction-checking `decodeHostMessage`/`decodeControllerMessage`)
 *   validate a frame's meta against the table's TypeBox schema, its body length against the
 *   layout and the rules of `MESSAGE_RULES`; any mismatch is a bad_frame.
 * - `encodeMessage` applies the same checks, writes meta keys (nested ones too) in table order and
 *   returns the frame as chunks: a body given as parts (the PCM views of a batch's requests) is
 *   written without a copy.
 *
 * A test's fake instance decodes down messages and encodes up messages with the same functions.
 */
import type { Static, TObject, TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { errors } from '../core/error-catalog.js';
import { encodeFrameChunks, messageNameOf, type Frame, type MessageTagValue } from './frame.js';
import {
  MESSAGE_NAMES,
  MESSAGE_TABLE,
  type BatchItemSchema,
  type BootStageSchema,
  type BodyLayout,
  type ItemResultSchema,
  type MessageName,
  type MessageTable,
  type ResourceCountersSchema,
  type EngineCounterSchema,
  type ResourceInfoSchema,
  type SequenceItemResultSchema,
  type SequenceItemSchema,
  type WireErrorSchema,
} from './message-table.js';
import { MAX_STATE_BYTES, type BatchInput, type SequenceBatchInput } from './work.js';

export type { MessageName } from './message-table.js';

// ---------------------------------------------------------------------------------------------
// Static types

/**
 * A message body: one buffer, or parts that are written one after the other without being
 * copied (they must stay unmodified until the write completes). Decoded messages always hold one
 * Uint8Array.
 */
export type Body = Uint8Array | readonly Uint8Array[];

/** The meta fields of message `N`, as the table declares them. */
export type MessageMeta<N extends MessageName> = Static<MessageTable[N]['meta']>;

/** Message `N`: `type`, `correlationId`, its meta fields, and `body` unless its layout is 'none'. */
export type MessageOf<N extends MessageName, B extends Body = Body> = { type: N; correlationId: number } & MessageMeta<N> &
  (MessageTable[N]['body'] extends 'none' ? unknown : { body: B });

type NamesGoing<D> = { [N in MessageName]: MessageTable[N]['direction'] extends D ? N : never }[MessageName];
/** Names of the messages the supervisor sends (down). */
export type ControllerMessageName = NamesGoing<'down'>;
/** Names of the messages an instance sends (up). */
export type HostMessageName = NamesGoing<'up'>;

/** A message from the supervisor to an instance. `ControllerMessage<Uint8Array>` is a decoded one. */
export type ControllerMessage<B extends Body = Body> = { [N in ControllerMessageName]: MessageOf<N, B> }[ControllerMessageName];
/** A message from an instance to the supervisor. `HostMessage<Uint8Array>` is a decoded one. */
export type HostMessage<B extends Body = Body> = { [N in HostMessageName]: MessageOf<N, B> }[HostMessageName];
export type AnyMessage<B extends Body = Body> = ControllerMessage<B> | HostMessage<B>;

export type WireError = Static<typeof WireErrorSchema>;
export type BatchItem = Static<typeof BatchItemSchema>;
export type ItemResult = Static<typeof ItemResultSchema>;
export type SequenceItem = Static<typeof SequenceItemSchema>;
export type SequenceItemResult = Static<typeof SequenceItemResultSchema>;
export type ResourceInfo = Static<typeof ResourceInfoSchema>;
export type ResourceCounters = Static<typeof ResourceCountersSchema>;
export type EngineCounter = Static<typeof EngineCounterSchema>;
export type BootStage = Static<typeof BootStageSchema>;

/** Fields of a message object that are not meta. */
const ENVELOPE_KEYS = ['type', 'correlationId', 'body'] as const;
for (const name of MESSAGE_NAMES) {
  for (const key of ENVELOPE_KEYS) {
    if (key in MESSAGE_TABLE[name].meta.properties) throw new Error(`Invariant failed: ${name} meta must not have a field '${key}'`);
  }
}

// ---------------------------------------------------------------------------------------------
// Rules beyond the schemas

type Rule = (meta: Record<string, unknown>) => string | undefined;

/**
 * Checks that a schema cannot express, per message: each returns why the message is malformed,
 * or undefined. Both directions, on encode and on decode. The Python host applies the same rules
 * (host/voxmux_host/protocol.py, `check_rules`).
 */
export const MESSAGE_RULES: ReadonlyMap<MessageName, Rule> = new Map<MessageName, Rule>([
  [
    'RunBatch',
    (meta) => {
      const requests = meta.requests as BatchItem[];
      if (requests.length === 0) return 'requests is empty';
      return duplicateOf(
        requests.map((r) => r.requestId),
        'requestId',
      );
    },
  ],
  [
    'RunSequenceBatch',
    (meta) => {
      const items = meta.items as SequenceItem[];
      if (items.length === 0) return 'items is empty';
      for (const [i, item] of items.entries()) {
        if (item.stateBytes > MAX_STATE_BYTES) return `items[${i}].stateBytes ${item.stateBytes} is over ${MAX_STATE_BYTES}`;
        if (item.stateIn !== 'attached' && item.stateBytes !== 0)
          return `items[${i}].stateBytes is ${item.stateBytes} with stateIn ${item.stateIn}`;
      }
      return duplicateOf(
        items.map((item) => item.sessionId),
        'sessionId',
      );
    },
  ],
  [
    'BatchResult',
    (meta) => {
      for (const [i, result] of (meta.results as ItemResult[]).entries()) {
        if ((result.error === null) === (result.transcript === null)) return `results[${i}] needs exactly one of error and transcript`;
      }
      return undefined;
    },
  ],
  [
    'SequenceResult',
    (meta) => {
      for (const [i, result] of (meta.results as SequenceItemResult[]).entries()) {
        if ((result.error === null) === (result.output === null)) return `results[${i}] needs exactly one of error and output`;
        if (result.stateBytes > MAX_STATE_BYTES) return `results[${i}].stateBytes ${result.stateBytes} is over ${MAX_STATE_BYTES}`;
        if (result.error !== null && result.stateBytes !== 0) return `results[${i}] has an error and ${result.stateBytes} state bytes`;
      }
      return undefined;
    },
  ],
  ['StreamEnd', (meta) => ((meta.usage === null) === (meta.error === null) ? 'needs exactly one of usage and error' : undefined)],
]);

function duplicateOf(values: readonly string[], what: string): string | undefined {
  const seen = new Set<string>();
  for (const value of values) {
    if (seen.has(value)) return `${what} '${value}' appears twice`;
    seen.add(value);
  }
  return undefined;
}

/** The body length a message's meta calls for; undefined for 'bytes' (any length). */
export function expectedBodyLength(layout: BodyLayout, meta: Record<string, unknown>): number | undefined {
  switch (layout) {
    case 'none':
      return 0;
    case 'pcm16':
      return (meta.requests as BatchItem[]).reduce((sum, r) => sum + 2 * r.samples, 0);
    case 'sequence':
      return (meta.items as SequenceItem[]).reduce((sum, item) => sum + 2 * item.samples + item.stateBytes, 0);
    case 'states':
      return (meta.results as SequenceItemResult[]).reduce((sum, r) => sum + r.stateBytes, 0);
    case 'bytes':
      return undefined;
  }
}

function check(name: MessageName, meta: Record<string, unknown>, bodyLength: number): void {
  const spec = MESSAGE_TABLE[name];
  if (!Value.Check(spec.meta, meta)) {
    const first = Value.Errors(spec.meta, meta).First();
    throw errors.badFrame({ reason: `${name} meta ${first?.path ?? ''}: ${first?.message ?? 'invalid'}` });
  }
  const expected = expectedBodyLength(spec.body, meta);
  if (expected !== undefined && bodyLength !== expected) {
    throw errors.badFrame({ reason: `${name} body of ${bodyLength} bytes: expected ${expected} (layout ${spec.body})` });
  }
  const broken = MESSAGE_RULES.get(name)?.(meta);
  if (broken !== undefined) throw errors.badFrame({ reason: `${name}: ${broken}` });
}

// ---------------------------------------------------------------------------------------------
// Decode

/** Validates a frame as a message of either direction; a bad_frame ServiceError on any mismatch. */
export function decodeMessage(frame: Frame): AnyMessage<Uint8Array> {
  const name = messageNameOf(frame.type);
  if (name === undefined) throw errors.badFrame({ reason: `unknown type 0x${frame.type.toString(16)}` });
  check(name, frame.meta, frame.body.byteLength);
  const message: Record<string, unknown> = { type: name, correlationId: frame.correlationId, ...frame.meta };
  if (MESSAGE_TABLE[name].body !== 'none') message.body = frame.body;
  return message as AnyMessage<Uint8Array>;
}

/** Decodes a frame that an instance sent: a down message is a bad_frame. */
export function decodeHostMessage(frame: Frame): HostMessage<Uint8Array> {
  return decodeGoing(frame, 'up') as HostMessage<Uint8Array>;
}

/** Decodes a frame that the supervisor sent (what a fake instance in a test reads). */
export function decodeControllerMessage(frame: Frame): ControllerMessage<Uint8Array> {
  return decodeGoing(frame, 'down') as ControllerMessage<Uint8Array>;
}

function decodeGoing(frame: Frame, direction: 'up' | 'down'): AnyMessage<Uint8Array> {
  const name = messageNameOf(frame.type);
  if (name === undefined || MESSAGE_TABLE[name].direction !== direction) {
    const what = direction === 'up' ? 'a host message' : 'a controller message';
    throw errors.badFrame({ reason: `type 0x${frame.type.toString(16)} is not ${what}` });
  }
  return decodeMessage(frame);
}

// ---------------------------------------------------------------------------------------------
// Encode

/**
 * Encodes a message as the chunks of one frame, to be written in order (one gathered write):
 * the header and meta in a new buffer, then the body's parts uncopied. Meta keys, nested ones
 * included, are written in table order whatever order the message object has them in.
 * @throws bad_frame when the message breaks its schema, its body layout or a rule
 */
export function encodeMessage(message: AnyMessage): Uint8Array[] {
  const name = message.type;
  const spec: { tag: number; meta: TObject; body: BodyLayout } = MESSAGE_TABLE[name];
  const meta = inSchemaOrder(spec.meta, message) as Record<string, unknown>;
  const parts = spec.body === 'none' ? [] : bodyParts((message as { body: Body }).body);
  check(
    name,
    meta,
    parts.reduce((sum, part) => sum + part.byteLength, 0),
  );
  return encodeFrameChunks({ type: spec.tag as MessageTagValue, correlationId: message.correlationId, meta }, parts);
}

/** `encodeMessage` joined into one buffer (tests, small messages). */
export function encodeMessageBuffer(message: AnyMessage): Buffer {
  return Buffer.concat(encodeMessage(message));
}

function bodyParts(body: Body): readonly Uint8Array[] {
  return body instanceof Uint8Array ? [body] : body;
}

/** The body as one Uint8Array (joined when it is given as parts). */
export function bodyBytes(body: Body): Uint8Array {
  if (body instanceof Uint8Array) return body;
  return body.length === 1 ? body[0]! : Buffer.concat(body);
}

/** A copy of `value` with the keys of every object the schema declares in declaration order. */
function inSchemaOrder(schema: TSchema, value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return schema.type === 'array' ? value.map((item) => inSchemaOrder(schema.items as TSchema, item)) : value;
  if (Array.isArray(schema.anyOf)) {
    const objectMember = (schema.anyOf as TSchema[]).find((member) => member.type === 'object');
    return objectMember === undefined ? value : inSchemaOrder(objectMember, value);
  }
  const properties = (schema as Partial<TObject>).properties;
  if (schema.type !== 'object' || properties === undefined) return value; // a JsonObject travels as it is
  const record = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(properties)) {
    if (key in record) out[key] = inSchemaOrder(properties[key]!, record[key]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Bodies

/** 16-bit PCM bytes as an Int16Array: a view when aligned, a copy otherwise. Little-endian hosts only. */
export function int16Of(bytes: Uint8Array): Int16Array {
  if (bytes.byteOffset % 2 === 0) return new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  // NOTE: not bytes.slice(): on a Buffer that is a view of the whole (pooled) ArrayBuffer, not a copy.
  return new Int16Array(new Uint8Array(bytes).buffer);
}

function uint8Of(audio: Int16Array): Uint8Array {
  // Int16Array is little-endian on every platform Node supports: the view is the wire bytes.
  return new Uint8Array(audio.buffer, audio.byteOffset, audio.byteLength);
}

/** A RunBatch for `batch`; its body is the requests' PCM views, not a copy of them. */
export function runBatchMessage(batch: BatchInput, correlationId = 0): MessageOf<'RunBatch'> {
  return {
    type: 'RunBatch',
    correlationId,
    batchId: batch.batchId,
    requests: batch.requests.map((r) => ({
      requestId: r.requestId,
      samples: r.audio.length,
      language: r.language,
      prompt: r.prompt,
      wordTimestamps: r.wordTimestamps,
      task: r.task ?? 'transcribe',
      temperature: r.temperature ?? 0,
      piece: r.piece ?? false,
    })),
    body: batch.requests.map((r) => uint8Of(r.audio)),
  };
}

/** Each request's PCM of a RunBatch, in `requests` order. */
export function splitPcm16Body(message: Pick<MessageOf<'RunBatch'>, 'requests' | 'body'>): Int16Array[] {
  const body = bodyBytes(message.body);
  let offset = 0;
  return message.requests.map((request) => {
    const part = body.subarray(offset, offset + 2 * request.samples);
    offset += 2 * request.samples;
    return int16Of(part);
  });
}

/**
 * A RunSequenceBatch for `batch`; its body is, per item, the PCM view then the attached state
 * (not copied).
 */
export function runSequenceBatchMessage(batch: SequenceBatchInput, correlationId = 0): MessageOf<'RunSequenceBatch'> {
  const body: Uint8Array[] = [];
  const items = batch.items.map((item): SequenceItem => {
    const state = item.state.kind === 'attached' ? item.state.bytes : new Uint8Array(0);
    body.push(uint8Of(item.audio), state);
    return {
      requestId: item.requestId,
      sessionId: item.sessionId,
      seq: item.seq,
      samples: item.audio.length,
      stateIn: item.state.kind,
      stateBytes: state.byteLength,
      isLast: item.isLast,
      options: { ...item.options },
    };
  });
  return { type: 'RunSequenceBatch', correlationId, batchId: batch.batchId, items, body };
}

/** Each item's PCM and attached state (empty unless `stateIn` is 'attached') of a RunSequenceBatch. */
export function splitSequenceBody(
  message: Pick<MessageOf<'RunSequenceBatch'>, 'items' | 'body'>,
): { audio: Int16Array; state: Uint8Array }[] {
  const body = bodyBytes(message.body);
  let offset = 0;
  return message.items.map((item) => {
    const audio = int16Of(body.subarray(offset, offset + 2 * item.samples));
    offset += 2 * item.samples;
    const state = body.subarray(offset, offset + item.stateBytes);
    offset += item.stateBytes;
    return { audio, state };
  });
}

/** Each result's state of a SequenceResult, in `results` order (empty for a failed item). */
export function splitStates(message: Pick<MessageOf<'SequenceResult'>, 'results' | 'body'>): Uint8Array[] {
  const body = bodyBytes(message.body);
  let offset = 0;
  return message.results.map((result) => {
    const state = body.subarray(offset, offset + result.stateBytes);
    offset += result.stateBytes;
    return state;
  });
}
