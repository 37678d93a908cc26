/**
 * The autoscaling hint (pure): from two samples of a node's counters, how busy each model's
 * instances were, how many requests one busy instance completes per second (the measured
 * capacity), and how many replicas of this node the load it sees needs.
 *
 * A node's hint is its own load over its own capacity at the target busy share, so the hints of a
 * pool's nodes add up to the pool's need: an external scaler sums them (KEDA's Prometheus scaler
 * with an AverageValue threshold of 1, or the HPA with an average target of 1 per pod).
 */

/** One model's counters on one node at one instant. */
export interface ModelLoadSample {
  /** Configured instances of the model on this node. */
  instances: number;
  /** Busy milliseconds summed over the model's instance slots (cumulative). */
  busyMs: number;
  /** Requests, sequence items and streams the instances completed with a result (cumulative). */
  completedRequests: number;
  /** Requests (and sequence items) queued now. */
  queued: number;
}

export interface LoadSample {
  atMs: number;
  models: Readonly<Record<string, ModelLoadSample>>;
}

export interface CapacityPolicy {
  /** Share of the time (0..1] an instance should be busy at the desired replica count. */
  targetBusyRatio: number;
  /** Time within which the queued requests should run, in milliseconds. */
  backlogDrainMs: number;
}

export interface ModelCapacity {
  /** Mean busy instances over the window (0..instances). */
  busyInstances: number;
  /** Requests one busy instance completed per second over the window; undefined before any completed. */
  requestsPerBusySecond: number | undefined;
  /** Replicas of this node the model's load needs at the target busy share; 0 without load. */
  desiredReplicas: number;
}

/** Each model's capacity between two samples of one node; `newer` must be later than `older`. */
export function estimateCapacity(older: LoadSample, newer: LoadSample, policy: CapacityPolicy): Record<string, ModelCapacity> {
  const windowMs = newer.atMs - older.atMs;
  const out: Record<string, ModelCapacity> = {};
  for (const [model, now] of Object.entries(newer.models)) {
    const before = older.models[model] ?? { instances: now.instances, busyMs: 0, completedRequests: 0, queued: 0 };
    const busyMs = Math.max(0, now.busyMs - before.busyMs);
    const completed = Math.max(0, now.completedRequests - before.completedRequests);
    const busyInstances = windowMs > 0 ? Math.min(now.instances, busyMs / windowMs) : 0;
    const requestsPerBusySecond = busyMs > 0 && completed > 0 ? completed / (busyMs / 1000) : undefined;
    // Queued work in instance-equivalents: what it takes to run the queue within the drain time.
    // Before any measurement, a queue asks for one instance's worth: enough to start measuring.
    const backlogInstances =
      now.queued === 0
        ? 0
        : requestsPerBusySecond === undefined
          ? 1
          : now.queued / (requestsPerBusySecond * (policy.backlogDrainMs / 1000));
    const desiredReplicas = now.instances === 0 ? 0 : (busyInstances + backlogInstances) / (now.instances * policy.targetBusyRatio);
    out[model] = { busyInstances, requestsPerBusySecond, desiredReplicas };
  }
  return out;
}
