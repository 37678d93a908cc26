/**
 * The transcription route at its edges (the gateway with fake model calls): malformed multipart
 * bodies, a client that leaves mid-upload, streamed pieces that fail while others still read the
 * upload, and diarized_json whose two sides stop each other when one fails.
 */
import assert from 'node:assert/strict';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { ServerResponse } from 'node:http';
import { afterEach, describe, it } from 'node:test';
import { FakeClock, settle } from '../../../test/support/fake-clock.js';
import { errors } from '../../core/error-catalog.js';
import type { SubmitOptions, TranscriptionRequest, TranscriptResult } from '../../scheduler/index.js';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics, type Metrics } from '../../telemetry/metrics.js';
import { buildGateway, createEnergyDetector, type AudioDecoder, type ModelCatalog } from '../index.js';

const URL_PATH = '/v1/audio/transcriptions';

const RESULT: TranscriptResult = {
  text: 'Hello there. General Kenobi.',
  language: 'en',
  durationS: 2.5,
  segments: [
    { start: 0, end: 1.2, text: 'Hello there.' },
    { start: 1.2, end: 2.5, text: 'General Kenobi.' },
  ],
  words: [
    { word: 'Hello', start: 0, end: 0.5 },
    { word: 'there.', start: 0.5, end: 1.2 },
  ],
};

const catalog: ModelCatalog = {
  list: () => [
    { id: 'echo', created: 1, ownedBy: 'voxmux' },
    { id: 'whisper-1', created: 1, ownedBy: 'voxmux' },
  ],
  resolve: (name) => (name === 'echo' || name === 'whisper-1' ? 'echo' : undefined),
};

const diarCatalog: ModelCatalog = {
  list: () => [
    { id: 'echo', created: 1, ownedBy: 'voxmux', diarizationModel: 'diar' },
    {
      id: 'diar',
      created: 1,
      ownedBy: 'voxmux',
      task: 'diarization',
      diarization: { wantsSpeechRegions: false, sessionIdleTimeoutMs: 60_000 },
    },
  ],
  resolve: (name) => (name === 'echo' || name === 'diar' ? name : undefined),
};

interface Call {
  model: string;
  request: TranscriptionRequest;
  options: SubmitOptions;
}

interface Harness {
  app: FastifyInstance;
  metrics: Metrics;
  calls: Call[];
  decoded: Uint8Array[];
}

let current: FastifyInstance | undefined;
afterEach(async () => {
  await current?.close();
  current = undefined;
});

async function setup(
  options: {
    transcribe?: (call: Call) => Promise<TranscriptResult>;
    decode?: AudioDecoder['decode'];
    onRequest?: (raw: ServerResponse) => void;
    uploadPoolBytes?: number;
    bodyTimeoutMs?: number;
    splitAboveMs?: number;
    sequences?: NonNullable<import('../gateway-types.js').GatewayDeps['sequences']>;
  } = {},
): Promise<Harness> {
  const clock = new FakeClock();
  const metrics = createMetrics();
  const calls: Call[] = [];
  const decoded: Uint8Array[] = [];
  const decoder: AudioDecoder = {
    decode:
      options.decode ??
      (async (bytes) => {
        decoded.push(bytes);
        clock.advance(40);
        const samples = new Int16Array(bytes.length);
        return {
          samples,
          sampleRateHz: 16000,
          durationMs: (samples.length / 16000) * 1000,
          format: 'wav',
          sourceSampleRateHz: 16000,
          sourceChannels: 1,
          isTruncated: false,
        };
      }),
  };
  const app = await buildGateway(
    {
      maxBodyBytes: 256 * 1024,
      requestTimeoutMs: 30_000,
      apiKeys: [],
      uploadPoolBytes: options.uploadPoolBytes ?? 1024 * 1024,
      uploadPoolIdleMs: 10_000,
      bodyTimeoutMs: options.bodyTimeoutMs ?? 60_000,
      splitAboveMs: options.splitAboveMs ?? 0,
      pieceTargetMs: 1000,
      maxPieceMs: 2000,
    },
    {
      openStream: () => assert.fail('These tests open no speech stream'),
      voices: { models: () => [], catalog: () => [], residency: () => [] },
      transcribe: async (model, request, submitOptions) => {
        const call = { model, request, options: submitOptions };
        calls.push(call);
        clock.advance(210);
        return options.transcribe === undefined ? RESULT : options.transcribe(call);
      },
      models: options.sequences === undefined ? catalog : diarCatalog,
      ...(options.sequences === undefined ? {} : { sequences: options.sequences }),
      readiness: () => ({ isReady: true, body: {} }),
      metricsText: () => metrics.registry.metrics(),
      metricsContentType: metrics.registry.contentType,
      decoder,
      voiceActivity: createEnergyDetector(),
      clock,
      log: createLogger({ level: (process.env.LOGLEVEL ?? 'silent') as 'silent' }),
      metrics,
    },
  );
  const onRequest = options.onRequest;
  if (onRequest !== undefined) app.addHook('onRequest', async (_request, reply) => onRequest(reply.raw));
  current = app;
  return { app, metrics, calls, decoded };
}

type Field = [name: string, value: string | Blob];

const audioFile = (bytes = 3200, fill = 7): Field => ['file', new Blob([new Uint8Array(bytes).fill(fill)])];

/** Serializes a multipart form the way a browser or the openai SDK would. */
/** Over a real socket: inject()'s responses never report writableFinished, so every call there looks cancelled. */
async function postReal(app: FastifyInstance, fields: Field[]): Promise<{ status: number; body: string }> {
  if (!app.server.listening) await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address() as { port: number };
  const form = new FormData();
  for (const [name, value] of fields) {
    if (typeof value === 'string') form.append(name, value);
    else form.append(name, value, 'audio.wav');
  }
  const res = await fetch(`http://127.0.0.1:${address.port}${URL_PATH}`, { method: 'POST', body: form });
  return { status: res.status, body: await res.text() };
}

function errorOf(res: LightMyRequestResponse): { message: string; type: string; param: string | null; code: string } {
  assert.match(String(res.headers['content-type']), /^application\/json/);
  return (res.json() as { error: { message: string; type: string; param: string | null; code: string } }).error;
}

async function callCount(metrics: Metrics, outcome: string): Promise<number> {
  const { values } = await metrics.gatewayCalls.get();
  return values.find((v) => v.labels.endpoint === URL_PATH && v.labels.outcome === outcome)?.value ?? 0;
}

void callCount;
void settle;
void errorOf;

const segOut = (segs: { start: number; end: number; speaker: number }[]) => ({
  seq: 0,
  output: { finalized: segs, provisional: [], speakers: 2 },
});

describe('transcription route edges', () => {
  const raw = (app: FastifyInstance, body: string) =>
    app.inject({ method: 'POST', url: URL_PATH, payload: body, headers: { 'content-type': 'multipart/form-data; boundary=XX' } });
  it('a form part without a name is 400 invalid_parameter, not 500', async () => {
    const { app } = await setup();
    const res = await raw(app, '--XX\r\nContent-Disposition: form-data\r\n\r\necho\r\n--XX--\r\n');
    assert.equal(res.statusCode, 400, res.body);
  });
  it('a body that ends inside the file part (no closing boundary) is 400, not 500', async () => {
    const { app, calls } = await setup();
    const res = await raw(
      app,
      '--XX\r\nContent-Disposition: form-data; name="model"\r\n\r\necho\r\n--XX\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nabcd',
    );
    assert.equal(calls.length, 0);
    assert.equal(res.statusCode, 400, res.body);
  });

  it('stream in pieces: a failed call does not give its upload back while another piece still reads it', async () => {
    const viewDecode: AudioDecoder['decode'] = async (bytes) => {
      const samples = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.length / 2);
      return {
        samples,
        sampleRateHz: 16000,
        durationMs: samples.length / 16,
        format: 'wav',
        sourceSampleRateHz: 16000,
        sourceChannels: 1,
        isTruncated: false,
      };
    };
    const damaged: string[] = [];
    const { app, calls } = await setup({
      splitAboveMs: 1000,
      decode: viewDecode,
      transcribe: async ({ request, options }) => {
        const first = request.audio[0]!;
        const id = options.requestId!;
        if (first === 257 && id.endsWith('.1')) {
          await new Promise((r) => setTimeout(r, 10));
          throw errors.fromWire({ code: 'model_failed', message: 'Boom', instanceId: 'i0' });
        }
        if (first === 257 && id.endsWith('.2')) {
          // Dispatched: its batch still holds (and sends) the view after the call was aborted.
          await new Promise((r) => setTimeout(r, 150));
          if (!request.audio.every((x) => x === first)) damaged.push(id);
        }
        return { text: 'x', language: 'en', durationS: 1, segments: null, words: null };
      },
    });
    const a = postReal(app, [
      ['model', 'echo'],
      ['stream', 'true'],
      ['file', new Blob([new Uint8Array(120_000).fill(1)])],
    ]);
    assert.match((await a).body, /"type":"error"/);
    await postReal(app, [
      ['model', 'echo'],
      ['file', new Blob([new Uint8Array(120_000).fill(2)])],
    ]);
    await new Promise((r) => setTimeout(r, 200));
    assert.ok(calls.length >= 6);
    assert.deepEqual(damaged, []);
  });

  it('a client that drops mid-upload counts as cancelled, not internal_error', async () => {
    const { app } = await setup();
    let seen: import('fastify').FastifyRequest | undefined;
    app.addHook('onRequest', async (request) => void (seen = request));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    const net = await import('node:net');
    const head =
      '--XX\r\nContent-Disposition: form-data; name="model"\r\n\r\necho\r\n--XX\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n' +
      'a'.repeat(1000);
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(
      `POST ${URL_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: 20000\r\n\r\n${head}`,
    );
    await new Promise((r) => setTimeout(r, 50));
    socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(seen?.voxmuxOutcome, 'cancelled');
  });

  it('diarized_json: a failed transcription aborts the diarization still running', async () => {
    let diarSignal: AbortSignal | undefined;
    let isDiarizationDone = false;
    const { app } = await setup({
      transcribe: async () => {
        throw errors.fromWire({ code: 'model_failed', message: 'Boom', instanceId: 'i0' });
      },
      sequences: {
        submit: async (_model, _item, options) => {
          diarSignal = options.signal;
          await new Promise((r) => setTimeout(r, 100));
          isDiarizationDone = true;
          return segOut([{ start: 0, end: 1, speaker: 0 }]) as never;
        },
        end: async () => {},
      },
    });
    const res = await postReal(app, [['model', 'echo'], ['response_format', 'diarized_json'], audioFile()]);
    assert.equal(res.status, 500);
    assert.match(res.body, /model_failed/);
    assert.equal(isDiarizationDone, false, 'answered before the diarization ended');
    assert.equal(diarSignal?.aborted, true, 'the diarization request should be cancelled once the call failed');
  });

  it('diarized_json in pieces: a failed diarization aborts the pieces still running', async () => {
    const pieceSignals: AbortSignal[] = [];
    const { app } = await setup({
      splitAboveMs: 1000,
      transcribe: async ({ options }) => {
        pieceSignals.push(options.signal!);
        await new Promise((r) => setTimeout(r, 100));
        return RESULT;
      },
      sequences: {
        submit: async () => {
          throw errors.fromWire({ code: 'model_failed', message: 'Boom', instanceId: 'i0' });
        },
        end: async () => {},
      },
    });
    const res = await postReal(app, [
      ['model', 'echo'],
      ['response_format', 'diarized_json'],
      ['file', new Blob([new Uint8Array(40_000)])],
    ]);
    assert.equal(res.status, 500);
    assert.equal(pieceSignals.length, 2);
    assert.deepEqual(
      pieceSignals.map((s) => s.aborted),
      [true, true],
      'pieces keep running after the call failed',
    );
  });
  it('a huge declared Content-Length is 413 body_too_large', async () => {
    const { app } = await setup();
    const form = new FormData();
    form.append('model', 'echo');
    form.append('file', new Blob([new Uint8Array(3200)]), 'a.wav');
    const encoded = new Response(form);
    const payload = Buffer.from(await encoded.arrayBuffer());
    const res = await app.inject({
      method: 'POST',
      url: URL_PATH,
      payload,
      headers: { 'content-type': encoded.headers.get('content-type')!, 'content-length': String(2 ** 45) },
    });
    console.log(res.statusCode, res.body);
    assert.equal(res.statusCode, 413);
  });
});
