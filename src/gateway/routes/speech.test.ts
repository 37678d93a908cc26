import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, it } from 'node:test';
import { FakeClock, settle } from '../../../test/support/fake-clock.js';
import { FakeExecutor, type FakeStream } from '../../../test/support/fake-executor.js';
import { errors } from '../../core/error-catalog.js';
import { createScheduler, type CatalogEntry, type Scheduler } from '../../scheduler/index.js';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics, type Metrics } from '../../telemetry/metrics.js';
import { createFirKernel } from '../audio/fir-kernel.js';
import { floatToPcm16 } from '../audio/pcm16.js';
import { resampleArray } from '../audio/resampler.js';
import { buildGateway, createEnergyDetector, type ModelCatalog, type ModelEntry, type ModelLifecycleControl } from '../index.js';
import { WAV_STREAMING_SIZE } from '../speech/speech-encoder.js';
import { parseSpeechBody, resolveVoice, speechUsage } from './speech.js';

const URL_PATH = '/v1/audio/speech';

const ENTRIES: ModelEntry[] = [
  {
    id: 'tts',
    created: 1,
    ownedBy: 'voxmux',
    task: 'speech',
    speech: { voiceAliases: { alloy: 'tone-a', echo: 'tone-e' }, hasVoiceResources: false },
  },
  {
    id: 'tts-1',
    created: 1,
    ownedBy: 'voxmux',
    task: 'speech',
    speech: { voiceAliases: { alloy: 'tone-a', echo: 'tone-e' }, hasVoiceResources: false },
  },
  { id: 'gpu', created: 1, ownedBy: 'voxmux', task: 'speech', speech: { voiceAliases: { alloy: 'vits-0' }, hasVoiceResources: true } },
  // Aliases that follow the catalogue (vits' defaults), beside a fixed one; 'cold' declares its voices once woken.
  {
    id: 'few',
    created: 1,
    ownedBy: 'voxmux',
    task: 'speech',
    speech: {
      voiceAliases: { nova: 'few-1' },
      catalogVoiceAliases: ['alloy', 'ash', 'ballad', 'coral', 'echo', 'nova'],
      hasVoiceResources: true,
    },
  },
  {
    id: 'cold',
    created: 1,
    ownedBy: 'voxmux',
    task: 'speech',
    speech: { voiceAliases: {}, catalogVoiceAliases: ['alloy', 'ash'], hasVoiceResources: true },
  },
  { id: 'asr', created: 1, ownedBy: 'voxmux', task: 'transcription' },
];
const NAMES: Record<string, string> = { tts: 'tts', 'tts-1': 'tts', gpu: 'gpu', few: 'few', cold: 'cold', asr: 'asr' };
const catalog: ModelCatalog = { list: () => ENTRIES, resolve: (name) => NAMES[name] };

const VOICE = (name: string): CatalogEntry => ({
  name,
  kind: 'voice',
  language: 'en-US',
  sampleRate: 16000,
  gender: null,
  description: name,
});

interface Harness {
  app: FastifyInstance;
  executor: FakeExecutor;
  scheduler: Scheduler;
  metrics: Metrics;
  clock: FakeClock;
}

let current: FastifyInstance | undefined;
afterEach(async () => {
  await current?.close();
  current = undefined;
});

/** The voices each model's instances declared. */
function defaultCatalogs(): Record<string, CatalogEntry[]> {
  return {
    tts: [VOICE('tone-a'), VOICE('tone-e'), VOICE('native-1'), VOICE('native-2')],
    few: [VOICE('few-0'), VOICE('few-1'), VOICE('few-2')],
  };
}

async function setup(
  options: {
    maxQueuedRequests?: number;
    maxStreamsPerInstance?: number;
    catalogs?: Record<string, CatalogEntry[]>;
    lifecycle?: ModelLifecycleControl;
    speechBufferBytes?: number;
  } = {},
): Promise<Harness> {
  const clock = new FakeClock();
  const metrics = createMetrics();
  const log = createLogger({ level: 'silent' });
  const catalogs = options.catalogs ?? defaultCatalogs();
  const executor = new FakeExecutor({ tts: ['i0'], gpu: ['g0'], few: ['f0'], cold: ['c0'], asr: ['a0'] });
  const policy = {
    maxBatchSize: 1,
    preferredBatchSizes: [1],
    maxQueueDelayMs: 0,
    maxStreamsPerInstance: options.maxStreamsPerInstance ?? 4,
  };
  const scheduler = createScheduler(
    {
      maxQueuedRequests: options.maxQueuedRequests ?? 100,
      retryAfterMs: 2000,
      lengthBucketsMs: [30_000],
      maxRunningBatchesPerInstance: 1,
      models: { tts: policy, gpu: policy, few: policy, cold: policy, asr: policy },
    },
    { executor, clock, log, metrics },
  );
  const app = await buildGateway(
    {
      maxBodyBytes: 64 * 1024,
      requestTimeoutMs: 30_000,
      apiKeys: [],
      uploadPoolBytes: 0,
      uploadPoolIdleMs: 10_000,
      bodyTimeoutMs: 60_000,
      splitAboveMs: 0,
      pieceTargetMs: 1000,
      maxPieceMs: 2000,
      ...(options.speechBufferBytes === undefined ? {} : { speechBufferBytes: options.speechBufferBytes }),
    },
    {
      transcribe: () => assert.fail('These tests transcribe nothing'),
      openStream: (model, input, streamOptions) => scheduler.openStream(model, input, streamOptions),
      voices: {
        models: () => [],
        catalog: (model) => catalogs[model] ?? [],
        residency: () => [],
      },
      models: catalog,
      ...(options.lifecycle === undefined ? {} : { lifecycle: options.lifecycle }),
      readiness: () => ({ isReady: true, body: {} }),
      metricsText: () => metrics.registry.metrics(),
      metricsContentType: metrics.registry.contentType,
      decoder: { decode: () => assert.fail('These tests decode nothing') },
      voiceActivity: createEnergyDetector(),
      clock,
      log,
      metrics,
    },
  );
  current = app;
  return { app, executor, scheduler, metrics, clock };
}

function post(app: FastifyInstance, body: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: URL_PATH,
    headers: { 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** Starts a call, waits for its stream to open, and returns both. */
async function open(h: Harness, body: Record<string, unknown>): Promise<{ response: Promise<LightMyRequestResponse>; stream: FakeStream }> {
  const before = h.executor.streams.length;
  const response = post(h.app, { model: 'tts', input: 'Hello there. General Kenobi.', voice: 'alloy', ...body });
  for (let i = 0; i < 50 && h.executor.streams.length === before; i += 1) await settle();
  const stream = h.executor.streams[before];
  assert.ok(stream !== undefined, 'the call opened a stream');
  return { response, stream };
}

function pcmBytes(samples: Int16Array): Uint8Array {
  return new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
}

function tone(frames: number, rateHz: number, phase = 0): Int16Array {
  return floatToPcm16(Float32Array.from({ length: frames }, (_, i) => 0.3 * Math.sin(((phase + i) * 2 * Math.PI * 200) / rateHz)));
}

function asInt16(bytes: Buffer): Int16Array {
  return new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

function sseEvents(body: string): Record<string, unknown>[] {
  return body
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => JSON.parse(block.slice('data: '.length)) as Record<string, unknown>);
}

describe('POST /v1/audio/speech', () => {
  it('streams pcm at 24 kHz as the instance sends it, with the split sentences, the aliased voice and the speed', async () => {
    const h = await setup();
    const { response, stream } = await open(h, { response_format: 'pcm', speed: 1.5 });
    assert.deepEqual(stream.input.params, { sentences: ['Hello there.', 'General Kenobi.'], voice: 'tone-a', speed: 1.5 });
    assert.equal(stream.input.resource, null);
    const first = tone(2400, 24_000);
    const second = tone(1200, 24_000, 2400);
    stream.push(pcmBytes(first), { sampleRate: 24_000, sentence: 0 });
    stream.push(pcmBytes(second), { sampleRate: 24_000, sentence: 1 });
    stream.end({ characters: 27, sentences: 2, audioSeconds: 0.15 });
    const res = await response;
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'audio/pcm');
    assert.deepEqual(asInt16(res.rawPayload), Int16Array.from([...first, ...second]));
    const metrics = await h.metrics.registry.getSingleMetricAsString('voxmux_gateway_speech_calls_total');
    assert.match(metrics, /format="pcm",stream_format="audio",outcome="ok"} 1/);
    const seconds = await h.metrics.registry.getSingleMetricAsString('voxmux_gateway_speech_audio_seconds_total');
    assert.match(seconds, /model="tts"} 0.15/);
  });

  it('resamples the engine rate to 24 kHz and answers wav with a streaming header (sizes 0xFFFFFFFF)', async () => {
    const h = await setup();
    const { response, stream } = await open(h, { response_format: 'wav' });
    const source = tone(16_000, 16_000);
    stream.push(pcmBytes(source.subarray(0, 5000)), { sampleRate: 16_000, sentence: 0 });
    stream.push(pcmBytes(source.subarray(5000)), { sampleRate: 16_000, sentence: 1 });
    stream.end();
    const res = await response;
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'audio/wav');
    const body = res.rawPayload;
    assert.equal(body.toString('ascii', 0, 4), 'RIFF');
    assert.equal(body.readUInt32LE(4), WAV_STREAMING_SIZE);
    assert.equal(body.readUInt32LE(24), 24_000);
    assert.equal(body.readUInt32LE(40), WAV_STREAMING_SIZE);
    const floats = Float32Array.from(source, (s) => s / 32768);
    const expected = floatToPcm16(resampleArray(floats, { fromRateHz: 16_000, toRateHz: 24_000, kernel: createFirKernel() }));
    assert.deepEqual(asInt16(body.subarray(44)), expected);
  });

  it('stream_format sse sends the same audio as base64 deltas, then done with usage in characters and seconds', async () => {
    const h = await setup();
    const chunks = [tone(12_000, 24_000), tone(30_000, 24_000, 12_000)];
    const { response, stream } = await open(h, { response_format: 'pcm', stream_format: 'sse' });
    for (const [i, chunk] of chunks.entries()) stream.push(pcmBytes(chunk), { sampleRate: 24_000, sentence: i });
    stream.end();
    const res = await response;
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/event-stream/);
    const events = sseEvents(res.body);
    const deltas = events.filter((e) => e.type === 'speech.audio.delta');
    assert.equal(deltas.length, 2);
    const audio = Buffer.concat(deltas.map((e) => Buffer.from(String(e.audio), 'base64')));
    assert.deepEqual(asInt16(audio), Int16Array.from([...chunks[0]!, ...chunks[1]!]));
    assert.deepEqual(events.at(-1), {
      type: 'speech.audio.done',
      usage: { input_tokens: 28, output_tokens: 2, total_tokens: 30 },
    });
  });

  it('accepts an engine voice from the model catalogue and the {"id"} form, and names the voice as the resource of a voice-holding engine', async () => {
    const h = await setup();
    const native = await open(h, { voice: 'native-2', response_format: 'pcm' });
    assert.equal(native.stream.input.params.voice, 'native-2');
    native.stream.end();
    assert.equal((await native.response).statusCode, 200);
    const byId = await open(h, { voice: { id: 'echo' }, response_format: 'pcm' });
    assert.equal(byId.stream.input.params.voice, 'tone-e');
    byId.stream.end();
    await byId.response;
    const gpu = await open(h, { model: 'gpu', voice: 'alloy', response_format: 'pcm' });
    assert.equal(gpu.stream.input.resource, 'vits-0');
    gpu.stream.end();
    await gpu.response;
  });

  it('maps catalogue aliases onto the voices the model declared, in catalogue order and cycling, and lets a fixed alias win', async () => {
    const h = await setup();
    const expected = [
      ['alloy', 'few-0'],
      ['ash', 'few-1'],
      ['ballad', 'few-2'],
      ['coral', 'few-0'],
      ['echo', 'few-1'],
      ['nova', 'few-1'],
    ];
    for (const [voice, engineVoice] of expected) {
      const call = await open(h, { model: 'few', voice, response_format: 'pcm' });
      assert.deepEqual([call.stream.input.resource, call.stream.input.params.voice], [engineVoice, engineVoice], voice);
      call.stream.end();
      assert.equal((await call.response).statusCode, 200);
    }
    const unknown = await post(h.app, { model: 'few', input: 'Hi.', voice: 'cedar' });
    assert.equal(unknown.statusCode, 400);
    assert.equal(unknown.json().error.code, 'unknown_voice');
  });

  it('wakes a model that has declared no voices yet, and waits for it, before resolving a catalogue alias', async () => {
    const catalogs = defaultCatalogs();
    const woken: string[] = [];
    const lifecycle: ModelLifecycleControl = {
      state: () => 'ready',
      wake: async (model, { isWaiting }) => {
        woken.push(`${model} waiting=${isWaiting}`);
        await settle();
        catalogs[model] = [VOICE(`${model}-0`)];
        return 'ready';
      },
      sleep: async () => 'stopped',
    };
    const h = await setup({ catalogs, lifecycle });
    const engineVoice = await post(h.app, { model: 'cold', input: 'Hi.', voice: 'cold-0' });
    assert.equal(engineVoice.json().error.code, 'unknown_voice'); // only a catalogue alias waits
    assert.deepEqual(woken, []);
    const call = await open(h, { model: 'cold', voice: 'ash', response_format: 'pcm' });
    assert.deepEqual(woken, ['cold waiting=true']);
    assert.equal(call.stream.input.resource, 'cold-0');
    call.stream.end();
    assert.equal((await call.response).statusCode, 200);
  });

  it("counts the deadline from the call's arrival: time spent waiting for a waking model's voices is taken off the stream's", async () => {
    const catalogs = defaultCatalogs();
    const held: { clock?: FakeClock } = {};
    const lifecycle: ModelLifecycleControl = {
      state: () => 'ready',
      wake: async (model) => {
        await settle();
        held.clock!.advance(20_000); // the wake takes 20 s of the call's 30 s
        catalogs[model] = [VOICE(`${model}-0`)];
        return 'ready';
      },
      sleep: async () => 'stopped',
    };
    const h = await setup({ catalogs, lifecycle });
    held.clock = h.clock;
    const call = await open(h, { model: 'cold', voice: 'ash', response_format: 'pcm' });
    h.clock.advance(10_000); // 30 s after the call arrived
    await settle();
    assert.equal(call.stream.isCancelled, true, "the stream ends at the call's deadline");
    const response = await call.response;
    assert.equal(response.statusCode, 504);
    assert.equal(response.json().error.code, 'deadline_exceeded');
  });

  it('answers 503 no_ready_instance with Retry-After for a catalogue alias of a model that still declares no voices', async () => {
    const silent: ModelLifecycleControl = { state: () => 'ready', wake: async () => 'ready', sleep: async () => 'stopped' };
    for (const lifecycle of [silent, undefined]) {
      const h = await setup(lifecycle === undefined ? {} : { lifecycle });
      const res = await post(h.app, { model: 'cold', input: 'Hi.', voice: 'alloy' });
      assert.equal(res.statusCode, 503);
      assert.equal(res.json().error.code, 'no_ready_instance');
      assert.ok(Number(res.headers['retry-after']) >= 1);
      assert.equal(h.executor.streams.length, 0);
      await current?.close();
      current = undefined;
    }
  });

  it('answers an error before any audio with its status and envelope (instance errors included)', async () => {
    const h = await setup();
    const failed = await open(h, { response_format: 'pcm' });
    failed.stream.fail(errors.fromWire({ code: 'unsupported_option', message: 'Expected speech params', instanceId: 'i0' }));
    const res = await failed.response;
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().error.code, 'unsupported_option');
    const crashed = await open(h, { response_format: 'wav' });
    crashed.stream.fail(errors.fromWire({ code: 'model_failed', message: 'boom', instanceId: 'i0' }));
    const res2 = await crashed.response;
    assert.equal(res2.statusCode, 500);
    assert.equal(res2.json().error.code, 'model_failed');
  });

  it('ends an SSE call that fails after audio left with an error event carrying the envelope', async () => {
    const h = await setup();
    const { response, stream } = await open(h, { response_format: 'pcm', stream_format: 'sse' });
    stream.push(pcmBytes(tone(2400, 24_000)), { sampleRate: 24_000, sentence: 0 });
    await settle();
    stream.fail(errors.fromWire({ code: 'model_failed', message: 'The engine failed', instanceId: 'i0' }));
    const res = await response;
    assert.equal(res.statusCode, 200);
    const events = sseEvents(res.body);
    assert.equal(events[0]?.type, 'speech.audio.delta');
    assert.deepEqual(events.at(-1), {
      type: 'error',
      error: { message: 'The engine failed', type: 'server_error', param: null, code: 'model_failed' },
    });
    const metrics = await h.metrics.registry.getSingleMetricAsString('voxmux_gateway_speech_calls_total');
    assert.match(metrics, /format="pcm",stream_format="sse",outcome="model_failed"} 1/);
  });

  it('answers 429 queue_full with Retry-After once the model stream queue is full', async () => {
    const h = await setup({ maxQueuedRequests: 1, maxStreamsPerInstance: 1 });
    const running = await open(h, { response_format: 'pcm' });
    const queued = post(h.app, { model: 'tts', input: 'Queued.', voice: 'alloy', response_format: 'pcm' });
    await settle();
    const res = await post(h.app, { model: 'tts', input: 'Refused.', voice: 'alloy', response_format: 'pcm' });
    assert.equal(res.statusCode, 429);
    assert.equal(res.json().error.code, 'queue_full');
    assert.equal(res.headers['retry-after'], '2');
    running.stream.end();
    await running.response;
    await settle();
    h.executor.streams.at(-1)!.end();
    assert.equal((await queued).statusCode, 200);
  });

  it('answers 504 deadline_exceeded when the stream sends nothing before the call deadline', async () => {
    const h = await setup();
    const { response } = await open(h, { response_format: 'pcm' });
    h.clock.advance(30_000);
    const res = await response;
    assert.equal(res.statusCode, 504);
    assert.equal(res.json().error.code, 'deadline_exceeded');
    assert.equal(h.executor.streams[0]!.isCancelled, true);
  });

  const INVALID: [string, unknown, Record<string, string>, number, string, string | null][] = [
    ['empty input', { model: 'tts', input: '', voice: 'alloy' }, {}, 400, 'input_empty', 'input'],
    ['blank input', { model: 'tts', input: ' \n ', voice: 'alloy' }, {}, 400, 'input_empty', 'input'],
    ['input of control characters', { model: 'tts', input: '\u0000\u001c\u0085', voice: 'alloy' }, {}, 400, 'input_empty', 'input'],
    ['input over 4096 characters', { model: 'tts', input: 'a'.repeat(4097), voice: 'alloy' }, {}, 400, 'input_too_long', 'input'],
    ['an unknown voice', { model: 'tts', input: 'Hi.', voice: 'nobody' }, {}, 400, 'unknown_voice', 'voice'],
    ['an alias of another model', { model: 'tts', input: 'Hi.', voice: 'constructor' }, {}, 400, 'unknown_voice', 'voice'],
    [
      'a response_format of another API',
      { model: 'tts', input: 'Hi.', voice: 'alloy', response_format: 'ogg' },
      {},
      400,
      'unsupported_response_format',
      'response_format',
    ],
    [
      'a stream_format other than audio or sse',
      { model: 'tts', input: 'Hi.', voice: 'alloy', stream_format: 'ws' },
      {},
      400,
      'unsupported_stream_format',
      'stream_format',
    ],
    ['speed below 0.25', { model: 'tts', input: 'Hi.', voice: 'alloy', speed: 0.2 }, {}, 400, 'speed_out_of_range', 'speed'],
    ['speed above 4', { model: 'tts', input: 'Hi.', voice: 'alloy', speed: 4.5 }, {}, 400, 'speed_out_of_range', 'speed'],
    ['speed as text', { model: 'tts', input: 'Hi.', voice: 'alloy', speed: 'fast' }, {}, 400, 'speed_out_of_range', 'speed'],
    ['no voice', { model: 'tts', input: 'Hi.' }, {}, 400, 'missing_parameter', 'voice'],
    ['no model', { input: 'Hi.', voice: 'alloy' }, {}, 400, 'missing_parameter', 'model'],
    ['an unknown parameter', { model: 'tts', input: 'Hi.', voice: 'alloy', pitch: 2 }, {}, 400, 'invalid_parameter', 'pitch'],
    [
      'instructions over 4096 characters',
      { model: 'tts', input: 'Hi.', voice: 'alloy', instructions: 'x'.repeat(4097) },
      {},
      400,
      'invalid_parameter',
      'instructions',
    ],
    ['a body that is not JSON', '{"model": ', {}, 400, 'invalid_parameter', 'body'],
    ['a JSON array', '[1]', {}, 400, 'invalid_parameter', 'body'],
    ['a form body', 'model=tts', { 'content-type': 'application/x-www-form-urlencoded' }, 400, 'invalid_content_type', null],
    ['an unknown model', { model: 'tts-9', input: 'Hi.', voice: 'alloy' }, {}, 404, 'model_not_found', 'model'],
    ['a transcription model', { model: 'asr', input: 'Hi.', voice: 'alloy' }, {}, 400, 'model_task_mismatch', 'model'],
  ];
  for (const [name, body, headers, status, code, param] of INVALID) {
    it(`answers ${status} ${code} for ${name}`, async () => {
      const h = await setup();
      const res = await post(h.app, body, headers);
      assert.equal(res.statusCode, status);
      const error = res.json().error;
      assert.equal(error.code, code);
      assert.equal(error.param, param);
      assert.equal(error.type, 'invalid_request_error');
      assert.equal(h.executor.streams.length, 0);
    });
  }

  it('answers invalid_content_type for a body without a content type, and accepts the largest input as JSON escapes', async () => {
    const h = await setup();
    const bare = await h.app.inject({ method: 'POST', url: URL_PATH, payload: Buffer.from('{}') });
    assert.equal(bare.statusCode, 400);
    assert.equal(bare.json().error.code, 'invalid_content_type');
    const escaped = JSON.stringify({
      model: 'asr',
      input: '\u{1F600}'.repeat(4096),
      voice: 'alloy',
      instructions: '\u{1F600}'.repeat(4096),
    }).replace(/[\u{10000}-\u{10FFFF}]/gu, (c) => `\\u${c.charCodeAt(0).toString(16)}\\u${c.charCodeAt(1).toString(16)}`);
    const largest = await post(h.app, escaped);
    assert.equal(largest.json().error.code, 'model_task_mismatch');
  });

  it('answers a speech model on the transcription endpoint with model_task_mismatch', async () => {
    const h = await setup();
    const form =
      '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\ntts-1\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nxx\r\n--b--\r\n';
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/audio/transcriptions',
      headers: { 'content-type': 'multipart/form-data; boundary=b' },
      payload: form,
    });
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().error.code, 'model_task_mismatch');
  });
});

describe('encoded speech keeps the whole audio', () => {
  const decode = (body: Buffer) =>
    asInt16(execFileSync('ffmpeg', ['-v', 'error', '-i', 'pipe:0', '-f', 's16le', '-ac', '1', '-ar', '24000', 'pipe:1'], { input: body }));

  it('flac decodes to exactly the samples the instance sent, its first 40 ms included', async () => {
    const h = await setup();
    const { response, stream } = await open(h, { response_format: 'flac' });
    const first = tone(4800, 24_000);
    const second = tone(4800, 24_000, 4800);
    stream.push(pcmBytes(first), { sampleRate: 24_000, sentence: 0 });
    stream.push(pcmBytes(second), { sampleRate: 24_000, sentence: 1 });
    stream.end();
    const res = await response;
    assert.equal(res.statusCode, 200);
    assert.deepEqual(decode(res.rawPayload), Int16Array.from([...first, ...second]));
  });

  for (const format of ['mp3', 'opus', 'aac']) {
    it(`${format} keeps a sound in the first 20 ms`, async () => {
      const h = await setup();
      const { response, stream } = await open(h, { response_format: format });
      const samples = new Int16Array(24_000);
      samples.set(
        tone(300, 24_000).map((v) => v * 2),
        100,
      ); // 12.5 ms of tone from 4 ms on, then silence
      stream.push(pcmBytes(samples), { sampleRate: 24_000, sentence: 0 });
      stream.end();
      const res = await response;
      assert.equal(res.statusCode, 200);
      const decoded = decode(res.rawPayload);
      const peak = decoded.subarray(0, 2400).reduce((max, v) => Math.max(max, Math.abs(v)), 0);
      assert.ok(peak > 5000, `peak ${peak} in the first 100 ms`);
    });
  }
});

describe('speech with nothing to say', () => {
  const decode = (body: Buffer, format: string) =>
    asInt16(
      execFileSync(
        'ffmpeg',
        ['-v', 'error', ...(format === 'pcm' ? ['-f', 's16le', '-ar', '24000', '-ac', '1'] : []), '-i', 'pipe:0', '-f', 's16le', 'pipe:1'],
        { input: body },
      ),
    );

  for (const format of ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm']) {
    it(`answers ${format} that decodes to a short silence when the engine sends no audio ("...", an emoji alone)`, async () => {
      const h = await setup();
      const { response, stream } = await open(h, { input: '...', response_format: format });
      stream.push(new Uint8Array(0), { sampleRate: 16_000, sentence: 0 });
      stream.end();
      const res = await response;
      assert.equal(res.statusCode, 200);
      const samples = decode(res.rawPayload, format);
      assert.ok(samples.length >= 2400, `${format}: ${samples.length} samples decoded from ${res.rawPayload.length} bytes`);
      const peak = samples.reduce((max, v) => Math.max(max, Math.abs(v)), 0);
      assert.ok(peak <= 16, `${format}: silence, peak ${peak}`); // opus decodes silence to a few LSB of noise
    });
  }
});

describe('a client that reads slower than the audio is made', () => {
  it(
    'does not hold the stream: within speechBufferBytes the call ends, and the client reads every byte after the deadline',
    { timeout: 20_000 },
    async () => {
      const h = await setup({ speechBufferBytes: 64 * 1024 * 1024 });
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = h.app.server.address() as AddressInfo;
      const body = JSON.stringify({ model: 'tts', input: 'Hello there.', voice: 'alloy', response_format: 'pcm' });
      const response = new Promise<IncomingMessage>((resolve, reject) => {
        const req = httpRequest(
          { port, host: '127.0.0.1', method: 'POST', path: '/v1/audio/speech', headers: { 'content-type': 'application/json' } },
          resolve,
        );
        req.on('error', reject);
        req.end(body);
      });
      let stream: FakeStream | undefined;
      for (let i = 0; i < 200 && stream === undefined; i += 1) {
        await sleep(5);
        stream = h.executor.streams[0];
      }
      assert.ok(stream);
      const res = await new Promise<IncomingMessage>((resolve) => {
        // The first chunk opens the response; the client then stops reading (as a player does between plays).
        stream!.push(new Uint8Array(2_000_000).fill(7), { sampleRate: 24_000, sentence: 0 });
        void response.then((r) => (r.pause(), resolve(r)));
      });
      try {
        // 40 MB in all: more than the sockets' buffers hold, less than speechBufferBytes.
        let pushed = 1;
        for (let idle = 0; pushed < 20 && idle < 400;) {
          if (stream.credit > 0) {
            stream.push(new Uint8Array(2_000_000).fill(7), { sampleRate: 24_000, sentence: 0 });
            pushed += 1;
            idle = 0;
          } else {
            idle += 1;
            await sleep(5);
          }
        }
        assert.equal(pushed, 20, 'the reader did not hold the stream back');
        stream.end();
        const calls = async () => (await h.metrics.speechCalls.get()).values.find((v) => v.labels.outcome === 'ok')?.value ?? 0;
        for (let i = 0; i < 400 && (await calls()) === 0; i++) await sleep(10);
        assert.equal(await calls(), 1, 'the call ended, its stream with it, before the client read its audio');
        h.clock.advance(31_000); // past requestTimeoutMs: the audio is made, the deadline has nothing left to cut
        let received = 0;
        res.on('data', (chunk: Buffer) => (received += chunk.length));
        res.resume();
        await new Promise((resolve) => res.on('end', resolve));
        assert.equal(received, 40_000_000);
      } finally {
        res.destroy(); // a failure leaves no paused connection behind
      }
    },
  );
});

describe('a client that stops reading', () => {
  it('is ended at the call deadline: the stream cancelled and the connection closed', { timeout: 20_000 }, async () => {
    const h = await setup();
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = h.app.server.address() as AddressInfo;
    const body = JSON.stringify({ model: 'tts', input: 'Hello there.', voice: 'alloy', response_format: 'pcm' });
    const client = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => client.once('connect', () => resolve()));
    client.on('error', () => undefined);
    client.write(
      `POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
    client.pause(); // never reads
    let stream: FakeStream | undefined;
    for (let i = 0; i < 200 && stream === undefined; i += 1) {
      await sleep(5);
      stream = h.executor.streams[0];
    }
    assert.ok(stream);
    const chunk = new Uint8Array(2_000_000).fill(7); // 1 M samples a chunk, while the credit lasts
    let idle = 0;
    let pushed = 0;
    while (idle < 20 && pushed < 60) {
      if (stream.credit > 0) {
        stream.push(chunk, { sampleRate: 24_000, sentence: 0 });
        pushed += 1;
        idle = 0;
      } else idle += 1;
      await sleep(10);
    }
    assert.ok(pushed < 60, `the stalled reader holds the stream back (pushed ${pushed})`);
    h.clock.advance(31_000); // past requestTimeoutMs
    const connections = () => new Promise<number>((resolve) => h.app.server.getConnections((_err, n) => resolve(n)));
    for (let i = 0; i < 100 && (await connections()) > 0; i++) await sleep(10);
    assert.equal(stream.isCancelled, true);
    assert.equal(await connections(), 0, 'the server closed the connection at the deadline');
    client.destroy();
  });
});

describe('speech call helpers', () => {
  it('parseSpeechBody applies the defaults: mp3, speed 1, stream_format audio; instructions are accepted', () => {
    assert.deepEqual(parseSpeechBody({ model: 'm', input: 'Hi', voice: 'alloy', instructions: 'Speak calmly.' }), {
      model: 'm',
      input: 'Hi',
      voice: 'alloy',
      responseFormat: 'mp3',
      speed: 1,
      streamFormat: 'audio',
    });
  });

  it('parseSpeechBody counts input in characters, not UTF-16 units', () => {
    assert.equal(parseSpeechBody({ model: 'm', input: '\u{1F600}'.repeat(4096), voice: 'v' }).input.length, 8192);
  });

  it('resolveVoice prefers an alias, then the catalogue, and refuses anything else', () => {
    const settings = { voiceAliases: { alloy: 'flite-slt' }, hasVoiceResources: false };
    assert.equal(resolveVoice('alloy', { model: 'm', settings, catalog: [] }), 'flite-slt');
    assert.equal(resolveVoice('flite-rms', { model: 'm', settings, catalog: [VOICE('flite-rms')] }), 'flite-rms');
    assert.throws(() => resolveVoice('flite-rms', { model: 'm', settings, catalog: [] }), { code: 'unknown_voice' });
  });

  it('resolveVoice refuses an alias of a voice that the model declares it does not serve, as GET /v1/audio/voices leaves it out', () => {
    const settings = { voiceAliases: { alloy: 'flite-slt', coral: 'festival-slt-hts' }, hasVoiceResources: false };
    const catalog = [VOICE('flite-slt'), VOICE('flite-rms')];
    assert.equal(resolveVoice('alloy', { model: 'm', settings, catalog }), 'flite-slt');
    assert.throws(() => resolveVoice('coral', { model: 'm', settings, catalog }), { code: 'unknown_voice', param: 'voice' });
  });

  it('speechUsage counts input characters and output seconds rounded up', () => {
    assert.deepEqual(speechUsage('abc', 24_001), { input_tokens: 3, output_tokens: 2, total_tokens: 5 });
    assert.deepEqual(speechUsage('', 0), { input_tokens: 0, output_tokens: 0, total_tokens: 0 });
  });
});
