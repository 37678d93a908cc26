/** The line `voxmux serve` logs once it listens and its instances have started: where to send calls, and what answers them. */
import type { Config } from '../config/schema.js';

export interface ModelReadiness {
  model: string;
  /** Instances placed (the supervisor's slots: instancesPerGpu x GPUs, or `instances`). */
  instances: number;
  /** Instances in state `ready` when the line is written. */
  readyInstances: number;
}

/** Each configured model with its instances, counted from the supervisor's snapshot (one entry per placed instance). */
export function modelReadiness(config: Config, instances: readonly { model: string; state: string }[]): ModelReadiness[] {
  return Object.keys(config.models).map((model) => {
    const mine = instances.filter((i) => i.model === model);
    return { model, instances: mine.length, readyInstances: mine.filter((i) => i.state === 'ready').length };
  });
}

/** "voxmux ready on http://127.0.0.1:8000: pocketsphinx-en-us (2 instances)"; a model with instances that failed to start says how many are ready. */
export function readyMessage(url: string, models: readonly ModelReadiness[]): string {
  const described = models.map(({ model, instances, readyInstances }) => {
    const count = `${instances} instance${instances === 1 ? '' : 's'}`;
    return `${model} (${readyInstances === instances ? count : `${readyInstances} of ${count} ready`})`;
  });
  return `voxmux ready on ${url}: ${described.length === 0 ? 'no models' : described.join(', ')}`;
}
