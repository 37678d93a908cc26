import assert from 'node:assert/strict';
import { Value } from '@sinclair/typebox/value';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fake-clock.js';
import { FakeExecutor } from '../../../test/support/fake-executor.js';
import { VoiceListSchema, type VoiceList } from '../../api/voices.js';
import type { CatalogEntry } from '../../scheduler/index.js';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics } from '../../telemetry/metrics.js';
import { buildGateway, createEnergyDetector, type ModelCatalog, type VoiceDirectory, type VoiceModel } from '../index.js';

const voice = (name: string, overrides: Partial<CatalogEntry> = {}): CatalogEntry => ({
  name,
  kind: 'voice',
  language: 'en-US',
  sampleRate: 16_000,
  gender: null,
  description: `voice ${name}`,
  ...overrides,
});

const MODELS: ModelCatalog = {
  list: () => [],
  resolve: (name) => ({ speech: 'speech', 'tts-1': 'speech', gpu: 'gpu', asr: 'asr' })[name],
};

let current: FastifyInstance | undefined;
afterEach(async () => {
  await current?.close();
  current = undefined;
});

async function setup(models: readonly VoiceModel[], options: { apiKeys?: string[]; hasVoices?: boolean } = {}) {
  const executor = new FakeExecutor({ speech: ['speech-0', 'speech-1'], gpu: ['gpu-0'], asr: ['asr-0'] });
  const voices: VoiceDirectory = {
    models: () => models,
    catalog: (model) => executor.catalog(model),
    residency: (model) => executor.readyInstances(model),
  };
  const app = await buildGateway(
    {
      maxBodyBytes: 64 * 1024,
      requestTimeoutMs: 30_000,
      apiKeys: options.apiKeys ?? [],
      uploadPoolBytes: 0,
      uploadPoolIdleMs: 10_000,
      bodyTimeoutMs: 60_000,
      splitAboveMs: 0,
      pieceTargetMs: 15_000,
      maxPieceMs: 60_000,
    },
    {
      transcribe: () => Promise.reject(new Error('not used')),
      openStream: () => {
        throw new Error('not used');
      },
      models: MODELS,
      voices: options.hasVoices === false ? { models: () => [], catalog: () => [], residency: () => [] } : voices,
      readiness: () => ({ isReady: true, body: {} }),
      metricsText: async () => '',
      metricsContentType: 'text/plain',
      voiceActivity: createEnergyDetector(),
      decoder: { decode: () => Promise.reject(new Error('not used')) },
      clock: new FakeClock(),
      log: createLogger({ level: 'silent' }),
      metrics: createMetrics(),
    },
  );
  current = app;
  return { app, executor };
}

async function list(app: FastifyInstance, url = '/v1/audio/voices'): Promise<VoiceList> {
  const res = await app.inject({ method: 'GET', url });
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json<VoiceList>();
  assert.ok(Value.Check(VoiceListSchema, body), [...Value.Errors(VoiceListSchema, body)].map((e) => `${e.path}: ${e.message}`).join('; '));
  return body;
}

describe('GET /v1/audio/voices', () => {
  it("lists every model's catalogue with its engine, language, sample rate, aliases and the instances holding each voice", async () => {
    const { app, executor } = await setup([
      { model: 'speech', engine: 'debian-voices', voiceAliases: { alloy: 'flite-slt', shimmer: 'flite-slt', ash: 'flite-rms' } },
      { model: 'gpu', engine: 'vits', voiceAliases: {} },
      { model: 'asr', engine: 'pocketsphinx' },
    ]);
    executor.setCatalog('speech', 'speech-0', [voice('flite-slt', { gender: 'female' }), voice('flite-rms', { gender: 'male' })]);
    executor.setCatalog('speech', 'speech-1', [voice('flite-rms'), voice('espeak-en-us+f3', { sampleRate: 22_050 })]);
    executor.setCatalog('gpu', 'gpu-0', [voice('vits-0', { sampleRate: 22_050 })]);
    executor.setResources('speech-1', [{ name: 'flite-rms', residency: 'host', bytes: 10 }]);
    executor.setResources('gpu-0', [{ name: 'vits-0', residency: 'device', bytes: 31_000_000 }]);
    const body = await list(app);
    assert.deepEqual(
      body.data.map((v) => [v.model, v.id, v.engine, v.sample_rate, v.gender, v.aliases]),
      [
        ['speech', 'flite-slt', 'debian-voices', 16_000, 'female', ['alloy', 'shimmer']],
        ['speech', 'flite-rms', 'debian-voices', 16_000, 'male', ['ash']],
        ['speech', 'espeak-en-us+f3', 'debian-voices', 22_050, null, []],
        ['gpu', 'vits-0', 'vits', 22_050, null, []],
      ],
    );
    assert.deepEqual(body.data[0], {
      id: 'flite-slt',
      object: 'voice',
      model: 'speech',
      engine: 'debian-voices',
      language: 'en-US',
      sample_rate: 16_000,
      gender: 'female',
      description: 'voice flite-slt',
      aliases: ['alloy', 'shimmer'],
      residency: [],
    });
    assert.deepEqual(body.data[1]!.residency, [{ instance_id: 'speech-1', residency: 'host', bytes: 10 }]);
    assert.deepEqual(body.data[3]!.residency, [{ instance_id: 'gpu-0', residency: 'device', bytes: 31_000_000 }]);
  });

  it("lists a model's catalogue aliases on its voices in catalogue order, cycling, beside its fixed aliases", async () => {
    const { app, executor } = await setup([
      { model: 'gpu', engine: 'vits', voiceAliases: { nova: 'vits-2' }, catalogVoiceAliases: ['alloy', 'ash', 'ballad', 'coral', 'echo'] },
    ]);
    executor.setCatalog('gpu', 'gpu-0', [voice('vits-0'), voice('vits-1'), voice('vits-2')]);
    assert.deepEqual(
      (await list(app)).data.map((v) => [v.id, v.aliases]),
      [
        ['vits-0', ['alloy', 'coral']],
        ['vits-1', ['ash', 'echo']],
        ['vits-2', ['ballad', 'nova']],
      ],
    );
  });

  it('leaves aliases out for a model without an alias table, and lists nothing for a model without a catalogue', async () => {
    const { app, executor } = await setup([
      { model: 'speech', engine: 'test' },
      { model: 'asr', engine: 'pocketsphinx' },
    ]);
    executor.setCatalog('speech', 'speech-0', [voice('a')]);
    const body = await list(app);
    assert.deepEqual(
      body.data.map((v) => v.id),
      ['a'],
    );
    assert.ok(!('aliases' in body.data[0]!));
  });

  it('lists one model by name or alias with ?model=, and answers 404 model_not_found for an unknown one', async () => {
    const { app, executor } = await setup([
      { model: 'speech', engine: 'debian-voices' },
      { model: 'gpu', engine: 'vits' },
    ]);
    executor.setCatalog('speech', 'speech-0', [voice('flite-slt')]);
    executor.setCatalog('gpu', 'gpu-0', [voice('vits-0')]);
    assert.deepEqual(
      (await list(app, '/v1/audio/voices?model=tts-1')).data.map((v) => v.id),
      ['flite-slt'],
    );
    assert.deepEqual(
      (await list(app, '/v1/audio/voices?model=gpu')).data.map((v) => v.id),
      ['vits-0'],
    );
    assert.deepEqual((await list(app, '/v1/audio/voices?model=asr')).data, []);
    const missing = await app.inject({ method: 'GET', url: '/v1/audio/voices?model=nope' });
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.json<{ error: { code: string } }>().error.code, 'model_not_found');
  });

  it('answers an empty list when no model has voices, and 401 without a key when keys are configured', async () => {
    const { app } = await setup([], { hasVoices: false });
    assert.deepEqual(await list(app), { object: 'list', data: [] });
    await app.close();
    const guarded = await setup([], { apiKeys: ['k'] });
    assert.equal((await guarded.app.inject({ method: 'GET', url: '/v1/audio/voices' })).statusCode, 401);
    assert.equal(
      (await guarded.app.inject({ method: 'GET', url: '/v1/audio/voices', headers: { authorization: 'Bearer k' } })).statusCode,
      200,
    );
  });
});
