/**
 * The vocabulary of work that the scheduler, the supervisor and the gateway share: the four work
 * kinds of the engine contract (docs/protocol.md, "Work kinds"), their inputs and their outcomes.
 *
 * - batch: independent requests (a transcription) that may run together; one result each.
 * - sequence: ordered items of one session (a diarization recording in chunks); each item may
 *   carry the session's state in and its result carries the new state out, so the session can
 *   resume on another instance. Items of different sessions batch together, never two of one.
 * - stream: one request, many ordered result chunks (speech synthesis), credit-limited and
 *   cancellable.
 * - resources: named weights an instance keeps resident (voices); streams prefer instances where
 *   theirs is resident.
 *
 * The transcript shape is declared here once, as TypeBox schemas: the protocol's message table
 * uses these schemas, and the Python host's messages are generated from that table.
 */
import { Type, type Static } from '@sinclair/typebox';
import type { ServiceError } from '../core/errors.js';

export const WordSchema = Type.Object(
  { word: Type.String(), start: Type.Number(), end: Type.Number() },
  { $id: 'Word', additionalProperties: false },
);
/** `SegmentDecoding.seek` counts frames of 10 ms. */
export const SEEK_FRAMES_PER_SECOND = 100;
/**
 * How an autoregressive engine (Whisper) decoded a segment, what OpenAI's verbose_json segments report:
 * `seek` is the start of the segment's 30 s window in 10 ms frames from the start of the audio; `tokens`
 * the segment's token ids, timestamps included; `temperature` the one its window was decoded at (after any
 * fallback); `avgLogprob` the window's mean token log-probability; `compressionRatio` the gzip ratio of the
 * window's text; `noSpeechProb` the window's probability of `<|nospeech|>`.
 */
export const SegmentDecodingSchema = Type.Object(
  {
    seek: Type.Integer({ minimum: 0 }),
    tokens: Type.Array(Type.Integer({ minimum: 0 })),
    temperature: Type.Number(),
    avgLogprob: Type.Number(),
    compressionRatio: Type.Number(),
    noSpeechProb: Type.Number(),
  },
  { $id: 'SegmentDecoding', additionalProperties: false },
);
/** A stretch of a transcript; `decoding` is null from engines that do not decode Whisper's way. */
export const SegmentSchema = Type.Object(
  { start: Type.Number(), end: Type.Number(), text: Type.String(), decoding: Type.Union([SegmentDecodingSchema, Type.Null()]) },
  { $id: 'Segment', additionalProperties: false },
);
/** What a transcription returns; times in seconds. */
export const TranscriptSchema = Type.Object(
  {
    text: Type.String(),
    language: Type.String(),
    durationS: Type.Number(),
    segments: Type.Union([Type.Array(SegmentSchema), Type.Null()]),
    words: Type.Union([Type.Array(WordSchema), Type.Null()]),
  },
  { $id: 'Transcript', additionalProperties: false },
);

/**
 * One entry of a model's catalogue (LoadResult.catalog): a named resource the adapter can serve,
 * such as a voice, whether or not it is resident now. `sampleRate` is in Hz.
 */
export const CatalogEntrySchema = Type.Object(
  {
    name: Type.String(),
    kind: Type.String(),
    language: Type.String(),
    sampleRate: Type.Integer({ minimum: 0 }),
    gender: Type.Union([Type.String(), Type.Null()]),
    description: Type.String(),
  },
  { $id: 'CatalogEntry', additionalProperties: false },
);

export type Word = Static<typeof WordSchema>;
export type Segment = Static<typeof SegmentSchema>;
export type SegmentDecoding = Static<typeof SegmentDecodingSchema>;
export type TranscriptResult = Static<typeof TranscriptSchema>;
export type CatalogEntry = Static<typeof CatalogEntrySchema>;

export const WORK_KINDS = ['batch', 'sequence', 'stream'] as const;
export type WorkKind = (typeof WORK_KINDS)[number];

// ---------------------------------------------------------------------------------------------
// batch

/** What a transcription request asks of the model: the speech's own language, or English (translate). */
export const TRANSCRIPTION_TASKS = ['transcribe', 'translate'] as const;
export type TranscriptionTask = (typeof TRANSCRIPTION_TASKS)[number];

export interface TranscriptionRequest {
  /** 16 kHz mono 16-bit PCM. On rejection the caller still owns the buffer. */
  audio: Int16Array;
  language: string | null;
  prompt: string | null;
  wordTimestamps: boolean;
  /** @default 'transcribe' */
  task?: TranscriptionTask;
  /** Sampling temperature, 0 to 1 (0: greedy). @default 0 */
  temperature?: number;
  /** The audio is one piece of a longer recording, cut by the gateway (src/gateway/pieces). @default false */
  piece?: boolean;
}

export interface BatchInput {
  batchId: string;
  requests: readonly (TranscriptionRequest & { requestId: string })[];
}

export type BatchItemOutcome =
  { requestId: string; ok: true; result: TranscriptResult } | { requestId: string; ok: false; error: ServiceError };

// ---------------------------------------------------------------------------------------------
// sequence

/**
 * Where an item's session state comes from:
 * - `new`: the session's first item; the instance starts from an empty state;
 * - `resident`: the instance ran the session's previous item and still holds its state;
 * - `attached`: the state travels with the item (a checkpoint the scheduler kept), for a session
 *   that moves to another instance.
 */
export type SequenceStateIn = { kind: 'new' } | { kind: 'resident' } | { kind: 'attached'; bytes: Uint8Array };

export interface SequenceItemInput {
  requestId: string;
  sessionId: string;
  /** The item's position in its session, from 0, without gaps. */
  seq: number;
  /** 16 kHz mono 16-bit PCM. */
  audio: Int16Array;
  state: SequenceStateIn;
  /** The session's last item: the instance may drop the session's state after it. */
  isLast: boolean;
  /** Adapter-specific options of the session (JSON). */
  options: Readonly<Record<string, unknown>>;
}

export interface SequenceBatchInput {
  batchId: string;
  /** At most one item per session. */
  items: readonly SequenceItemInput[];
}

export type SequenceItemOutcome =
  | {
      requestId: string;
      ok: true;
      /** Adapter-specific result of the item (JSON), e.g. a diarizer's segments. */
      output: Readonly<Record<string, unknown>>;
      /** The session's state after this item (opaque, at most MAX_STATE_BYTES). */
      state: Uint8Array;
    }
  | { requestId: string; ok: false; error: ServiceError };

/** A session's state is small: it travels with items and results. */
export const MAX_STATE_BYTES = 1 << 20;

// ---------------------------------------------------------------------------------------------
// stream

export interface StreamInput {
  streamId: string;
  requestId: string;
  /** The named resource the stream needs (a voice), or null. */
  resource: string | null;
  /** Adapter-specific parameters (JSON), e.g. text, voice, speed. */
  params: Readonly<Record<string, unknown>>;
  /** Opaque input bytes (may be empty). */
  body: Uint8Array;
  /** How many chunks the instance may send before it waits for more credit. */
  creditChunks: number;
}

export interface StreamChunk {
  /** 0, 1, 2, ... in the order the instance produced them. */
  index: number;
  /** Adapter-specific facts of the chunk (JSON), e.g. its sample rate. */
  meta: Readonly<Record<string, unknown>>;
  bytes: Uint8Array;
}

export type StreamEnd = { ok: true; chunks: number; usage: Readonly<Record<string, unknown>> } | { ok: false; error: ServiceError };

/** Where an executor delivers a stream's chunks, in order; `end` is called exactly once, last. */
export interface StreamSink {
  chunk(chunk: StreamChunk): void;
  end(end: StreamEnd): void;
}

export interface StreamControl {
  /** The consumer took `chunks` more chunks: the instance may run that much further ahead. */
  grant(chunks: number): void;
  /** Stops the stream; the sink then ends with `cancelled`, unless it already ended. */
  cancel(): void;
}

// ---------------------------------------------------------------------------------------------
// instances, as the scheduler sees them

export type ResourceResidency = 'device' | 'host';

export interface ResidentResource {
  name: string;
  residency: ResourceResidency;
  bytes: number;
}

export interface InstanceView {
  instanceId: string;
  /** The named resources the instance holds (its last heartbeat's report). */
  resources: readonly ResidentResource[];
}

/** 'starting' means instances exist that are not ready yet (spawning, loading, restarting). */
export type ModelAvailability = 'ready' | 'starting' | 'unavailable';

// ---------------------------------------------------------------------------------------------
// running work

/**
 * Runs work on instances. The scheduler's Executor port (scheduler/executor.ts) is this interface;
 * the supervisor provides it (its Supervisor extends it), and tests use a FakeExecutor. Declared
 * here, in the shared vocabulary, so that both components read one declaration.
 */
export interface WorkExecutor {
  /** Instances of the model that accept work now. */
  readyInstances(model: string): readonly InstanceView[];
  availability(model: string): ModelAvailability;
  /**
   * Runs one batch on one instance. Resolves with one outcome per request, in order.
   * @throws instance_crashed, instance_wedged when the whole batch is lost with its instance; a
   *   wire error code when the instance refuses the whole batch with an Error frame.
   */
  runBatch(instanceId: string, batch: BatchInput): Promise<BatchItemOutcome[]>;
  /**
   * Runs one batch of sequence items (at most one per session) on one instance. Resolves with one
   * outcome per item, in order; a successful outcome carries the session's new state.
   * @throws instance_crashed, instance_wedged when the batch is lost with its instance.
   */
  runSequenceBatch(instanceId: string, batch: SequenceBatchInput): Promise<SequenceItemOutcome[]>;
  /** Tells an instance that it may drop these sessions' state (ended or expired). Best effort. */
  endSessions(instanceId: string, sessionIds: readonly string[]): void;
  /**
   * Starts one stream on one instance. Chunks reach `sink` in order and `sink.end` is called
   * exactly once (with instance_crashed when the instance dies mid-stream).
   */
  openStream(instanceId: string, input: StreamInput, sink: StreamSink): StreamControl;
  /**
   * The model's catalogue (voices, say): the union, by name, of what its instances declared when
   * they loaded, in the order first declared; empty for a model that declares none or is unknown.
   */
  catalog(model: string): readonly CatalogEntry[];
  /** Called whenever an instance becomes ready, leaves the ready set or changes its resources. */
  onInstancesChanged(listener: () => void): () => void;
}
