/**
 * An instance's boot, spawn to ready, broken down: the phases the supervisor times (process start,
 * load, the wait for the exclusive warmup gate, warmup) and the stages the adapter timed inside the
 * load and the warmup (LoadResult.stages, WarmupResult.stages; docs/protocol.md, Boot stages).
 * Pure: the numbers go to the instance's facts, its startup log line and the boot metrics.
 */
import type { BootStage } from '../protocol/codec.js';
import type { Metrics } from '../telemetry/metrics.js';

/** Clock readings (ms) taken while an instance started. */
export interface BootMarks {
  spawnedMs: number;
  helloMs: number;
  loadSentMs: number;
  loadedMs: number;
  warmupSentMs: number;
  warmedMs: number;
}

export interface InstanceBoot {
  /** Spawn to Hello: the interpreter's start and the host's imports. */
  processStartMs: number;
  /** LoadRequest sent to LoadResult received. */
  loadMs: number;
  /** Waiting for the exclusive warmup gate (0 without one). */
  warmupWaitMs: number;
  /** WarmupRequest sent to WarmupResult received. */
  warmupMs: number;
  /** Spawn to ready. */
  totalMs: number;
  /** What the adapter timed: the load's stages, then the warmup's. */
  stages: readonly BootStage[];
  /** Bytes read by the weight_read stages. */
  weightReadBytes: number;
  /** Those bytes over the weight_read stages' time; null without a timed read. */
  weightReadBytesPerSecond: number | null;
}

export function toInstanceBoot(marks: BootMarks, stages: readonly BootStage[]): InstanceBoot {
  const reads = stages.filter((s) => s.stage === 'weight_read');
  const weightReadBytes = reads.reduce((sum, s) => sum + s.bytes, 0);
  const readMs = reads.reduce((sum, s) => sum + s.ms, 0);
  const ms = (from: number, to: number) => Math.max(0, Math.round(to - from));
  return {
    processStartMs: ms(marks.spawnedMs, marks.helloMs),
    loadMs: ms(marks.loadSentMs, marks.loadedMs),
    warmupWaitMs: ms(marks.loadedMs, marks.warmupSentMs),
    warmupMs: ms(marks.warmupSentMs, marks.warmedMs),
    totalMs: ms(marks.spawnedMs, marks.warmedMs),
    stages,
    weightReadBytes,
    weightReadBytesPerSecond: readMs > 0 && weightReadBytes > 0 ? Math.round((weightReadBytes * 1000) / readMs) : null,
  };
}

/** The fields of the instance's startup log line: phases, then each stage as `<stage>Ms` (summed when repeated), MB/s. */
export function toBootLogFields(boot: InstanceBoot): Record<string, number> {
  const fields: Record<string, number> = {
    durationMs: boot.totalMs,
    processStartMs: boot.processStartMs,
    loadMs: boot.loadMs,
    warmupWaitMs: boot.warmupWaitMs,
    warmupMs: boot.warmupMs,
  };
  for (const { stage, ms } of boot.stages) {
    const key = `${stage.replace(/_(\w)/g, (_, c: string) => c.toUpperCase())}StageMs`;
    fields[key] = Math.round((fields[key] ?? 0) + ms);
  }
  if (boot.weightReadBytes > 0) fields.weightReadBytes = boot.weightReadBytes;
  if (boot.weightReadBytesPerSecond !== null) fields.weightReadMBps = Math.round(boot.weightReadBytesPerSecond / 1e5) / 10;
  return fields;
}

/** Exports one instance's boot to the boot metrics of its model. */
export function observeBoot(metrics: Metrics, model: string, boot: InstanceBoot): void {
  const phases = { process_start: boot.processStartMs, load: boot.loadMs, warmup_wait: boot.warmupWaitMs, warmup: boot.warmupMs };
  for (const [phase, ms] of Object.entries(phases)) metrics.instanceBootPhase.observe({ model, phase }, ms / 1000);
  for (const { stage, ms } of boot.stages) metrics.instanceBootStage.observe({ model, stage }, ms / 1000);
  if (boot.weightReadBytes > 0) metrics.instanceWeightReadBytes.set({ model }, boot.weightReadBytes);
  if (boot.weightReadBytesPerSecond !== null) metrics.instanceWeightReadRate.set({ model }, boot.weightReadBytesPerSecond);
}
