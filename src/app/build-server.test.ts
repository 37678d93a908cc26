import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../config/load.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkFilePath, checkRequestLogPath, countGpusHeld, createModelCatalog, gpuHealth } from './build-server.js';

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
    assert.equal(byId.get('gpu')?.speech?.voiceAliases.cedar, 'vits-12');
    assert.equal(byId.get('gpu')?.speech?.hasVoiceResources, true);
    assert.deepEqual(byId.get('fake')?.speech, { voiceAliases: { alloy: 'tone-a' }, hasVoiceResources: false });
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
