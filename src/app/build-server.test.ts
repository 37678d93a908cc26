import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../config/load.js';
import { OPENAI_VOICES } from '../config/schema.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildServer, checkFilePath, checkRequestLogPath, countGpusHeld, createModelCatalog, gpuHealth } from './build-server.js';
import { FakeClock } from '../../test/support/fake-clock.js';
import { ScriptedSpawn } from '../../test/support/scripted-child.js';
import { silentLogger } from '../../test/support/test-logger.js';

describe('gpuHealth', () => {
  it('takes a GPU whose instances are all down out of rotation and names it', () => {
    const health = gpuHealth(
      [0, 1, 2],
      [
        { instanceId: 'a', gpu: 0, state: 'ready' },
        { instanceId: 'b', gpu: 1, state: 'crashed' },
        { instanceId: 'c', gpu: 1, state: 'restarting' },
        { instanceId: 'd', gpu: 0, state: 'crashed' },
      ],
    );
    assert.deepEqual(health, {
      '0': { isHealthy: true, instances: ['a', 'd'] },
      '1': { isHealthy: false, instances: ['b', 'c'] },
      '2': { isHealthy: true, instances: [] },
    });
  });

  it('is empty on a node without GPUs', () => {
    assert.deepEqual(gpuHealth([], [{ instanceId: 'a', gpu: null, state: 'ready' }]), {});
  });
});

describe('createModelCatalog', () => {
  it("gives each model and alias its adapter's languages, and none for an adapter that declares none (#16)", () => {
    const config = loadConfig({
      file: { models: { sphinx: { adapter: 'pocketsphinx', aliases: ['whisper-1'] }, echo: { adapter: 'test' } } },
    });
    const catalog = createModelCatalog(config, 7);
    assert.deepEqual(catalog.list(), [
      { id: 'sphinx', created: 7, ownedBy: 'voxmux', task: 'transcription', languages: ['en'] },
      { id: 'whisper-1', created: 7, ownedBy: 'voxmux', task: 'transcription', languages: ['en'] },
      { id: 'echo', created: 7, ownedBy: 'voxmux', task: 'transcription' },
    ]);
    assert.equal(catalog.resolve('whisper-1'), 'sphinx');
  });

  it("gives speech models their task, voice aliases (the adapter's defaults when none are set) and voice residency (#18)", () => {
    const config = loadConfig({
      file: {
        models: {
          cpu: { adapter: 'debian-voices', aliases: ['tts-1'] },
          gpu: { adapter: 'vits' },
          fake: { adapter: 'test', task: 'speech', voiceAliases: { alloy: 'tone-a' } },
        },
      },
    });
    const byId = new Map(
      createModelCatalog(config, 7)
        .list()
        .map((entry) => [entry.id, entry]),
    );
    assert.equal(byId.get('tts-1')?.task, 'speech');
    assert.equal(byId.get('tts-1')?.speech?.voiceAliases.alloy, 'flite-slt');
    assert.equal(byId.get('tts-1')?.speech?.voiceAliases.cedar, 'flite-kal');
    assert.equal(byId.get('tts-1')?.speech?.hasVoiceResources, false);
    assert.deepEqual(byId.get('tts-1')?.speech?.catalogVoiceAliases, []);
    // vits serves whatever voices voicesDir and randomVoices hold: its OpenAI names follow its catalogue.
    assert.deepEqual(byId.get('gpu')?.speech?.voiceAliases, {});
    assert.deepEqual(byId.get('gpu')?.speech?.catalogVoiceAliases, OPENAI_VOICES);
    assert.equal(byId.get('gpu')?.speech?.hasVoiceResources, true);
    assert.deepEqual(byId.get('fake')?.speech, { voiceAliases: { alloy: 'tone-a' }, catalogVoiceAliases: [], hasVoiceResources: false });
  });

  it("gives diarization models their engine's longest item: its maxItemSeconds option, else the adapter's default", () => {
    const config = loadConfig({
      file: {
        models: {
          gpu: { adapter: 'sortformer' },
          short: { adapter: 'sortformer', options: { maxItemSeconds: 30 } },
          cpu: { adapter: 'classical-diarizer' },
        },
      },
    });
    const byId = new Map(
      createModelCatalog(config, 7)
        .list()
        .map((entry) => [entry.id, entry]),
    );
    assert.equal(byId.get('gpu')?.diarization?.maxItemMs, 60_000);
    assert.equal(byId.get('short')?.diarization?.maxItemMs, 30_000);
    assert.equal(byId.get('cpu')?.diarization?.maxItemMs, 3_600_000);
    assert.deepEqual(
      ['gpu', 'cpu'].map((id) => byId.get(id)?.diarization?.maxSpeakers),
      [4, 8],
    );
  });

  it('gives a vits model with its own voiceAliases that table alone', () => {
    const config = loadConfig({ file: { models: { gpu: { adapter: 'vits', voiceAliases: { alloy: 'amy' } } } } });
    const [entry] = createModelCatalog(config, 7).list();
    assert.deepEqual(entry?.speech, { voiceAliases: { alloy: 'amy' }, catalogVoiceAliases: [], hasVoiceResources: true });
  });
});

describe('checkRequestLogPath (#20)', () => {
  it('accepts the log off and a file in a writable folder, and names a missing folder or a folder given as the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-request-log-path-'));
    assert.equal(await checkRequestLogPath(''), undefined);
    assert.equal(await checkRequestLogPath(join(dir, 'requests.jsonl')), undefined);
    assert.match(
      (await checkRequestLogPath(join(dir, 'missing', 'requests.jsonl'))) ?? '',
      /^requestLog\.path: expected a file in an existing, writable folder/,
    );
    assert.match((await checkRequestLogPath(dir)) ?? '', /^requestLog\.path: expected a file: got the folder/);
  });
});

describe('checkFilePath and countGpusHeld (#20)', () => {
  it('names the setting whose file cannot be written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-state-path-'));
    assert.equal(await checkFilePath('budget.statePath', join(dir, 'budget.json')), undefined);
    assert.match(
      (await checkFilePath('budget.statePath', join(dir, 'no', 'budget.json'))) ?? '',
      /^budget\.statePath: expected a file in an existing/,
    );
  });

  it('counts each GPU that at least one live instance is placed on, once', () => {
    const i = (gpu: number | null, state: string) => ({ gpu, state });
    assert.equal(countGpusHeld([i(0, 'ready'), i(0, 'loading'), i(1, 'closed'), i(2, 'restarting'), i(null, 'ready')]), 1);
    assert.equal(countGpusHeld([i(0, 'spawning'), i(1, 'draining')]), 2);
    assert.equal(countGpusHeld([]), 0);
  });
});

describe('buildServer: the autoscaling hint counts the instances the supervisor places', () => {
  it('uses the instances placed by instancesPerGpu, not the unused `instances` default, in voxmux_ops_desired_replicas', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-autoscale-'));
    // One GPU, one instance per GPU (the README's GPU config): the model has 1 instance; `instances` (default 2) is not used.
    const config = loadConfig({
      file: {
        gateway: { voiceActivity: 'energy' },
        supervisor: { gpus: [0], loadLockPath: join(dir, 'load.lock') },
        models: { echo: { adapter: 'test', instancesPerGpu: 1, command: ['fake-host'] } },
      },
    });
    const clock = new FakeClock();
    const server = await buildServer(config, { log: silentLogger(), clock, spawn: new ScriptedSpawn().spawn, baseEnv: {} });
    try {
      assert.equal(server.supervisor.stats().instances.length, 1, 'one slot: 1 GPU x instancesPerGpu 1');
      // One request queued (no instance is up yet) and nothing measured: the queue counts as one busy instance.
      const queued = server.scheduler.submit(
        'echo',
        { audio: new Int16Array(16_000), language: null, prompt: null, wordTimestamps: false },
        { timeoutMs: 600_000 },
      );
      queued.catch(() => undefined);
      await server.app.inject({ method: 'GET', url: '/metrics' });
      clock.advance(1000);
      const text = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
      const desired = Number(/voxmux_ops_desired_replicas\{model="echo"\} ([\d.e+-]+)/.exec(text)?.[1]);
      // (busy 0 + backlog 1) / (1 instance x 0.7 target) = 1.43 replicas; with the 2 unused `instances`, 0.71.
      assert.ok(Math.abs(desired - 1 / 0.7) < 1e-6, `desired replicas ${desired}: expected ${1 / 0.7}`);
    } finally {
      await server.destroy();
    }
  });
});

describe('buildServer: /health/ready counts the instances the supervisor places', () => {
  it('is not ready while a model placed by instancesPerGpu (with instances: 0) has no ready instance', async () => {
    // README: GET /health/ready is "200 once every model has a ready, warmed instance or is stopped on demand".
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-ready-'));
    const config = loadConfig({
      file: {
        gateway: { voiceActivity: 'energy' },
        supervisor: { gpus: [0, 1], loadLockPath: join(dir, 'load.lock') },
        models: { echo: { adapter: 'test', instances: 0, instancesPerGpu: 1, command: ['fake-host'] } },
      },
    });
    const server = await buildServer(config, {
      log: silentLogger(),
      clock: new FakeClock(),
      spawn: new ScriptedSpawn().spawn,
      baseEnv: {},
    });
    try {
      assert.equal(server.supervisor.stats().instances.length, 2, 'two slots: 2 GPUs x instancesPerGpu 1');
      assert.ok(server.supervisor.stats().instances.every((i) => i.state !== 'ready'));
      const res = await server.app.inject({ method: 'GET', url: '/health/ready' });
      assert.equal(res.statusCode, 503, `answered ${res.statusCode} with no instance ready: ${res.body.slice(0, 120)}`);
    } finally {
      await server.destroy();
    }
  });
});
