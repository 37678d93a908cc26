/**
 * The instance protocol's messages, declared once (docs/protocol.md). Everything else is derived
 * from this table: the TypeScript codec (codec.ts), the static ControllerMessage and HostMessage
 * types, and the Python host's messages (host/voxmux_host/messages.py, written by
 * `npm run docs`).
 *
 * Each entry gives the message's wire tag, its direction ('down': supervisor → instance, a
 * ControllerMessage; 'up': instance → supervisor, a HostMessage), its meta as a TypeBox object
 * (key order = wire order) and its body layout. Meta fields may only use: String, Integer (a
 * non-negative one: `Count()`), Number, Boolean, a union of string literals (`Enum()`), a named
 * struct (a strict TypeBox object with `$id`), Array of those, a union with Null (`Nullable()`), and
 * the free JSON object `JsonObjectSchema`. The Python generator rejects anything else.
 */
import { Type, type Static, type TLiteral, type TNull, type TObject, type TProperties, type TSchema, type TUnion } from '@sinclair/typebox';
import { WIRE_ERROR_CODES } from '../core/error-catalog.js';
import { CatalogEntrySchema, TRANSCRIPTION_TASKS, TranscriptSchema, WORK_KINDS } from './work.js';

// ---------------------------------------------------------------------------------------------
// Field types

/** A non-negative integer: every integer on the wire is a count, a size, a duration or an id. */
export const Count = () => Type.Integer({ minimum: 0 });

/** A union of string literals, with its literal types kept. */
export const Enum = <const T extends readonly string[]>(values: T): TUnion<{ [K in keyof T]: TLiteral<T[K]> } & TSchema[]> =>
  Type.Union(values.map((value) => Type.Literal(value))) as never;

/** `T` or null. */
export const Nullable = <T extends TSchema>(schema: T): TUnion<[T, TNull]> => Type.Union([schema, Type.Null()]);

/** A strict object (no other keys): a message's meta, or a named struct when `$id` is given. */
export const Struct = <T extends TProperties>(properties: T, $id?: string): TObject<T> =>
  Type.Object(properties, $id === undefined ? { additionalProperties: false } : { $id, additionalProperties: false });

/** Adapter-specific JSON: any object (Python: `Dict[str, Any]`). */
export const JsonObjectSchema = Type.Record(Type.String(), Type.Unknown(), { $id: 'JsonObject' });
export type JsonObject = Static<typeof JsonObjectSchema>;

// ---------------------------------------------------------------------------------------------
// Named structs (Word, Segment and Transcript come from work.ts)

export const WireErrorSchema = Struct({ code: Enum(WIRE_ERROR_CODES), message: Type.String() }, 'WireError');

/** One request of a RunBatch: its audio is the next `samples` int16 values of the body. */
export const BatchItemSchema = Struct(
  {
    requestId: Type.String(),
    samples: Count(),
    language: Nullable(Type.String()),
    prompt: Nullable(Type.String()),
    wordTimestamps: Type.Boolean(),
    task: Enum(TRANSCRIPTION_TASKS),
    temperature: Type.Number(),
    piece: Type.Boolean(),
  },
  'BatchItem',
);

/** One request's result in a BatchResult: exactly one of `error` and `transcript` is not null. */
export const ItemResultSchema = Struct(
  { requestId: Type.String(), error: Nullable(WireErrorSchema), transcript: Nullable(TranscriptSchema) },
  'ItemResult',
);

export const SEQUENCE_STATE_IN = ['new', 'resident', 'attached'] as const;

/**
 * One item of a RunSequenceBatch. Its body part is `2 × samples` bytes of PCM, then `stateBytes`
 * bytes of session state (0 unless `stateIn` is 'attached').
 */
export const SequenceItemSchema = Struct(
  {
    requestId: Type.String(),
    sessionId: Type.String(),
    seq: Count(),
    samples: Count(),
    stateIn: Enum(SEQUENCE_STATE_IN),
    stateBytes: Count(),
    isLast: Type.Boolean(),
    options: JsonObjectSchema,
  },
  'SequenceItem',
);

/** One item's result in a SequenceResult: exactly one of `error` and `output` is not null. */
export const SequenceItemResultSchema = Struct(
  {
    requestId: Type.String(),
    sessionId: Type.String(),
    seq: Count(),
    error: Nullable(WireErrorSchema),
    output: Nullable(JsonObjectSchema),
    stateBytes: Count(),
  },
  'SequenceItemResult',
);

export const RESOURCE_RESIDENCIES = ['device', 'host'] as const;

/** A named resource an instance holds (HeartbeatAck.resources). */
export const ResourceInfoSchema = Struct(
  { name: Type.String(), kind: Type.String(), residency: Enum(RESOURCE_RESIDENCIES), bytes: Count() },
  'ResourceInfo',
);

/**
 * An adapter's cumulative resource counters (HeartbeatAck.resourceCounters): lookups that found the
 * resource resident (hits) or not (misses), loads by where the bytes came from and the time they
 * took, evictions, and the residency budget and what is resident now.
 */
export const ResourceCountersSchema = Struct(
  {
    hits: Count(),
    misses: Count(),
    loadsFromDisk: Count(),
    loadsFromHost: Count(),
    evictions: Count(),
    diskLoadMs: Type.Number(),
    hostLoadMs: Type.Number(),
    budgetBytes: Count(),
    residentBytes: Count(),
  },
  'ResourceCounters',
);

/**
 * One of an engine's own cumulative counts since its instance started (HeartbeatAck.engineCounters):
 * what its adapter counts beyond the protocol's fields (whisper: clips, windows, encoder windows,
 * decode steps, tokens, fallbacks...). `name` is camelCase; `value` never decreases.
 */
export const EngineCounterSchema = Struct({ name: Type.String(), value: Type.Number() }, 'EngineCounter');

/**
 * The parts of an instance's boot that an adapter may time (LoadResult.stages, WarmupResult.stages):
 * importing the adapter's code (timed by the host), starting the device, reading its weight files,
 * building the model, uploading the weights to the device, compiling, first runs of each shape
 * (warmup) and CUDA graph capture. The supervisor times the process start (spawn to Hello) itself.
 */
export const BOOT_STAGES = [
  'import',
  'device_init',
  'weight_read',
  'model_build',
  'device_upload',
  'compile',
  'warmup',
  'graph_capture',
] as const;

/** One timed part of a boot: its duration and, for a read or an upload, the bytes it moved (else 0). */
export const BootStageSchema = Struct({ stage: Enum(BOOT_STAGES), ms: Type.Number(), bytes: Count() }, 'BootStage');

export const HEARTBEAT_STATES = ['idle', 'busy', 'wedged'] as const;
export const RESOURCE_SOURCES = ['disk', 'host', 'resident'] as const;

// ---------------------------------------------------------------------------------------------
// Body layouts

/**
 * What a message's body holds, and so how long it must be:
 * - `none`: nothing (0 bytes);
 * - `pcm16`: 16 kHz mono int16 little-endian PCM of each of `requests`, in order: `2 × Σ samples`;
 * - `sequence`: for each of `items` in order, `2 × samples` bytes of PCM then `stateBytes` bytes
 *   of session state;
 * - `states`: each of `results`' `stateBytes` bytes of session state, in order;
 * - `bytes`: opaque bytes of any length.
 */
export const BODY_LAYOUTS = ['none', 'pcm16', 'sequence', 'states', 'bytes'] as const;
export type BodyLayout = (typeof BODY_LAYOUTS)[number];

export type Direction = 'down' | 'up';

export interface MessageSpec {
  tag: number;
  direction: Direction;
  meta: TObject;
  body: BodyLayout;
}

// ---------------------------------------------------------------------------------------------
// The table

export const MESSAGE_TABLE = {
  LoadRequest: {
    tag: 0x01,
    direction: 'down',
    meta: Struct({
      instanceId: Type.String(),
      model: Type.String(),
      adapter: Type.String(),
      options: JsonObjectSchema,
      loadLockPath: Nullable(Type.String()),
    }),
    body: 'none',
  },
  WarmupRequest: { tag: 0x02, direction: 'down', meta: Struct({}), body: 'none' },
  RunBatch: {
    tag: 0x03,
    direction: 'down',
    meta: Struct({ batchId: Type.String(), requests: Type.Array(BatchItemSchema) }),
    body: 'pcm16',
  },
  Heartbeat: { tag: 0x04, direction: 'down', meta: Struct({ seq: Count() }), body: 'none' },
  Close: { tag: 0x05, direction: 'down', meta: Struct({}), body: 'none' },
  RunSequenceBatch: {
    tag: 0x06,
    direction: 'down',
    meta: Struct({ batchId: Type.String(), items: Type.Array(SequenceItemSchema) }),
    body: 'sequence',
  },
  EndSessions: { tag: 0x07, direction: 'down', meta: Struct({ sessionIds: Type.Array(Type.String()) }), body: 'none' },
  StartStream: {
    tag: 0x08,
    direction: 'down',
    meta: Struct({
      streamId: Type.String(),
      requestId: Type.String(),
      resource: Nullable(Type.String()),
      params: JsonObjectSchema,
      creditChunks: Count(),
    }),
    body: 'bytes',
  },
  StreamCredit: { tag: 0x09, direction: 'down', meta: Struct({ streamId: Type.String(), chunks: Count() }), body: 'none' },
  CancelStream: { tag: 0x0a, direction: 'down', meta: Struct({ streamId: Type.String() }), body: 'none' },
  LoadResource: {
    tag: 0x0b,
    direction: 'down',
    meta: Struct({ name: Type.String(), kind: Type.String(), source: JsonObjectSchema }),
    body: 'none',
  },
  EvictResource: { tag: 0x0c, direction: 'down', meta: Struct({ name: Type.String() }), body: 'none' },

  Hello: {
    tag: 0x81,
    direction: 'up',
    meta: Struct({ protocolVersion: Count(), hostVersion: Type.String(), pid: Count(), adapters: Type.Array(Type.String()) }),
    body: 'none',
  },
  LoadResult: {
    tag: 0x82,
    direction: 'up',
    meta: Struct({
      model: Type.String(),
      device: Type.String(),
      parameters: Count(),
      memoryBytes: Count(),
      loadMs: Count(),
      workKinds: Type.Array(Enum(WORK_KINDS)),
      /** What the adapter can serve (its voices); empty when it declares none. */
      catalog: Type.Array(CatalogEntrySchema),
      /** The parts of the load the adapter timed, in the order they ran. */
      stages: Type.Array(BootStageSchema),
    }),
    body: 'none',
  },
  WarmupResult: {
    tag: 0x83,
    direction: 'up',
    /** `stages`: the parts of the warmup the adapter timed, in the order they ran. */
    meta: Struct({ warmupMs: Count(), graphsCaptured: Count(), stages: Type.Array(BootStageSchema) }),
    body: 'none',
  },
  BatchResult: {
    tag: 0x84,
    direction: 'up',
    meta: Struct({ batchId: Type.String(), results: Type.Array(ItemResultSchema), computeMs: Type.Number() }),
    body: 'none',
  },
  HeartbeatAck: {
    tag: 0x85,
    direction: 'up',
    meta: Struct({
      seq: Count(),
      state: Enum(HEARTBEAT_STATES),
      busyMs: Count(),
      queuedBatches: Count(),
      memoryBytes: Count(),
      eagerBatches: Count(),
      graphReplays: Count(),
      /** Session states the instance holds. */
      sessions: Count(),
      /** Streams running. */
      streams: Count(),
      resources: Type.Array(ResourceInfoSchema),
      /** Null for an adapter that keeps no resource counters. */
      resourceCounters: Nullable(ResourceCountersSchema),
      /** The adapter's own counts; empty for an adapter that keeps none. */
      engineCounters: Type.Array(EngineCounterSchema),
    }),
    body: 'none',
  },
  Closed: { tag: 0x86, direction: 'up', meta: Struct({}), body: 'none' },
  SequenceResult: {
    tag: 0x87,
    direction: 'up',
    meta: Struct({ batchId: Type.String(), results: Type.Array(SequenceItemResultSchema), computeMs: Type.Number() }),
    body: 'states',
  },
  SessionsEnded: { tag: 0x88, direction: 'up', meta: Struct({ sessionIds: Type.Array(Type.String()) }), body: 'none' },
  StreamChunk: {
    tag: 0x89,
    direction: 'up',
    meta: Struct({ streamId: Type.String(), index: Count(), meta: JsonObjectSchema }),
    body: 'bytes',
  },
  StreamEnd: {
    tag: 0x8a,
    direction: 'up',
    meta: Struct({ streamId: Type.String(), chunks: Count(), usage: Nullable(JsonObjectSchema), error: Nullable(WireErrorSchema) }),
    body: 'none',
  },
  ResourceLoaded: {
    tag: 0x8b,
    direction: 'up',
    meta: Struct({
      name: Type.String(),
      kind: Type.String(),
      residency: Enum(RESOURCE_RESIDENCIES),
      bytes: Count(),
      loadMs: Count(),
      source: Enum(RESOURCE_SOURCES),
    }),
    body: 'none',
  },
  ResourceEvicted: { tag: 0x8c, direction: 'up', meta: Struct({ name: Type.String(), bytes: Count() }), body: 'none' },
  Error: {
    tag: 0x8f,
    direction: 'up',
    meta: Struct({ code: Enum(WIRE_ERROR_CODES), message: Type.String(), requestId: Nullable(Type.String()) }),
    body: 'none',
  },
} as const satisfies Record<string, MessageSpec>;

export type MessageTable = typeof MESSAGE_TABLE;
export type MessageName = keyof MessageTable;

/** Every message name, in table order (down messages first, then up). */
export const MESSAGE_NAMES = Object.keys(MESSAGE_TABLE) as MessageName[];

/** The named structs the table uses, in the order a reader needs them (dependencies first). */
export const NAMED_STRUCTS: readonly TObject[] = collectStructs();

function collectStructs(): TObject[] {
  const found: TObject[] = [];
  const visit = (schema: TSchema): void => {
    if (schema.type === 'object' && typeof schema.$id === 'string' && schema.$id !== 'JsonObject') {
      if (found.includes(schema as TObject)) return;
      for (const property of Object.values((schema as TObject).properties)) visit(property);
      found.push(schema as TObject);
      return;
    }
    if (Array.isArray(schema.anyOf)) (schema.anyOf as TSchema[]).forEach(visit);
    if (schema.type === 'array') visit(schema.items as TSchema);
  };
  for (const spec of Object.values(MESSAGE_TABLE)) for (const property of Object.values(spec.meta.properties)) visit(property);
  return found;
}
