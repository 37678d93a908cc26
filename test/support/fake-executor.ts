/**
 * An Executor test double for every work kind: batches and sequence batches wait until the test
 * completes them; streams send the chunks the test pushes, within the credit they were granted.
 */
import type {
  BatchInput,
  BatchItemOutcome,
  CatalogEntry,
  Executor,
  InstanceView,
  ModelAvailability,
  ResidentResource,
  SequenceBatchInput,
  SequenceItemOutcome,
  StreamChunk,
  StreamControl,
  StreamInput,
  StreamSink,
} from '../../src/scheduler/index.js';
import { errors } from '../../src/core/error-catalog.js';
import type { ServiceError } from '../../src/core/errors.js';

interface SeenBatch {
  instanceId: string;
  batch: BatchInput;
  resolve: (outcomes: BatchItemOutcome[]) => void;
  reject: (error: ServiceError) => void;
}

export interface SeenSequenceBatch {
  instanceId: string;
  batch: SequenceBatchInput;
  /** 'lost': the instance crashed while it ran; its outcomes never reached the scheduler. */
  status: 'running' | 'completed' | 'lost';
  resolve: (outcomes: SequenceItemOutcome[]) => void;
  reject: (error: ServiceError) => void;
}

/** One stream the scheduler opened; the test drives it. */
export class FakeStream {
  readonly instanceId: string;
  readonly input: StreamInput;
  /** Every grant the scheduler made, in order. */
  readonly grants: number[] = [];
  sentChunks = 0;
  isCancelled = false;
  isEnded = false;
  /** The most chunks ever sent and not yet matched by a grant beyond the initial credit. */
  maxOutstanding = 0;
  #sink: StreamSink;

  constructor(instanceId: string, input: StreamInput, sink: StreamSink) {
    this.instanceId = instanceId;
    this.input = input;
    this.#sink = sink;
  }

  /** Chunks the instance may still send now. */
  get credit(): number {
    return this.input.creditChunks + this.grants.reduce((a, b) => a + b, 0) - this.sentChunks;
  }

  /** Sends one chunk; throws if the stream has no credit left (the scheduler would have overrun). */
  push(bytes: Uint8Array = new Uint8Array(4), meta: Record<string, unknown> = {}): void {
    if (this.isEnded) throw new Error('push after the stream ended');
    if (this.credit <= 0) throw new Error('push without credit');
    const chunk: StreamChunk = { index: this.sentChunks, meta, bytes };
    this.sentChunks += 1;
    this.maxOutstanding = Math.max(this.maxOutstanding, this.sentChunks - this.grants.reduce((a, b) => a + b, 0));
    this.#sink.chunk(chunk);
  }

  /** Sends chunks while credit lasts, at most `max`; returns how many it sent. */
  produce(max: number): number {
    let sent = 0;
    while (sent < max && this.credit > 0 && !this.isEnded) {
      this.push();
      sent += 1;
    }
    return sent;
  }

  end(usage: Record<string, unknown> = {}): void {
    if (this.isEnded) return;
    this.isEnded = true;
    this.#sink.end({ ok: true, chunks: this.sentChunks, usage });
  }

  fail(error: ServiceError): void {
    if (this.isEnded) return;
    this.isEnded = true;
    this.#sink.end({ ok: false, error });
  }

  control(): StreamControl {
    return {
      grant: (chunks) => void this.grants.push(chunks),
      cancel: () => {
        this.isCancelled = true;
        this.fail(errors.streamCancelled({ requestId: this.input.requestId }));
      },
    };
  }
}

const RUNNING_SUM_BYTES = 8;

/** The running-sum session state: the sum as a float64. */
export function encodeSum(sum: number): Uint8Array {
  const bytes = new Uint8Array(RUNNING_SUM_BYTES);
  new DataView(bytes.buffer).setFloat64(0, sum);
  return bytes;
}

export function decodeSum(bytes: Uint8Array): number {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getFloat64(0);
}

export class FakeExecutor implements Executor {
  readonly batches: SeenBatch[] = [];
  readonly sequenceBatches: SeenSequenceBatch[] = [];
  readonly streams: FakeStream[] = [];
  /** Every endSessions call, in order. */
  readonly endedSessions: { instanceId: string; sessionIds: readonly string[] }[] = [];
  #ready: Map<string, string[]>;
  #resources = new Map<string, readonly ResidentResource[]>();
  /** Running-sum state each instance holds, by session. */
  #resident = new Map<string, Map<string, number>>();
  #availability = new Map<string, ModelAvailability>();
  #listeners = new Set<() => void>();
  #crashed = new Set<string>();
  /** What each instance declared when it loaded, by model then instance (insertion order). */
  #catalogs = new Map<string, Map<string, readonly CatalogEntry[]>>();

  constructor(instancesByModel: Record<string, string[]>) {
    this.#ready = new Map(Object.entries(instancesByModel));
  }

  readyInstances(model: string): readonly InstanceView[] {
    return (this.#ready.get(model) ?? []).map((instanceId) => ({ instanceId, resources: this.#resources.get(instanceId) ?? [] }));
  }

  /** The union, by name, of what the model's instances declared (setCatalog), in declaration order. */
  catalog(model: string): readonly CatalogEntry[] {
    const byName = new Map<string, CatalogEntry>();
    for (const entries of this.#catalogs.get(model)?.values() ?? []) {
      for (const entry of entries) if (!byName.has(entry.name)) byName.set(entry.name, entry);
    }
    return [...byName.values()];
  }

  /** Declares an instance's catalogue, as its LoadResult would. */
  setCatalog(model: string, instanceId: string, entries: readonly CatalogEntry[]): void {
    let byInstance = this.#catalogs.get(model);
    if (byInstance === undefined) this.#catalogs.set(model, (byInstance = new Map()));
    byInstance.set(instanceId, entries);
  }

  availability(model: string): ModelAvailability {
    // A model the fake was never given has no instances at all: unavailable, not starting.
    if (!this.#ready.has(model) && !this.#availability.has(model)) return 'unavailable';
    return this.#availability.get(model) ?? ((this.#ready.get(model)?.length ?? 0) > 0 ? 'ready' : 'starting');
  }

  runBatch(instanceId: string, batch: BatchInput): Promise<BatchItemOutcome[]> {
    if (this.#crashed.has(instanceId)) {
      return Promise.reject(errors.instanceCrashed({ instanceId, reason: 'the instance is gone' }));
    }
    return new Promise((resolve, reject) => this.batches.push({ instanceId, batch, resolve, reject }));
  }

  runSequenceBatch(instanceId: string, batch: SequenceBatchInput): Promise<SequenceItemOutcome[]> {
    if (this.#crashed.has(instanceId)) {
      return Promise.reject(errors.instanceCrashed({ instanceId, reason: 'the instance is gone' }));
    }
    return new Promise((resolve, reject) => this.sequenceBatches.push({ instanceId, batch, status: 'running', resolve, reject }));
  }

  endSessions(instanceId: string, sessionIds: readonly string[]): void {
    this.endedSessions.push({ instanceId, sessionIds: [...sessionIds] });
    for (const id of sessionIds) this.#resident.get(instanceId)?.delete(id);
  }

  openStream(instanceId: string, input: StreamInput, sink: StreamSink): StreamControl {
    const stream = new FakeStream(instanceId, input, sink);
    this.streams.push(stream);
    if (this.#crashed.has(instanceId)) stream.fail(errors.instanceCrashed({ instanceId, reason: 'the instance is gone' }));
    return stream.control();
  }

  /** Streams that have not ended. */
  runningStreams(): FakeStream[] {
    return this.streams.filter((s) => !s.isEnded);
  }

  setResources(instanceId: string, resources: readonly ResidentResource[]): void {
    this.#resources.set(instanceId, resources);
    for (const l of this.#listeners) l();
  }

  /** Sequence batches not yet completed or lost. */
  runningSequenceBatches(): SeenSequenceBatch[] {
    return this.sequenceBatches.filter((b) => b.status === 'running');
  }

  /** Completes a running sequence batch with the given outcomes. */
  completeSequence(seen: SeenSequenceBatch, outcomes: SequenceItemOutcome[]): void {
    if (seen.status !== 'running') throw new Error('the sequence batch is not running');
    seen.status = 'completed';
    seen.resolve(outcomes);
  }

  /**
   * Completes a running sequence batch as a running-sum model: each item's output is
   * `{ sum }`, its session's previous sum plus the sum of the item's samples, and the state is
   * that sum. The previous sum comes from the item's state: 0 for `new`, the bytes for
   * `attached`, the instance's memory for `resident` (session_state_missing if it has none).
   */
  completeSequenceRunningSum(seen: SeenSequenceBatch): void {
    let memory = this.#resident.get(seen.instanceId);
    if (memory === undefined) this.#resident.set(seen.instanceId, (memory = new Map()));
    const outcomes = seen.batch.items.map((item): SequenceItemOutcome => {
      let previous: number | undefined;
      switch (item.state.kind) {
        case 'new':
          previous = 0;
          break;
        case 'attached':
          previous = decodeSum(item.state.bytes);
          break;
        case 'resident':
          previous = memory.get(item.sessionId);
          break;
      }
      if (previous === undefined) {
        return {
          requestId: item.requestId,
          ok: false,
          error: errors.fromWire({
            code: 'session_state_missing',
            message: `No state for session ${item.sessionId}`,
            instanceId: seen.instanceId,
          }),
        };
      }
      const sum = previous + item.audio.reduce((a, b) => a + b, 0);
      if (item.isLast) memory.delete(item.sessionId);
      else memory.set(item.sessionId, sum);
      return { requestId: item.requestId, ok: true, output: { sum }, state: encodeSum(sum) };
    });
    this.completeSequence(seen, outcomes);
  }

  /** Drops the resident state an instance holds (as a restart under the same id does). */
  forgetResident(instanceId: string): void {
    this.#resident.delete(instanceId);
  }

  onInstancesChanged(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  setReady(model: string, instanceIds: string[]): void {
    this.#ready.set(model, instanceIds);
    for (const l of this.#listeners) l();
  }

  setAvailability(model: string, availability: ModelAvailability): void {
    this.#availability.set(model, availability);
    for (const l of this.#listeners) l();
  }

  batchSizes(): number[] {
    return this.batches.map((b) => b.batch.requests.length);
  }

  /** Completes batch i with an echo result per request. */
  complete(i: number): void {
    const seen = this.batches[i]!;
    seen.resolve(
      seen.batch.requests.map((r) => ({
        requestId: r.requestId,
        ok: true as const,
        result: { text: `samples=${r.audio.length}`, language: 'en', durationS: r.audio.length / 16000, segments: null, words: null },
      })),
    );
  }

  /**
   * Ends an instance as a crash does: it leaves the ready set, its unfinished batches fail with
   * instance_crashed, and so does every batch sent to it afterwards (unrecorded, as it never runs).
   */
  crash(instanceId: string): void {
    this.#crashed.add(instanceId);
    for (const [model, ids] of this.#ready) {
      if (ids.includes(instanceId))
        this.#ready.set(
          model,
          ids.filter((id) => id !== instanceId),
        );
    }
    const error = errors.instanceCrashed({ instanceId, reason: 'the instance crashed' });
    // Rejecting a batch that was already completed changes nothing: it stays completed.
    for (const seen of this.batches) if (seen.instanceId === instanceId) seen.reject(error);
    for (const seen of this.sequenceBatches) {
      if (seen.instanceId !== instanceId || seen.status !== 'running') continue;
      seen.status = 'lost';
      seen.reject(error);
    }
    for (const stream of this.streams) if (stream.instanceId === instanceId) stream.fail(error);
    this.#resident.delete(instanceId);
    for (const l of this.#listeners) l();
  }
}
