/** An Executor test double: batches wait until the test completes them. */
import type {
  BatchInput,
  BatchItemOutcome,
  Executor,
  InstanceView,
  ModelAvailability,
  SequenceItemOutcome,
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

export class FakeExecutor implements Executor {
  readonly batches: SeenBatch[] = [];
  #ready: Map<string, string[]>;
  #availability = new Map<string, ModelAvailability>();
  #listeners = new Set<() => void>();
  #crashed = new Set<string>();

  constructor(instancesByModel: Record<string, string[]>) {
    this.#ready = new Map(Object.entries(instancesByModel));
  }

  readyInstances(model: string): readonly InstanceView[] {
    return (this.#ready.get(model) ?? []).map((instanceId) => ({ instanceId, resources: [] }));
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

  // TODO(#15): the sequence and stream doubles.
  runSequenceBatch(instanceId: string): Promise<SequenceItemOutcome[]> {
    return Promise.reject(errors.instanceCrashed({ instanceId, reason: 'sequence work is not faked yet' }));
  }

  endSessions(): void {}

  openStream(instanceId: string, _input: StreamInput, sink: StreamSink): StreamControl {
    sink.end({ ok: false, error: errors.instanceCrashed({ instanceId, reason: 'streams are not faked yet' }) });
    return { grant: () => undefined, cancel: () => undefined };
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
    for (const l of this.#listeners) l();
  }
}
