/**
 * Voice residency through the whole server: the built server, two real instances of the vits
 * adapter (the tiny config on the CPU, seeded random voices), a voice catalogue larger than each
 * instance's budget, and a scripted sequence of speech calls. The counts each instance reports
 * (hits, misses, loads by source, evictions) and where each voice is resident are asserted
 * exactly: they follow from routing by residency cost (src/scheduler/router.ts) and each
 * instance's LRU with host copies (host/voxmux_host/models/vits/residency.py). The model's default
 * voice aliases, the 13 OpenAI names, fall on its five voices in turn.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startServer, type RunningServer } from '../support/server-process.js';

/** Bytes of one voice of the tiny config, fp32 (host/tests/test_vits_residency.py has the same). */
const VOICE_BYTES = 148_360;
const MODEL = 'tiny-voices';

let server: RunningServer;
before(async () => {
  server = await startServer({
    timeoutMs: 120_000,
    config: {
      // Beats every 100 ms carry residency to the gateway quickly; 20 misses (2 s) tolerate a slow machine.
      supervisor: { heartbeatIntervalMs: 100, heartbeatMissLimit: 20 },
      models: {
        [MODEL]: {
          adapter: 'vits',
          instances: 2,
          maxStreamsPerInstance: 4,
          options: {
            config: 'tiny',
            device: 'cpu',
            randomVoices: 5,
            voiceCacheDir: mkdtempSync(join(tmpdir(), 'voxmux-vits-')),
            phonemizer: 'text',
            // Two voices fit, a third does not: the least recently used goes to its host copy.
            residentBudgetBytes: Math.floor(2.5 * VOICE_BYTES),
          },
        },
      },
    },
  });
  const isAllReady = await eventually(async () => {
    const ready = await server.readiness();
    const instances = (ready.body.models as Record<string, { instances: { state: string }[] }>)[MODEL]!.instances;
    return instances.length === 2 && instances.every((i) => i.state === 'ready');
  }, 60_000);
  assert.ok(isAllReady, 'both instances ready');
});
after(async () => {
  await server?.stop('SIGTERM');
});

/** Polls an async condition every 50 ms; false when it never held within timeoutMs. */
async function eventually(condition: () => Promise<boolean>, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface Voice {
  id: string;
  aliases?: string[];
  residency: { instance_id: string; residency: 'device' | 'host' }[];
}

async function voices(): Promise<Voice[]> {
  const res = await fetch(`${server.url}/v1/audio/voices?model=${MODEL}`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { data: Voice[] }).data;
}

/** Instance id → its voices on the device, sorted. */
async function onDevice(): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const voice of await voices()) {
    for (const held of voice.residency) {
      if (held.residency === 'device') out.set(held.instance_id, [...(out.get(held.instance_id) ?? []), voice.id].sort());
    }
  }
  return out;
}

/** One call, synthesized to its end; then waits until a heartbeat has shown the voice resident. */
async function speak(voice: string): Promise<void> {
  const res = await fetch(`${server.url}/v1/audio/speech`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, voice, input: 'Hello there.', response_format: 'pcm' }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  assert.ok((await res.arrayBuffer()).byteLength > 0);
  assert.ok(await eventually(async () => [...(await onDevice()).values()].some((held) => held.includes(voice))), `${voice} resident`);
}

async function counters(instanceIndex: string): Promise<Record<string, number>> {
  const labels = { model: MODEL, instance_index: instanceIndex };
  return {
    hits: await server.metric('voxmux_instance_resource_hits_total', labels),
    misses: await server.metric('voxmux_instance_resource_misses_total', labels),
    disk: await server.metric('voxmux_instance_resource_loads_total', { ...labels, source: 'disk' }),
    host: await server.metric('voxmux_instance_resource_loads_total', { ...labels, source: 'host' }),
    evictions: await server.metric('voxmux_instance_resource_evictions_total', labels),
  };
}

describe('voice residency and affinity through the server (vits tiny, 2 instances, 2.5 voices of budget each)', () => {
  it('spreads new voices, sends resident voices to their instance, evicts the least recently used to host memory', async () => {
    assert.equal((await voices()).length, 5);
    // New voices go to the instance with fewer voices on its device: two on each.
    for (const voice of ['vits-0', 'vits-1', 'vits-2', 'vits-3']) await speak(voice);
    const spread = await onDevice();
    assert.equal(spread.size, 2);
    const [first, second] = [...spread.entries()].sort(([, a], [, b]) => a[0]!.localeCompare(b[0]!));
    assert.deepEqual(first![1], ['vits-0', 'vits-2']);
    assert.deepEqual(second![1], ['vits-1', 'vits-3']);
    // Resident voices: each call goes to its holder (hits, nothing loaded).
    for (const voice of ['vits-0', 'vits-1', 'vits-2', 'vits-3']) await speak(voice);
    // A fifth voice goes to the first instance (a tie), whose least recently used voice (vits-0) moves
    // to host memory; vits-0 then comes back from there, not from disk, pushing out vits-2.
    await speak('vits-4');
    await speak('vits-0');
    const after = await onDevice();
    assert.deepEqual(after.get(first![0]), ['vits-0', 'vits-4']);
    assert.deepEqual(after.get(second![0]), ['vits-1', 'vits-3']);
    const vits2 = (await voices()).find((v) => v.id === 'vits-2')!;
    assert.deepEqual(vits2.residency, [{ instance_id: first![0], residency: 'host', bytes: VOICE_BYTES }]);

    // The counts, per instance slot, once the heartbeats have carried them.
    const expected = {
      first: { hits: 2, misses: 4, disk: 3, host: 1, evictions: 2 },
      second: { hits: 2, misses: 2, disk: 2, host: 0, evictions: 0 },
    };
    const want = [expected.first, expected.second].map((c) => JSON.stringify(c)).sort();
    const got = async () => [await counters('0'), await counters('1')].map((c) => JSON.stringify(c)).sort();
    const isExact = await eventually(async () => JSON.stringify(await got()) === JSON.stringify(want));
    assert.ok(isExact, `counters ${(await got()).join(' ')}, expected ${want.join(' ')}`);
  });
});

describe('the OpenAI voice names of a vits model with fewer than 13 voices (vits tiny, 5 random voices)', () => {
  it('fall on its voices in catalogue order, cycling, in GET /v1/audio/voices and in speech calls', async () => {
    assert.deepEqual(
      (await voices()).map((v) => [v.id, v.aliases]),
      [
        ['vits-0', ['alloy', 'fable', 'verse']],
        ['vits-1', ['ash', 'nova', 'marin']],
        ['vits-2', ['ballad', 'onyx', 'cedar']],
        ['vits-3', ['coral', 'sage']],
        ['vits-4', ['echo', 'shimmer']],
      ],
    );
    for (const voice of ['cedar', 'echo']) {
      const res = await fetch(`${server.url}/v1/audio/speech`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, voice, input: 'Hello there.', response_format: 'pcm' }),
      });
      assert.equal(res.status, 200, `${voice}: ${await res.clone().text()}`);
      assert.ok((await res.arrayBuffer()).byteLength > 0);
    }
  });
});
