import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMetrics } from '../telemetry/metrics.js';
import { observeBoot, toBootLogFields, toInstanceBoot } from './boot-report.js';

const MARKS = { spawnedMs: 1000, helloMs: 1250, loadSentMs: 1250, loadedMs: 6250, warmupSentMs: 6750, warmedMs: 8750 };

describe('boot report (#20)', () => {
  it('times each phase from the marks and sums the weight reads into bytes per second', () => {
    const boot = toInstanceBoot(MARKS, [
      { stage: 'weight_read', ms: 1500, bytes: 1_500_000_000 },
      { stage: 'weight_read', ms: 500, bytes: 500_000_000 },
      { stage: 'device_upload', ms: 300, bytes: 1_000_000_000 },
    ]);
    assert.deepEqual(
      { ...boot, stages: boot.stages.length },
      {
        processStartMs: 250,
        loadMs: 5000,
        warmupWaitMs: 500,
        warmupMs: 2000,
        totalMs: 7750,
        stages: 3,
        weightReadBytes: 2_000_000_000,
        weightReadBytesPerSecond: 1_000_000_000,
      },
    );
  });

  it('has no read rate without a timed weight read', () => {
    const boot = toInstanceBoot(MARKS, [{ stage: 'warmup', ms: 10, bytes: 0 }]);
    assert.equal(boot.weightReadBytes, 0);
    assert.equal(boot.weightReadBytesPerSecond, null);
    assert.equal(toInstanceBoot(MARKS, [{ stage: 'weight_read', ms: 0, bytes: 10 }]).weightReadBytesPerSecond, null);
  });

  it('gives the startup log line every phase, each stage in ms (repeats summed) and MB/s', () => {
    const boot = toInstanceBoot(MARKS, [
      { stage: 'weight_read', ms: 1000.4, bytes: 2_469_606_195 },
      { stage: 'graph_capture', ms: 100.25, bytes: 0 },
      { stage: 'graph_capture', ms: 50.5, bytes: 0 },
    ]);
    assert.deepEqual(toBootLogFields(boot), {
      durationMs: 7750,
      processStartMs: 250,
      loadMs: 5000,
      warmupWaitMs: 500,
      warmupMs: 2000,
      weightReadStageMs: 1000,
      graphCaptureStageMs: 151,
      weightReadBytes: 2_469_606_195,
      weightReadMBps: 2468.6,
    });
  });

  it('exports phases, stages, weight bytes and read rate as metrics of the model', async () => {
    const metrics = createMetrics();
    observeBoot(metrics, 'asr', toInstanceBoot(MARKS, [{ stage: 'weight_read', ms: 2000, bytes: 4_000_000_000 }]));
    const text = await metrics.registry.metrics();
    assert.match(text, /voxmux_instance_boot_phase_seconds_sum\{model="asr",phase="process_start"\} 0\.25\n/);
    assert.match(text, /voxmux_instance_boot_phase_seconds_sum\{model="asr",phase="warmup_wait"\} 0\.5\n/);
    assert.match(text, /voxmux_instance_boot_stage_seconds_sum\{model="asr",stage="weight_read"\} 2\n/);
    assert.match(text, /voxmux_instance_weight_read_bytes\{model="asr"\} 4000000000\n/);
    assert.match(text, /voxmux_instance_weight_read_bytes_per_second\{model="asr"\} 2000000000\n/);
  });
});
