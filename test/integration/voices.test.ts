/**
 * Voice catalogues end to end (#18): the server as app/build-server.ts wires it, over real Python
 * hosts running the `test` adapter with a declared catalogue. GET /v1/audio/voices lists the
 * catalogue, a stream naming a voice no instance loaded has its instance load it by name, and the
 * voice's residency then shows in the voice list, in /health/ready and in /metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildServer, type Server } from '../../src/app/build-server.js';
import { systemClock } from '../../src/core/clock.js';
import { readProcessEnvironment } from '../../src/config/env.js';
import { loadConfig } from '../../src/config/load.js';
import type { VoiceList } from '../../src/api/voices.js';
import { spawnInstance } from '../../src/supervisor/index.js';
import { HOST_PATH } from '../support/supervisor-fixture.js';
import { silentLogger } from '../support/test-logger.js';
import { waitFor } from '../support/wait-for.js';

const VOICE_BYTES = 4096;

let server: Server;
before(async () => {
  const config = loadConfig({
    file: {
      models: {
        speech: {
          adapter: 'test',
          task: 'speech',
          instances: 2,
          options: { voices: ['alba', 'bruce', 'carol'], voiceBytes: VOICE_BYTES, resourceBudgetBytes: 3 * VOICE_BYTES },
        },
        echo: { adapter: 'test', aliases: ['whisper-1'] },
      },
      supervisor: { hostPath: HOST_PATH, heartbeatIntervalMs: 100, gpus: [] },
      gateway: { voiceActivity: 'energy' },
    },
  });
  server = await buildServer(config, { log: silentLogger(), clock: systemClock, spawn: spawnInstance, baseEnv: readProcessEnvironment() });
  await server.startInstances();
});
after(() => server.destroy());

async function voices(url = '/v1/audio/voices'): Promise<VoiceList> {
  const res = await server.app.inject({ method: 'GET', url });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<VoiceList>();
}

async function speak(voice: string): Promise<number> {
  const call = server.scheduler.openStream(
    'speech',
    { resource: voice, params: { chunks: 2 }, body: new Uint8Array() },
    { timeoutMs: 10_000 },
  );
  let chunks = 0;
  for await (const chunk of call) {
    assert.equal(chunk.meta.resource, voice);
    chunks += 1;
  }
  return chunks;
}

describe('voice catalogues through the server (#18)', () => {
  it('lists the test engine catalogue of the speech model, with no residency before any stream', async () => {
    const body = await voices();
    assert.deepEqual(
      body.data.map((v) => [v.id, v.model, v.engine, v.language, v.sample_rate, v.gender, v.residency]),
      [
        ['alba', 'speech', 'test', 'en-US', 16_000, null, []],
        ['bruce', 'speech', 'test', 'en-US', 16_000, null, []],
        ['carol', 'speech', 'test', 'en-US', 16_000, null, []],
      ],
    );
    assert.deepEqual(server.scheduler.catalog('echo'), []);
    assert.deepEqual((await voices('/v1/audio/voices?model=whisper-1')).data, []);
  });

  it('loads a voice by name for a stream, then shows where it is resident and counts the miss and the hit', async () => {
    const holders = () => server.supervisor.stats().instances.filter((i) => i.resources.some((r) => r.name === 'alba'));
    assert.equal(await speak('alba'), 2);
    await waitFor(() => holders().length === 1, 'a heartbeat reporting alba');
    // Routing prefers the instance holding alba: the second stream finds it resident there.
    assert.equal(await speak('alba'), 2);
    await waitFor(() => holders().length === 1 && holders()[0]!.resourceCounters?.hits === 1, 'a heartbeat counting the hit');

    const alba = (await voices()).data.find((v) => v.id === 'alba')!;
    assert.deepEqual(alba.residency, [{ instance_id: holders()[0]!.instanceId, residency: 'device', bytes: VOICE_BYTES }]);

    const ready = await server.app.inject({ method: 'GET', url: '/health/ready' });
    assert.equal(ready.statusCode, 200);
    type Health = {
      models: Record<
        string,
        { instances: { instanceId: string; resources: unknown[]; resourceCounters: Record<string, number> | null }[] }
      >;
    };
    const instances = ready.json<Health>().models.speech!.instances;
    const holder = instances.find((i) => i.instanceId === holders()[0]!.instanceId)!;
    assert.deepEqual(holder.resources, [{ name: 'alba', kind: 'voice', residency: 'device', bytes: VOICE_BYTES }]);
    assert.deepEqual([holder.resourceCounters?.misses, holder.resourceCounters?.hits, holder.resourceCounters?.loadsFromDisk], [1, 1, 1]);
    assert.equal(holder.resourceCounters?.budgetBytes, 3 * VOICE_BYTES);

    const metrics = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
    const index = holders()[0]!.instanceId.split('-')[1];
    assert.match(metrics, new RegExp(`voxmux_instance_resource_misses_total\\{model="speech",instance_index="${index}"\\} 1\\n`));
    assert.match(
      metrics,
      new RegExp(`voxmux_instance_resource_loads_total\\{model="speech",instance_index="${index}",source="disk"\\} 1\\n`),
    );
    assert.match(
      metrics,
      new RegExp(`voxmux_instance_resource_resident_bytes\\{model="speech",instance_index="${index}"\\} ${VOICE_BYTES}\\n`),
    );
  });

  it('ends a stream whose voice is in no catalogue with resource_not_found', async () => {
    await assert.rejects(speak('nobody'), { code: 'resource_not_found' });
  });
});
