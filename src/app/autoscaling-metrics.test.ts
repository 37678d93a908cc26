import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SchedulerStats } from '../scheduler/index.js';
import type { InstanceSnapshot, SupervisorStats } from '../supervisor/index.js';
import { createMetrics } from '../telemetry/metrics.js';
import { FakeClock } from '../../test/support/fake-clock.js';
import { createAutoscalingMetrics } from './autoscaling-metrics.js';

function instance(index: number, busyMs: number, completedRequests: number): InstanceSnapshot {
  return { model: 'asr', index, gpu: 0, busyMs, completedRequests } as InstanceSnapshot;
}

function setup() {
  const clock = new FakeClock();
  const metrics = createMetrics();
  let supervisor: SupervisorStats = { instances: [instance(0, 0, 0), instance(1, 0, 0)], gpus: [{ gpu: 0, busyMs: 0 }] };
  let queued = 0;
  const exporter = createAutoscalingMetrics(
    { windowMs: 10_000, targetBusyPercent: 50, backlogDrainMs: 10_000, models: ['asr'] },
    {
      supervisorStats: () => supervisor,
      schedulerStats: () => ({ models: { asr: { queued } } }) as unknown as SchedulerStats,
      metrics,
      clock,
    },
  );
  const value = async (name: string, labels: Record<string, string> = {}) => {
    const metric = metrics.registry.getSingleMetric(name);
    const { values } = await metric!.get();
    return values.filter((v) => Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l)).reduce((sum, v) => sum + v.value, 0);
  };
  return {
    clock,
    exporter,
    value,
    set: (next: SupervisorStats, q = 0) => {
      supervisor = next;
      queued = q;
    },
  };
}

describe('autoscaling metrics', () => {
  it('export busy seconds per instance and GPU as counters, and the desired replicas from measured capacity', async () => {
    const { clock, exporter, value, set } = setup();
    exporter.update();
    assert.equal(await value('voxmux_ops_desired_replicas', { model: 'asr' }), 0);
    clock.advance(10_000);
    // Over 10 s: instance 0 busy 8 s, instance 1 busy 4 s (1.2 busy instances), the GPU 9 s; 240 requests done.
    set({ instances: [instance(0, 8000, 160), instance(1, 4000, 80)], gpus: [{ gpu: 0, busyMs: 9000 }] });
    exporter.update();
    assert.equal(await value('voxmux_instance_busy_seconds_total', { model: 'asr', instance_index: '0' }), 8);
    assert.equal(await value('voxmux_instance_busy_seconds_total', { model: 'asr', instance_index: '1' }), 4);
    assert.equal(await value('voxmux_gpu_busy_seconds_total', { gpu: '0' }), 9);
    assert.equal(await value('voxmux_ops_busy_instances', { model: 'asr' }), 1.2);
    // 240 requests in 12 busy seconds: 20 per busy instance-second, 40/s with both instances busy.
    assert.equal(await value('voxmux_ops_capacity_requests_per_second', { model: 'asr' }), 40);
    // 1.2 busy instances against 2 instances × 50 %: 1.2 replicas.
    assert.ok(Math.abs((await value('voxmux_ops_desired_replicas', { model: 'asr' })) - 1.2) < 1e-9);
  });

  it('counts each busy second once across scrapes, and adds the queue to the desired replicas', async () => {
    const { clock, exporter, value, set } = setup();
    exporter.update();
    clock.advance(5000);
    set({ instances: [instance(0, 5000, 100), instance(1, 5000, 100)], gpus: [{ gpu: 0, busyMs: 5000 }] });
    exporter.update();
    exporter.update();
    clock.advance(5000);
    set({ instances: [instance(0, 10_000, 200), instance(1, 10_000, 200)], gpus: [{ gpu: 0, busyMs: 10_000 }] }, 400);
    exporter.update();
    assert.equal(await value('voxmux_instance_busy_seconds_total'), 20);
    assert.equal(await value('voxmux_gpu_busy_seconds_total'), 10);
    // Saturated (2 busy) plus 400 queued at 20 per busy second within 10 s (2 more): 4 / (2 × 0.5).
    assert.equal(await value('voxmux_ops_desired_replicas', { model: 'asr' }), 4);
  });
});
