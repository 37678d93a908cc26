/** An Executor test double: batches wait until the test completes them. */
import type {
  BatchInput,
  BatchItemOutcome,
  Executor,
  InstanceView,
  ModelAvailability,
} from '../../src/scheduler/index.js';
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

  constructor(instancesByModel: Record<string, string[]>) {
    this.#ready = new Map(Object.entries(instancesByModel));
  }

  readyInstances(model: string): readonly InstanceView[] {
    return (this.#ready.get(model) ?? []).map((instanceId) => ({ instanceId }));
  }

  availability(model: string): ModelAvailability {
    return this.#availability.get(model) ?? ((this.#ready.get(model)?.length ?? 0) > 0 ? 'ready' : 'starting');
  }

  runBatch(instanceId: string, batch: BatchInput): Promise<BatchItemOutcome[]> {
    return new Promise((resolve, reject) => this.batches.push({ instanceId, batch, resolve, reject }));
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
}
