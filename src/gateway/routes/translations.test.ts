import assert from 'node:assert/strict';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fake-clock.js';
import type { TranscriptionRequest, TranscriptResult } from '../../scheduler/index.js';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics } from '../../telemetry/metrics.js';
import { buildGateway, createEnergyDetector, type ModelCatalog } from '../index.js';

const RESULT: TranscriptResult = {
  text: 'Good morning.',
  language: 'en',
  durationS: 1.5,
  segments: [{ start: 0, end: 1.5, text: 'Good morning.', decoding: null }],
  words: null,
};

const catalog: ModelCatalog = {
  list: () => [
    { id: 'whisper', created: 1, ownedBy: 'voxmux', translates: true, languages: ['en', 'de'] },
    { id: 'parakeet', created: 1, ownedBy: 'voxmux', languages: ['en'] },
  ],
  resolve: (name) => (name === 'whisper-1' ? 'whisper' : ['whisper', 'parakeet'].includes(name) ? name : undefined),
};

let current: FastifyInstance | undefined;
afterEach(async () => {
  await current?.close();
  current = undefined;
});

async function setup(): Promise<{ app: FastifyInstance; requests: TranscriptionRequest[] }> {
  const clock = new FakeClock();
  const metrics = createMetrics();
  const requests: TranscriptionRequest[] = [];
  const app = await buildGateway(
    {
      maxBodyBytes: 64 * 1024,
      requestTimeoutMs: 30_000,
      apiKeys: [],
      uploadPoolBytes: 1024 * 1024,
      uploadPoolIdleMs: 10_000,
      bodyTimeoutMs: 60_000,
      splitAboveMs: 0,
      pieceTargetMs: 1000,
      maxPieceMs: 2000,
    },
    {
      openStream: () => assert.fail('These tests open no speech stream'),
      voices: { models: () => [], catalog: () => [], residency: () => [] },
      transcribe: async (_model, request) => {
        requests.push(request);
        return RESULT;
      },
      models: catalog,
      readiness: () => ({ isReady: true, body: {} }),
      metricsText: () => metrics.registry.metrics(),
      metricsContentType: metrics.registry.contentType,
      decoder: {
        decode: async (bytes) => ({
          samples: new Int16Array(bytes.length),
          sampleRateHz: 16000,
          durationMs: bytes.length / 16,
          format: 'wav',
          sourceSampleRateHz: 16000,
          sourceChannels: 1,
          isTruncated: false,
        }),
      },
      voiceActivity: createEnergyDetector(),
      clock,
      log: createLogger({ level: 'silent' }),
      metrics,
    },
  );
  current = app;
  return { app, requests };
}

async function post(app: FastifyInstance, fields: [string, string][]): Promise<LightMyRequestResponse> {
  const form = new FormData();
  for (const [name, value] of fields) form.append(name, value);
  form.append('file', new Blob([new Uint8Array(3200)]), 'audio.wav');
  const encoded = new Response(form);
  return app.inject({
    method: 'POST',
    url: '/v1/audio/translations',
    payload: Buffer.from(await encoded.arrayBuffer()),
    headers: { 'content-type': encoded.headers.get('content-type')! },
  });
}

const errorOf = (res: LightMyRequestResponse) => (res.json() as { error: { code: string; param: string | null; message: string } }).error;

describe('POST /v1/audio/translations', () => {
  it('sends task translate with the prompt and temperature, and answers in OpenAI shape', async () => {
    const { app, requests } = await setup();
    const res = await post(app, [
      ['model', 'whisper-1'],
      ['prompt', 'Greetings.'],
      ['temperature', '0.4'],
    ]);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal((res.json() as { text: string }).text, 'Good morning.');
    assert.deepEqual(
      requests.map((r) => [r.task, r.temperature, r.prompt, r.language, r.wordTimestamps]),
      [['translate', 0.4, 'Greetings.', null, false]],
    );
  });

  it('answers text, srt, vtt and verbose_json (language: english)', async () => {
    const { app } = await setup();
    const text = await post(app, [
      ['model', 'whisper'],
      ['response_format', 'text'],
    ]);
    assert.equal(text.body.trim(), 'Good morning.');
    const srt = await post(app, [
      ['model', 'whisper'],
      ['response_format', 'srt'],
    ]);
    assert.match(srt.body, /^1\n00:00:00,000 --> 00:00:01,500\nGood morning\./);
    const vtt = await post(app, [
      ['model', 'whisper'],
      ['response_format', 'vtt'],
    ]);
    assert.match(vtt.body, /^WEBVTT/);
    const verbose = await post(app, [
      ['model', 'whisper'],
      ['response_format', 'verbose_json'],
    ]);
    const body = verbose.json() as { task: string; language: string; segments: unknown[] };
    assert.equal(body.task, 'translate');
    assert.equal(body.language, 'english');
    assert.equal(body.segments.length, 1);
  });

  it("refuses response_format diarized_json, which OpenAI's translations do not have", async () => {
    const { app, requests } = await setup();
    const res = await post(app, [
      ['model', 'whisper'],
      ['response_format', 'diarized_json'],
    ]);
    assert.equal(res.statusCode, 400);
    assert.deepEqual([errorOf(res).code, errorOf(res).param], ['invalid_parameter', 'response_format']);
    assert.match(errorOf(res).message, /json, text, srt, vtt or verbose_json/);
    assert.equal(requests.length, 0);
  });

  it('refuses a model that does not translate with model_task_mismatch', async () => {
    const { app, requests } = await setup();
    const res = await post(app, [['model', 'parakeet']]);
    assert.equal(res.statusCode, 400);
    assert.equal(errorOf(res).code, 'model_task_mismatch');
    assert.match(errorOf(res).message, /POST \/v1\/audio\/translations/);
    assert.equal(requests.length, 0);
  });

  it("refuses the transcription-only fields OpenAI's translations do not have", async () => {
    const { app } = await setup();
    for (const field of ['language', 'timestamp_granularities', 'stream']) {
      const res = await post(app, [
        ['model', 'whisper'],
        [field, 'en'],
      ]);
      assert.equal(res.statusCode, 400, field);
      assert.deepEqual([errorOf(res).code, errorOf(res).param], ['invalid_parameter', field]);
    }
  });
});
