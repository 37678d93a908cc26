/**
 * Budget guards end to end (#20): the built server, its test-engine instance placed on GPU 0 (a
 * configured GPU list; the test engine runs on the CPU whatever CUDA_VISIBLE_DEVICES says), accrues
 * GPU hours at a price that crosses the monthly budget within seconds, and POSTs the webhook (a
 * local receiver) once per threshold crossing; after a restart with the same state file, again
 * only for the thresholds still over.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';
import { waitFor } from '../support/wait-for.js';

const running: RunningServer[] = [];
const receivers: Server[] = [];
after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  for (const r of receivers) r.close();
});

async function startReceiver(): Promise<{ url: string; posts: Record<string, unknown>[] }> {
  const posts: Record<string, unknown>[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      posts.push(JSON.parse(body) as Record<string, unknown>);
      res.writeHead(204).end();
    });
  });
  receivers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, posts };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('budget guards (#20)', () => {
  it('posts the webhook once per threshold crossing, and after a restart only for a threshold still over', async () => {
    const receiver = await startReceiver();
    const statePath = join(mkdtempSync(join(tmpdir(), 'voxmux-budget-e2e-')), 'budget.json');
    // $1 per GPU-second: 80 % of $3 after 2.4 s with the instance up, 100 % after 3 s.
    const config = (monthlyBudgetUsd: number) => ({
      supervisor: { gpus: [0], heartbeatIntervalMs: 200 },
      budget: { gpuHourPriceUsd: 3600, monthlyBudgetUsd, checkIntervalMs: 1000, webhookUrl: receiver.url, statePath },
      models: { echo: { adapter: 'test', instances: 1 } },
    });
    const first = await startServer({ config: config(3) });
    running.push(first);
    await waitFor(() => receiver.posts.length >= 2, 'the 80 % and 100 % posts', 20_000);
    await sleep(2500); // more checks, all over both thresholds: no more posts
    assert.deepEqual(
      receiver.posts.map((p) => [p.guard, p.percent]),
      [
        ['monthly_spend', 80],
        ['monthly_spend', 100],
      ],
    );
    assert.ok(Number(receiver.posts[1]!.spendUsd) >= 3);
    assert.ok((await first.metric('voxmux_budget_gpu_hours')) > 0);
    assert.equal(await first.metric('voxmux_budget_alerts_total', { guard: 'monthly_spend' }), 2);
    assert.ok(first.logs.some((l) => l.msg === 'budget threshold reached' && l.percent === 100));
    assert.equal(await first.stop('SIGTERM'), 0);

    // Restarted with the same state: still over both thresholds, so each fires once more.
    const again = await startServer({ config: config(3) });
    running.push(again);
    await waitFor(() => receiver.posts.length >= 4, 'the posts after the restart', 20_000);
    await sleep(1500);
    assert.deepEqual(
      receiver.posts.slice(2).map((p) => [p.guard, p.percent]),
      [
        ['monthly_spend', 80],
        ['monthly_spend', 100],
      ],
    );
    assert.equal(await again.stop('SIGTERM'), 0);

    // Restarted with a budget the accrued spend is far under: nothing fires.
    const under = await startServer({ config: config(1_000_000) });
    running.push(under);
    await sleep(2500);
    assert.equal(receiver.posts.length, 4);
    assert.ok((await under.metric('voxmux_budget_spend_usd')) >= 3, 'the spend was kept across restarts');
  });

  it('with hardStop, refuses to wake a stopped model once the budget is used up: 503 gpu_budget_exhausted', async () => {
    // $1 per GPU-second against $1: used up after the first second with the instance up.
    const server = await startServer({
      config: {
        supervisor: { gpus: [0], heartbeatIntervalMs: 200 },
        budget: { gpuHourPriceUsd: 3600, monthlyBudgetUsd: 1, checkIntervalMs: 1000, hardStop: true },
        models: { echo: { adapter: 'test', instances: 1, idleStopAfterMs: 1500 } },
      },
    });
    running.push(server);
    await waitFor(() => server.logs.some((l) => l.msg === 'model stopped'), 'the idle stop', 20_000);
    await waitFor(() => server.logs.some((l) => l.msg === 'budget threshold reached' && l.percent === 100), 'the 100 % check', 20_000);
    const form = new FormData();
    form.append('model', 'echo');
    form.append('file', new Blob([floatWav(noise(8_000, 1))]), 'a.wav');
    const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', body: form });
    const body = (await res.json()) as { error?: { code: string } };
    assert.equal(res.status, 503);
    assert.equal(body.error?.code, 'gpu_budget_exhausted');
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
    const woken = await fetch(`${server.url}/v1/models/echo/wake`, { method: 'POST' });
    assert.equal(woken.status, 503);
    assert.equal(await server.metric('voxmux_model_wakes_total', { model: 'echo', outcome: 'refused' }), 2);
  });
});
