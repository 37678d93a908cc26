/**
 * The GPU model host's code path on CPU (Debian's torch 1.13 in CI): the Parakeet adapter with its
 * tiny configuration behind the real server, and its device probe's wedge detection.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

const running: RunningServer[] = [];
after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
});

function parakeetConfig(options: Record<string, unknown>, supervisor: Record<string, unknown> = {}) {
  return {
    models: { parakeet: { adapter: 'parakeet', instances: 1, maxBatchSize: 4, options: { config: 'tiny', device: 'cpu', ...options } } },
    supervisor,
  };
}

describe('parakeet adapter behind the server, on CPU', () => {
  it('transcribes a batch of uploads with words and segments', async () => {
    const server = await startServer({ config: parakeetConfig({}), timeoutMs: 120_000 });
    running.push(server);
    const ready = await server.readiness();
    const instance = (ready.body.models as Record<string, { instances: { device: string; state: string }[] }>).parakeet!.instances[0]!;
    assert.equal(instance.state, 'ready');
    assert.equal(instance.device, 'cpu');
    const answers = await Promise.all(
      [1, 2, 3].map(async (seed) => {
        const body = new FormData();
        body.append('model', 'parakeet');
        body.append('response_format', 'verbose_json');
        body.append('timestamp_granularities[]', 'word');
        body.append('file', new Blob([floatWav(noise(16000 * (1 + seed), seed))]), 'a.wav');
        const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', body });
        return { status: res.status, json: (await res.json()) as { duration: number; text: string; words?: unknown[] } };
      }),
    );
    answers.forEach((a, i) => {
      assert.equal(a.status, 200, JSON.stringify(a.json));
      assert.ok(Math.abs(a.json.duration - (2 + i)) < 0.01);
      assert.equal(typeof a.json.text, 'string');
      assert.ok(Array.isArray(a.json.words));
    });
    assert.equal(await server.metric('voxmux_instance_inferences_total', { model: 'parakeet' }), 3);
  });

  it('replaces an instance whose device probe hangs (wedged)', async () => {
    const server = await startServer({
      config: parakeetConfig(
        { simulateHang: 'hang', probeTimeoutMs: 200 },
        { probeIntervalMs: 200, probeTimeoutMs: 400, restartInitialBackoffMs: 5000 },
      ),
      waitReady: false,
    });
    running.push(server);
    let lastEnd: { reason: string } | null = null;
    for (let i = 0; i < 600 && lastEnd === null; i++) {
      const ready = await server.readiness().catch(() => undefined);
      const instance = (ready?.body.models as Record<string, { instances: { lastEnd: { reason: string } | null }[] }> | undefined)?.parakeet
        ?.instances[0];
      lastEnd = instance?.lastEnd ?? null;
      if (lastEnd === null) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(lastEnd?.reason, 'wedged');
    // The restart is counted when it spawns the new instance, after its backoff (restartInitialBackoffMs).
    const restarts = () => server.metric('voxmux_instance_restarts_total', { model: 'parakeet', reason: 'wedged' });
    for (let i = 0; i < 300 && (await restarts()) < 1; i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok((await restarts()) >= 1);
  });
});
