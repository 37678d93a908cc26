import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import { FakeClock } from '../../test/support/fake-clock.js';
import { RequestLogLineSchema, parseRequestLogLine, type RequestLogLine } from '../api/request-log.js';
import type { TranscriptResult } from '../scheduler/index.js';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { createCallRecord, noteDispatch, toRequestLogLine } from './call-record.js';
import { buildGateway, createEnergyDetector } from './index.js';

const RESULT: TranscriptResult = { text: 'secret words', language: 'en', durationS: 1, segments: null, words: null };

describe('toRequestLogLine', () => {
  it('takes queue time from the first dispatch, the instance from the latest, and service time to the result', () => {
    const record = createCallRecord('transcription');
    record.model = 'parakeet';
    record.audioInSeconds = 12.5;
    noteDispatch(record, { instanceId: 'parakeet-0', queuedMs: 30 }, 1_040);
    noteDispatch(record, { instanceId: 'parakeet-1', queuedMs: 5 }, 1_100);
    record.resultMs = 1_290;
    const line = toRequestLogLine(record, {
      arrivedWallMs: Date.UTC(2026, 11, 4, 9, 0, 0),
      durationMs: 300,
      endMs: 1_300,
      status: 200,
      code: undefined,
      gpuOf: (id) => (id === 'parakeet-1' ? 3 : undefined),
    });
    assert.deepEqual(line, {
      time: '2026-12-04T09:00:00.000Z',
      durationMs: 300,
      model: 'parakeet',
      kind: 'transcription',
      audioInSeconds: 12.5,
      audioOutSeconds: 0,
      queueMs: 30,
      serviceMs: 250,
      status: 200,
      code: null,
      instanceId: 'parakeet-1',
      gpu: 3,
      gpuSeconds: 0.25,
    });
    assert.ok(Value.Check(RequestLogLineSchema, line));
  });

  it('a call never dispatched has null queue and service time, no instance and 0 GPU seconds', () => {
    const record = createCallRecord('speech');
    record.model = 'tts-unknown';
    const line = toRequestLogLine(record, {
      arrivedWallMs: 0,
      durationMs: 2,
      endMs: 2,
      status: 404,
      code: 'model_not_found',
      gpuOf: () => 0,
    });
    assert.equal(line.queueMs, null);
    assert.equal(line.serviceMs, null);
    assert.equal(line.instanceId, null);
    assert.equal(line.gpu, null);
    assert.equal(line.gpuSeconds, 0);
    assert.equal(line.code, 'model_not_found');
  });

  it('a CPU instance gets gpu null and 0 GPU seconds, with its service time', () => {
    const record = createCallRecord('speech');
    noteDispatch(record, { instanceId: 'voice-0', queuedMs: 0 }, 10);
    const line = toRequestLogLine(record, {
      arrivedWallMs: 0,
      durationMs: 60,
      endMs: 60,
      status: 200,
      code: undefined,
      gpuOf: () => undefined,
    });
    assert.equal(line.serviceMs, 50);
    assert.equal(line.gpu, null);
    assert.equal(line.gpuSeconds, 0);
  });

  it('parseRequestLogLine reads back what is written and refuses a torn or foreign line', () => {
    const record = createCallRecord('speech');
    const line = toRequestLogLine(record, {
      arrivedWallMs: 0,
      durationMs: 1,
      endMs: 1,
      status: 200,
      code: undefined,
      gpuOf: () => undefined,
    });
    assert.deepEqual(parseRequestLogLine(JSON.stringify(line)), line);
    assert.equal(parseRequestLogLine(JSON.stringify(line).slice(0, 40)), undefined);
    assert.equal(parseRequestLogLine('{"msg":"call completed"}'), undefined);
  });
});

describe('gateway request log', () => {
  async function setup() {
    const clock = new FakeClock();
    const written: RequestLogLine[] = [];
    const app = await buildGateway(
      {
        maxBodyBytes: 64 * 1024,
        requestTimeoutMs: 30_000,
        apiKeys: [],
        uploadPoolBytes: 0,
        uploadPoolIdleMs: 10_000,
        bodyTimeoutMs: 60_000,
        splitAboveMs: 0,
        pieceTargetMs: 15_000,
        maxPieceMs: 60_000,
      },
      {
        openStream: () => assert.fail('These tests open no speech stream'),
        voices: { models: () => [], catalog: () => [], residency: () => [] },
        transcribe: async (_model, _request, options) => {
          clock.advance(7);
          options.onDispatched?.({ instanceId: 'echo-0', queuedMs: 7 });
          clock.advance(120);
          return RESULT;
        },
        models: {
          list: () => [{ id: 'echo', created: 0, ownedBy: 'voxmux', task: 'transcription' }],
          resolve: (name) => (name === 'echo' || name === 'whisper-1' ? 'echo' : undefined),
        },
        readiness: () => ({ isReady: true, body: {} }),
        metricsText: async () => '',
        metricsContentType: 'text/plain',
        voiceActivity: createEnergyDetector(),
        decoder: {
          decode: async (bytes) => ({
            samples: new Int16Array(bytes.length * 100),
            sampleRateHz: 16000,
            durationMs: bytes.length * 6.25,
            format: 'wav',
            sourceSampleRateHz: 16000,
            sourceChannels: 1,
            isTruncated: false,
          }),
        },
        clock,
        log: createLogger({ level: 'silent' }),
        metrics: createMetrics(),
        requestLog: { write: (line) => written.push(line) },
        instanceGpu: (id) => (id === 'echo-0' ? 1 : undefined),
      },
    );
    return { app, written };
  }

  async function upload(app: Awaited<ReturnType<typeof setup>>['app'], model: string) {
    const form = new FormData();
    form.append('model', model);
    form.append('prompt', 'private prompt');
    form.append('file', new Blob([new Uint8Array(320)]), 'a.wav');
    const encoded = new Response(form);
    return app.inject({
      method: 'POST',
      url: '/v1/audio/transcriptions',
      payload: Buffer.from(await encoded.arrayBuffer()),
      headers: { 'content-type': encoded.headers.get('content-type')! },
    });
  }

  it('writes one line per transcription call with the canonical model, audio, queue and service time, GPU and no content', async () => {
    const { app, written } = await setup();
    const res = await upload(app, 'whisper-1');
    assert.equal(res.statusCode, 200);
    assert.equal(written.length, 1);
    const line = written[0]!;
    assert.deepEqual(
      { ...line, durationMs: undefined },
      {
        time: new Date(1_700_000_000_000).toISOString(),
        durationMs: undefined,
        model: 'echo',
        kind: 'transcription',
        audioInSeconds: (320 * 100) / 16_000,
        audioOutSeconds: 0,
        queueMs: 7,
        serviceMs: 120,
        status: 200,
        code: null,
        instanceId: 'echo-0',
        gpu: 1,
        gpuSeconds: 0.12,
      },
    );
    assert.equal(line.durationMs, 127);
    assert.doesNotMatch(JSON.stringify(line), /secret|private/);
    await app.close();
  });

  it('writes a failed call with its status and catalogued code, and nothing for health or metrics', async () => {
    const { app, written } = await setup();
    const res = await upload(app, 'nope');
    assert.equal(res.statusCode, 404);
    await app.inject({ method: 'GET', url: '/health/ready' });
    await app.inject({ method: 'GET', url: '/metrics' });
    await app.inject({ method: 'GET', url: '/v1/models' });
    assert.equal(written.length, 1);
    assert.equal(written[0]!.status, 404);
    assert.equal(written[0]!.code, 'model_not_found');
    assert.equal(written[0]!.model, 'nope');
    assert.equal(written[0]!.queueMs, null);
    await app.close();
  });
});
