/**
 * Model lifecycle end to end (#20): the built server with the test engine stops an idle model,
 * holds the requests that arrive while it is stopped until its wake, answers them all once, and
 * answers the requests held for a wake that fails 503 model_wake_failed, after which the next
 * request wakes the model again.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

const running: RunningServer[] = [];
after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
});

async function modelState(url: string, id: string): Promise<string> {
  const body = (await (await fetch(`${url}/v1/models/${id}`)).json()) as { voxmux: { state: string } };
  return body.voxmux.state;
}

async function waitForState(url: string, id: string, state: string, timeoutMs = 15_000): Promise<void> {
  const start = Date.now();
  while ((await modelState(url, id)) !== state) {
    if (Date.now() - start > timeoutMs) throw new Error(`model ${id} not ${state} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function transcribe(url: string, model: string, seed: number) {
  const form = new FormData();
  form.append('model', model);
  form.append('file', new Blob([floatWav(noise(8_000, seed))]), 'a.wav');
  const res = await fetch(`${url}/v1/audio/transcriptions`, { method: 'POST', body: form });
  const body = (await res.json()) as { text?: string; error?: { code: string } };
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body };
}

describe('model lifecycle (#20)', () => {
  it('stops an idle model, and the 20 requests and the speech stream that arrive while it is stopped all succeed after its wake', async () => {
    const server = await startServer({
      config: {
        supervisor: { heartbeatIntervalMs: 200 },
        models: {
          echo: { adapter: 'test', instances: 1, idleStopAfterMs: 1500, wakeTimeoutMs: 20_000 },
          voice: { adapter: 'test', task: 'speech', instances: 1, idleStopAfterMs: 1500, voiceAliases: { alloy: 'tone-a' } },
        },
      },
    });
    running.push(server);
    const { url } = server;
    await waitForState(url, 'echo', 'stopped');
    await waitForState(url, 'voice', 'stopped');
    const ready = await server.readiness();
    assert.equal(ready.status, 200, 'a stopped model does not make the server unready');

    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => transcribe(url, 'echo', i)));
    assert.deepEqual(
      answers.map((a) => a.status),
      Array.from({ length: 20 }, () => 200),
    );
    assert.equal(await server.metric('voxmux_scheduler_requests_total', { model: 'echo', outcome: 'ok' }), 20, 'each answered once');
    assert.equal(await server.metric('voxmux_scheduler_requests_total', { model: 'echo' }), 20, 'none failed');
    assert.equal(await server.metric('voxmux_model_wakes_total', { model: 'echo', outcome: 'ok' }), 1);
    assert.equal(await server.metric('voxmux_model_held_requests_total', { model: 'echo' }), 20);
    assert.equal(await modelState(url, 'echo'), 'ready');

    const speech = await fetch(`${url}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'voice', voice: 'alloy', input: 'Wake up.', response_format: 'pcm' }),
    });
    assert.equal(speech.status, 200);
    assert.ok((await speech.arrayBuffer()).byteLength > 0);
    assert.equal(await server.metric('voxmux_model_wakes_total', { model: 'voice', outcome: 'ok' }), 1);

    // Sleep and wake by hand: the wake answers at once, and ?wait=true once the model is ready.
    const slept = await fetch(`${url}/v1/models/echo/sleep?wait=true`, { method: 'POST' });
    assert.equal(slept.status, 200);
    assert.equal(((await slept.json()) as { state: string }).state, 'stopped');
    const woken = await fetch(`${url}/v1/models/echo/wake`, { method: 'POST' });
    assert.equal(woken.status, 202);
    assert.equal(((await woken.json()) as { state: string }).state, 'starting');
    const waited = await fetch(`${url}/v1/models/echo/wake?wait=true`, { method: 'POST' });
    assert.equal(waited.status, 200);
    assert.equal(((await waited.json()) as { state: string }).state, 'ready');
    const unknown = await fetch(`${url}/v1/models/nope/wake`, { method: 'POST' });
    assert.equal(unknown.status, 404);
    assert.ok(server.logs.some((l) => l.msg === 'model woke' && l.model === 'echo'));
    assert.ok(server.logs.some((l) => l.msg === 'model idle: stopping' && l.model === 'echo'));
  });

  it('answers the requests held for a wake that fails 503 model_wake_failed within the limit, and the next request wakes again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-lifecycle-e2e-'));
    const marker = join(dir, 'fail');
    // The host starts unless the marker file exists: a model whose instance cannot start on demand.
    const script = `if [ -e '${marker}' ]; then echo 'cannot start' >&2; exit 3; fi; exec /usr/bin/python3 -u -m voxmux_host --adapter test`;
    const server = await startServer({
      config: {
        supervisor: { heartbeatIntervalMs: 200, restartInitialBackoffMs: 50 },
        models: { flaky: { adapter: 'test', instances: 1, command: ['/bin/sh', '-c', script], wakeTimeoutMs: 20_000 } },
      },
    });
    running.push(server);
    const { url } = server;
    assert.equal((await fetch(`${url}/v1/models/flaky/sleep?wait=true`, { method: 'POST' })).status, 200);
    writeFileSync(marker, '');
    const startedMs = Date.now();
    const held = await Promise.all(Array.from({ length: 5 }, (_, i) => transcribe(url, 'flaky', i)));
    const elapsedMs = Date.now() - startedMs;
    for (const answer of held) {
      assert.equal(answer.status, 503);
      assert.equal(answer.body.error?.code, 'model_wake_failed');
      assert.ok(Number(answer.retryAfter) >= 1, 'Retry-After is set');
    }
    assert.ok(elapsedMs < 20_000, `answered within the wake limit (${elapsedMs} ms)`);
    assert.equal(await modelState(url, 'flaky'), 'stopped');
    assert.equal((await server.readiness()).status, 200, 'a model stopped after a failed wake does not make the server unready');

    rmSync(marker);
    const next = await transcribe(url, 'flaky', 9);
    assert.equal(next.status, 200, 'the next request wakes the model again');
    // A request arriving after a failed wake tries again: uploads still arriving then may each
    // have caused one more (failed) wake.
    assert.ok((await server.metric('voxmux_model_wakes_total', { model: 'flaky', outcome: 'failed' })) >= 1);
    assert.equal(await server.metric('voxmux_model_wakes_total', { model: 'flaky', outcome: 'ok' }), 1);
  });
});
