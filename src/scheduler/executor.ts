/**
 * The port the scheduler needs to run batches. The supervisor satisfies it structurally;
 * tests use a FakeExecutor. The scheduler never imports the supervisor.
 */
import type { BatchInput, BatchItemOutcome, InstanceView, ModelAvailability } from '../core/inference.js';

export type {
  BatchInput,
  BatchItemOutcome,
  InstanceView,
  ModelAvailability,
  Segment,
  TranscriptionRequest,
  TranscriptResult,
  Word,
} from '../core/inference.js';

export interface Executor {
  /** Instances of the model that accept batches now. */
  readyInstances(model: string): readonly InstanceView[];
  availability(model: string): ModelAvailability;
  /**
   * Runs one batch on one instance. Resolves with one outcome per request, in order.
   * @throws instance_crashed, instance_wedged when the whole batch is lost with its instance; a
   *   wire error code when the instance refuses the whole batch with an Error frame.
   */
  runBatch(instanceId: string, batch: BatchInput): Promise<BatchItemOutcome[]>;
  /** Called whenever an instance becomes ready or leaves the ready set. */
  onInstancesChanged(listener: () => void): () => void;
}
