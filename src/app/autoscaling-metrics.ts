/**
 * Exports the autoscaling metrics at each scrape: the busy time of every instance slot and GPU
 * (counters, from the supervisor's stats), and each model's busy instances, measured capacity and
 * desired replicas (ops' estimateCapacity over the last telemetry.scaleWindowMs of samples).
 * Scrape-driven, so an idle server does no work for it; several scrapers share the samples.
 */
import type { Clock } from '../core/clock.js';
import { estimateCapacity, type LoadSample } from '../ops/index.js';
import type { SchedulerStats } from '../scheduler/index.js';
import type { SupervisorStats } from '../supervisor/index.js';
import type { Metrics } from '../telemetry/metrics.js';

export interface AutoscalingMetricsOptions {
  windowMs: number;
  targetBusyPercent: number;
  backlogDrainMs: number;
  /** The models to export; each one's instances are the supervisor's slots for it (one per placed instance). */
  models: readonly string[];
}

export interface AutoscalingMetricsDeps {
  supervisorStats: () => SupervisorStats;
  schedulerStats: () => SchedulerStats;
  metrics: Metrics;
  clock: Clock;
}

export function createAutoscalingMetrics(options: AutoscalingMetricsOptions, deps: AutoscalingMetricsDeps): { update(): void } {
  const { metrics, clock } = deps;
  const policy = { targetBusyRatio: options.targetBusyPercent / 100, backlogDrainMs: options.backlogDrainMs };
  const exportedMs = new Map<string, number>();
  /** Samples, oldest first; the first one at least windowMs old is the window's start. */
  const samples: LoadSample[] = [];
  for (const model of options.models) {
    metrics.busyInstances.set({ model }, 0);
    metrics.capacity.set({ model }, 0);
    metrics.desiredReplicas.set({ model }, 0);
  }

  /** Adds what a cumulative busy time grew by since the last scrape to its counter. */
  const exportBusy = (key: string, busyMs: number, inc: (seconds: number) => void) => {
    const delta = busyMs - (exportedMs.get(key) ?? 0);
    if (delta > 0) inc(delta / 1000);
    exportedMs.set(key, busyMs);
  };

  return {
    update() {
      const nowMs = clock.nowMs();
      const { instances, gpus } = deps.supervisorStats();
      const scheduler = deps.schedulerStats();
      for (const i of instances) {
        const labels = { model: i.model, instance_index: String(i.index) };
        exportBusy(`slot:${i.model}#${i.index}`, i.busyMs, (s) => metrics.instanceBusy.inc(labels, s));
      }
      for (const g of gpus) exportBusy(`gpu:${g.gpu}`, g.busyMs, (s) => metrics.gpuBusy.inc({ gpu: String(g.gpu) }, s));

      const models: LoadSample['models'] = Object.fromEntries(
        options.models.map((model) => {
          const mine = instances.filter((i) => i.model === model);
          return [
            model,
            {
              instances: mine.length,
              busyMs: mine.reduce((sum, i) => sum + i.busyMs, 0),
              completedRequests: mine.reduce((sum, i) => sum + i.completedRequests, 0),
              queued: scheduler.models[model]?.queued ?? 0,
            },
          ];
        }),
      );
      samples.push({ atMs: nowMs, models });
      while (samples.length > 2 && nowMs - samples[1]!.atMs >= options.windowMs) samples.shift();
      const start = samples[0]!;
      if (start.atMs >= nowMs) return; // one sample: nothing measured yet
      for (const [model, capacity] of Object.entries(estimateCapacity(start, { atMs: nowMs, models }, policy))) {
        metrics.busyInstances.set({ model }, capacity.busyInstances);
        metrics.capacity.set({ model }, (capacity.requestsPerBusySecond ?? 0) * (models[model]?.instances ?? 0));
        metrics.desiredReplicas.set({ model }, capacity.desiredReplicas);
      }
    },
  };
}
