/**
 * The port the scheduler needs to run work on instances. The supervisor satisfies it
 * structurally; tests use a FakeExecutor. The scheduler never imports the supervisor.
 */
import type {
  BatchInput,
  BatchItemOutcome,
  InstanceView,
  ModelAvailability,
  SequenceBatchInput,
  SequenceItemOutcome,
  StreamControl,
  StreamInput,
  StreamSink,
} from '../protocol/work.js';

export interface Executor {
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
  /** Called whenever an instance becomes ready, leaves the ready set or changes its resources. */
  onInstancesChanged(listener: () => void): () => void;
}
