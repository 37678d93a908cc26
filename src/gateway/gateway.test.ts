import assert from 'node:assert/strict';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, it } from 'node:test';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import type { TranscriptionRequest, TranscriptResult } from '../scheduler/index.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics, type Metrics } from '../telemetry/metrics.js';
import { errors } from '../core/error-catalog.js';
import {
  buildGateway,
  createEnergyDetector,
  createModelLifecycleControl,
  type ModelCatalog,
  type ModelLifecycleControl,
  type ModelLifecycleState,
  type ReadinessSnapshot,
} from './index.js';

const KEYS = ['gateway-key-one', 'gateway-key-two'];

const RESULT: TranscriptResult = { text: 'hello', language: 'en', durationS: 1, segments: null, words: null };

const catalog: ModelCatalog = {
  list: () => [
    { id: 'echo', created: 1_700_000_000, ownedBy: 'voxmux' },
    { id: 'whisper-1', created: 1_700_000_000, ownedBy: 'voxmux', languages: ['en'] },
  ],
  resolve: (name) => (name === 'echo' || name === 'whisper-1' ? 'echo' : undefined),
};

let current: FastifyInstance | undefined;
afterEach(async () => {
  await current?.close();
  current = undefined;
});

async function setup(
  options: {
    apiKeys?: string[];
    maxBodyBytes?: number;
    isDraining?: () => boolean;
    models?: ModelCatalog;
    lifecycle?: ModelLifecycleControl;
  } = {},
) {
  const metrics = createMetrics();
  let readiness: ReadinessSnapshot = { isReady: false, body: { models: { echo: { isReady: false } } } };
  let transcribeCalls = 0;
  const requests: TranscriptionRequest[] = [];
  const app = await buildGateway(
    {
      maxBodyBytes: options.maxBodyBytes ?? 64 * 1024,
      requestTimeoutMs: 30_000,
      apiKeys: options.apiKeys ?? [],
      uploadPoolBytes: 1024 * 1024,
      uploadPoolIdleMs: 10_000,
      bodyTimeoutMs: 60_000,
      splitAboveMs: 0,
      pieceTargetMs: 15_000,
      maxPieceMs: 60_000,
    },
    {
      openStream: () => assert.fail('These tests open no speech stream'),
      voices: { models: () => [], catalog: () => [], residency: () => [] },
      transcribe: async (_model, request) => {
        transcribeCalls += 1;
        requests.push(request);
        return RESULT;
      },
      models: options.models ?? catalog,
      readiness: () => readiness,
      metricsText: async () => '# HELP fake_metric A fake metric.\nfake_metric 1\n',
      metricsContentType: 'text/plain; version=0.0.4; charset=utf-8',
      voiceActivity: createEnergyDetector(),
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
      clock: new FakeClock(),
      log: createLogger({ level: 'silent' }),
      metrics,
      ...(options.isDraining === undefined ? {} : { isDraining: options.isDraining }),
      ...(options.lifecycle === undefined ? {} : { lifecycle: options.lifecycle }),
    },
  );
  current = app;
  return {
    app,
    metrics,
    transcribeCalls: () => transcribeCalls,
    requests,
    setReadiness: (snapshot: ReadinessSnapshot) => {
      readiness = snapshot;
    },
  };
}

async function upload(
  app: FastifyInstance,
  headers: Record<string, string> = {},
  fields: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  const form = new FormData();
  form.append('model', 'echo');
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  form.append('file', new Blob([new Uint8Array(320)]), 'a.wav');
  const encoded = new Response(form);
  return app.inject({
    method: 'POST',
    url: '/v1/audio/transcriptions',
    payload: Buffer.from(await encoded.arrayBuffer()),
    headers: { ...headers, 'content-type': encoded.headers.get('content-type')! },
  });
}

const errorCode = (res: LightMyRequestResponse) => (res.json() as { error: { code: string } }).error.code;

async function callCount(metrics: Metrics, endpoint: string, outcome: string): Promise<number> {
  const { values } = await metrics.gatewayCalls.get();
  return values.find((v) => v.labels.endpoint === endpoint && v.labels.outcome === outcome)?.value ?? 0;
}

describe('buildGateway authentication', () => {
  it('serves every route without a key when no keys are configured', async () => {
    const { app } = await setup();
    assert.equal((await app.inject({ method: 'GET', url: '/v1/models' })).statusCode, 200);
    assert.equal((await upload(app)).statusCode, 200);
  });

  it('answers 401 with the OpenAI envelope when keys are configured and the call has no key or a wrong one', async () => {
    const { app, transcribeCalls } = await setup({ apiKeys: KEYS });
    const missing = await app.inject({ method: 'GET', url: '/v1/models' });
    assert.equal(missing.statusCode, 401);
    assert.deepEqual(missing.json(), {
      error: {
        message: 'Missing API key: send Authorization: Bearer <key>',
        type: 'authentication_error',
        param: null,
        code: 'missing_api_key',
      },
    });
    const wrong = await app.inject({ method: 'GET', url: '/v1/models', headers: { authorization: 'Bearer not-a-configured-key' } });
    assert.deepEqual([wrong.statusCode, errorCode(wrong)], [401, 'invalid_api_key']);
    const upload401 = await upload(app, { authorization: 'Basic Z2F0ZXdheS1rZXktb25l' });
    assert.deepEqual([upload401.statusCode, errorCode(upload401)], [401, 'missing_api_key']);
    assert.equal(transcribeCalls(), 0);
  });

  it('serves a call with any configured key', async () => {
    const { app } = await setup({ apiKeys: KEYS });
    for (const key of KEYS) {
      assert.equal((await app.inject({ method: 'GET', url: '/v1/models', headers: { authorization: `Bearer ${key}` } })).statusCode, 200);
      assert.equal((await upload(app, { authorization: `Bearer ${key}` })).statusCode, 200);
    }
  });

  it('keeps health and metrics open when keys are configured, query strings included', async () => {
    const { app, setReadiness } = await setup({ apiKeys: KEYS });
    setReadiness({ isReady: true, body: {} });
    for (const url of ['/health/live', '/health/ready', '/health/ready?verbose=1', '/metrics']) {
      assert.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url);
    }
  });

  it('answers 401 rather than 404 for an unknown route when keys are configured', async () => {
    const { app } = await setup({ apiKeys: KEYS });
    const res = await app.inject({ method: 'GET', url: '/v1/secret-admin' });
    assert.deepEqual([res.statusCode, errorCode(res)], [401, 'missing_api_key']);
  });
});

describe('buildGateway health and metrics', () => {
  it('answers /health/live 200 whatever the readiness', async () => {
    const { app } = await setup();
    const res = await app.inject({ method: 'GET', url: '/health/live' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { status: 'ok' });
  });

  it('answers /health/ready 503 until ready and 200 once ready, with the readiness body', async () => {
    const { app, setReadiness } = await setup();
    const notReady = await app.inject({ method: 'GET', url: '/health/ready' });
    assert.equal(notReady.statusCode, 503);
    assert.deepEqual(notReady.json(), { status: 'not_ready', models: { echo: { isReady: false } } });
    setReadiness({ isReady: true, body: { models: { echo: { isReady: true } } } });
    const ready = await app.inject({ method: 'GET', url: '/health/ready' });
    assert.equal(ready.statusCode, 200);
    assert.deepEqual(ready.json(), { status: 'ready', models: { echo: { isReady: true } } });
  });

  it('serves /metrics with the registry content type and text', async () => {
    const { app } = await setup();
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
    assert.equal(res.body, '# HELP fake_metric A fake metric.\nfake_metric 1\n');
  });

  it('counts a not-ready health check as unavailable, not as an internal error', async () => {
    const { app, metrics, setReadiness } = await setup();
    await app.inject({ method: 'GET', url: '/health/ready' });
    setReadiness({ isReady: true, body: {} });
    await app.inject({ method: 'GET', url: '/health/ready' });
    await settle();
    assert.equal(await callCount(metrics, '/health/ready', 'unavailable'), 1);
    assert.equal(await callCount(metrics, '/health/ready', 'ok'), 1);
    assert.equal(await callCount(metrics, '/health/ready', 'internal'), 0);
  });
});

describe('buildGateway routing', () => {
  it('answers an unknown route 404 route_not_found in the OpenAI envelope, counted under a fixed endpoint label', async () => {
    const { app, metrics } = await setup();
    const res = await app.inject({ method: 'GET', url: '/v1/audio/nothing?x=1' });
    assert.equal(res.statusCode, 404);
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    assert.deepEqual(res.json(), {
      error: { message: 'No route for GET /v1/audio/nothing', type: 'invalid_request_error', param: null, code: 'route_not_found' },
    });
    const wrongMethod = await app.inject({ method: 'GET', url: '/v1/audio/transcriptions' });
    assert.deepEqual([wrongMethod.statusCode, errorCode(wrongMethod)], [404, 'route_not_found']);
    await settle();
    assert.equal(await callCount(metrics, 'unmatched', 'not_found'), 2);
  });

  it('lists the models, aliases included, in the OpenAI list shape with their languages under voxmux (#16)', async () => {
    const { app } = await setup();
    const list = await app.inject({ method: 'GET', url: '/v1/models' });
    assert.deepEqual(list.json(), {
      object: 'list',
      data: [
        {
          id: 'echo',
          object: 'model',
          created: 1_700_000_000,
          owned_by: 'voxmux',
          voxmux: { task: 'transcription', languages: null, translation: false, state: 'ready' },
        },
        {
          id: 'whisper-1',
          object: 'model',
          created: 1_700_000_000,
          owned_by: 'voxmux',
          voxmux: { task: 'transcription', languages: ['en'], translation: false, state: 'ready' },
        },
      ],
    });
    const one = await app.inject({ method: 'GET', url: '/v1/models/whisper-1' });
    assert.deepEqual(one.json(), {
      id: 'whisper-1',
      object: 'model',
      created: 1_700_000_000,
      owned_by: 'voxmux',
      voxmux: { task: 'transcription', languages: ['en'], translation: false, state: 'ready' },
    });
    const unknown = await app.inject({ method: 'GET', url: '/v1/models/nope' });
    assert.deepEqual([unknown.statusCode, errorCode(unknown)], [404, 'model_not_found']);
  });

  it('answers 413 body_too_large to a body over the limit and its form overhead', async () => {
    const { app, transcribeCalls } = await setup({ maxBodyBytes: 1024 });
    const res = await app.inject({
      method: 'POST',
      url: '/v1/audio/transcriptions',
      payload: Buffer.alloc(1024 + 256 * 1024 + 1),
      headers: { 'content-type': 'multipart/form-data; boundary=x' },
    });
    assert.deepEqual([res.statusCode, errorCode(res)], [413, 'body_too_large']);
    assert.equal(transcribeCalls(), 0);
  });

  it('counts calls by endpoint and outcome', async () => {
    const { app, metrics } = await setup({ apiKeys: KEYS });
    const auth = { authorization: `Bearer ${KEYS[0]!}` };
    await upload(app, auth);
    await upload(app, auth);
    await upload(app);
    await app.inject({ method: 'GET', url: '/v1/models', headers: auth });
    await app.inject({ method: 'GET', url: '/v1/models/nope', headers: auth });
    await settle();
    assert.equal(await callCount(metrics, '/v1/audio/transcriptions', 'ok'), 2);
    assert.equal(await callCount(metrics, '/v1/audio/transcriptions', 'unauthenticated'), 1);
    assert.equal(await callCount(metrics, '/v1/models', 'ok'), 1);
    assert.equal(await callCount(metrics, '/v1/models/:model', 'not_found'), 1);
  });
});

describe('buildGateway draining (#16)', () => {
  it('answers every call but liveness and metrics 503 shutting_down with Retry-After while draining, closing connections whose request is all in', async () => {
    let isDraining = false;
    const { app, transcribeCalls } = await setup({ isDraining: () => isDraining });
    assert.equal((await upload(app)).statusCode, 200);
    isDraining = true;
    // An upload is answered before its body is read: closing then would reset a client still
    // sending, so its connection stays open (Node drops the rest of the body; close() ends it).
    for (const [res, connection] of [
      [await upload(app), 'keep-alive'],
      [await app.inject({ method: 'GET', url: '/v1/models' }), 'close'],
      [await app.inject({ method: 'GET', url: '/health/ready' }), 'close'],
    ] as const) {
      assert.deepEqual(
        [res.statusCode, errorCode(res), res.headers['retry-after'], res.headers.connection],
        [503, 'shutting_down', '1', connection],
      );
    }
    assert.equal(transcribeCalls(), 1);
    assert.equal((await app.inject({ method: 'GET', url: '/health/live' })).statusCode, 200);
    assert.equal((await app.inject({ method: 'GET', url: '/metrics' })).statusCode, 200);
  });
});

describe('buildGateway languages (#16)', () => {
  const english: ModelCatalog = {
    list: () => [{ id: 'sphinx', created: 1, ownedBy: 'voxmux', languages: ['en'] }],
    resolve: (name) => (name === 'echo' || name === 'sphinx' ? 'sphinx' : undefined),
  };

  it('answers 400 unsupported_option on language, before decoding, for a language the model does not list', async () => {
    const { app, transcribeCalls } = await setup({ models: english });
    const res = await upload(app, {}, { language: 'de' });
    assert.deepEqual([res.statusCode, errorCode(res)], [400, 'unsupported_option']);
    assert.equal((res.json() as { error: { param: string } }).error.param, 'language');
    assert.equal(transcribeCalls(), 0);
  });

  it("says in verbose_json whether the language was requested or assumed from the model's only one", async () => {
    const { app, requests } = await setup({ models: english });
    const assumed = await upload(app, {}, { response_format: 'verbose_json' });
    assert.deepEqual((assumed.json() as { voxmux: unknown }).voxmux, { language_source: 'assumed' });
    const requested = await upload(app, {}, { response_format: 'verbose_json', language: 'en' });
    assert.deepEqual((requested.json() as { voxmux: unknown }).voxmux, { language_source: 'requested' });
    assert.deepEqual(
      requests.map((r) => r.language),
      [null, 'en'],
    );
  });

  it('passes any language on to a model that declares none, and marks its answer reported', async () => {
    const { app, requests } = await setup();
    const res = await upload(app, {}, { response_format: 'verbose_json', language: 'de' });
    assert.deepEqual((res.json() as { voxmux: unknown }).voxmux, { language_source: 'requested' });
    const none = await upload(app, {}, { response_format: 'verbose_json' });
    assert.deepEqual((none.json() as { voxmux: unknown }).voxmux, { language_source: 'reported' });
    assert.deepEqual(
      requests.map((r) => r.language),
      ['de', null],
    );
  });

  it('wakes and sleeps a model by POST /v1/models/{id}/wake and /sleep, aliases included, and shows its state (#20)', async () => {
    let state: ModelLifecycleState = 'stopped';
    let isRefused = false;
    const calls: string[] = [];
    const refusal = errors.gpuBudgetExhausted({ model: 'echo', guard: 'monthly GPU budget', retryAfterMs: 60_000 });
    const lifecycle = createModelLifecycleControl({
      state: () => state,
      wake: (model) => {
        calls.push(`wake ${model}`);
        if (isRefused) return Promise.resolve({ isReady: false, error: refusal });
        state = 'starting';
        return new Promise((resolve) =>
          setTimeout(() => {
            state = 'ready';
            resolve({ isReady: true });
          }, 0),
        );
      },
      sleep: (model) => {
        calls.push(`sleep ${model}`);
        state = 'stopped';
        return Promise.resolve();
      },
      whyUnavailable: () => (isRefused ? refusal : undefined),
    });
    const { app } = await setup({ lifecycle });
    const listed = await app.inject({ method: 'GET', url: '/v1/models/echo' });
    assert.equal((listed.json() as { voxmux: { state: string } }).voxmux.state, 'stopped');
    const woken = await app.inject({ method: 'POST', url: '/v1/models/whisper-1/wake' });
    assert.deepEqual([woken.statusCode, woken.json()], [202, { id: 'whisper-1', object: 'model.state', state: 'starting' }]);
    const waited = await app.inject({ method: 'POST', url: '/v1/models/echo/wake?wait=true' });
    assert.deepEqual([waited.statusCode, (waited.json() as { state: string }).state], [200, 'ready']);
    const slept = await app.inject({ method: 'POST', url: '/v1/models/echo/sleep' });
    assert.deepEqual([slept.statusCode, (slept.json() as { state: string }).state], [200, 'stopped']);
    assert.deepEqual(calls, ['wake echo', 'wake echo', 'sleep echo']);
    const badWait = await app.inject({ method: 'POST', url: '/v1/models/echo/wake?wait=yes' });
    assert.deepEqual([badWait.statusCode, errorCode(badWait)], [400, 'invalid_parameter']);
    const unknown = await app.inject({ method: 'POST', url: '/v1/models/nope/sleep' });
    assert.deepEqual([unknown.statusCode, errorCode(unknown)], [404, 'model_not_found']);
    isRefused = true;
    const refused = await app.inject({ method: 'POST', url: '/v1/models/echo/wake' });
    assert.deepEqual([refused.statusCode, errorCode(refused)], [503, 'gpu_budget_exhausted']);
    assert.equal(refused.headers['retry-after'], '60');
  });
});
