import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { createMetrics } from './metrics.js';

async function busySeconds(metrics: ReturnType<typeof createMetrics>): Promise<number> {
  const metric = metrics.registry.getSingleMetric('voxmux_event_loop_busy_seconds_total');
  assert.ok(metric !== undefined);
  return (await metric.get()).values[0]?.value ?? Number.NaN;
}

describe('voxmux_event_loop_busy_seconds_total', () => {
  it('grows by the time the main thread runs code, and not while it waits', async () => {
    const metrics = createMetrics();
    await sleep(10);
    const start = await busySeconds(metrics);
    const spinUntil = performance.now() + 120;
    while (performance.now() < spinUntil) {
      // busy: the event loop is held by this callback
    }
    await sleep(1);
    const afterWork = await busySeconds(metrics);
    assert.ok(afterWork - start >= 0.1, `busy for 120 ms, counted ${afterWork - start} s`);
    await sleep(200);
    const afterWait = await busySeconds(metrics);
    assert.ok(afterWait - afterWork < 0.08, `idle for 200 ms, counted ${afterWait - afterWork} s busy`);
  });
});
