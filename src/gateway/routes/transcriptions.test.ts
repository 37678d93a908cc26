import assert from 'node:assert/strict';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { ServerResponse } from 'node:http';
import { afterEach, describe, it } from 'node:test';
import { FakeClock, settle } from '../../../test/support/fake-clock.js';
import { errors } from '../../core/error-catalog.js';
import type { SubmitOptions, TranscriptionRequest, TranscriptResult } from '../../scheduler/index.js';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics, type Metrics } from '../../telemetry/metrics.js';
import { buildGateway, createEnergyDetector, type AudioDecoder, type GatewayDeps, type ModelCatalog } from '../index.js';

const URL_PATH = '/v1/audio/transcriptions';

const RESULT: TranscriptResult = {
  text: 'Hello there. General Kenobi.',
  language: 'en',
  durationS: 2.5,
  segments: [
    { start: 0, end: 1.2, text: 'Hello there.', decoding: null },
    { start: 1.2, end: 2.5, text: 'General Kenobi.', decoding: null },
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
    maxBodyBytes?: number;
    /** Serves diarized_json: a diarization model `diar` for `echo`, whose items go here. */
    sequences?: NonNullable<GatewayDeps['sequences']>;
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
      maxBodyBytes: options.maxBodyBytes ?? 64 * 1024,
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
      log: createLogger({ level: 'silent' }),
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
async function post(app: FastifyInstance, fields: Field[], headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  const form = new FormData();
  for (const [name, value] of fields) {
    if (typeof value === 'string') form.append(name, value);
    else form.append(name, value, 'audio.wav');
  }
  const encoded = new Response(form);
  const payload = Buffer.from(await encoded.arrayBuffer());
  return app.inject({
    method: 'POST',
    url: URL_PATH,
    payload,
    headers: { ...headers, 'content-type': encoded.headers.get('content-type')! },
  });
}

function errorOf(res: LightMyRequestResponse): { message: string; type: string; param: string | null; code: string } {
  assert.match(String(res.headers['content-type']), /^application\/json/);
  return (res.json() as { error: { message: string; type: string; param: string | null; code: string } }).error;
}

async function callCount(metrics: Metrics, outcome: string): Promise<number> {
  const { values } = await metrics.gatewayCalls.get();
  return values.find((v) => v.labels.endpoint === URL_PATH && v.labels.outcome === outcome)?.value ?? 0;
}

describe('POST /v1/audio/transcriptions', () => {
  it('passes the canonical model, the decoded samples and the options to transcribe', async () => {
    const { app, calls, decoded } = await setup();
    const res = await post(app, [['model', 'whisper-1'], ['language', 'en'], ['prompt', 'Star Wars'], audioFile(3200)], {
      'x-request-id': 'call-42',
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(decoded.length, 1);
    assert.equal(decoded[0]!.length, 3200);
    assert.equal(calls.length, 1);
    const call = calls[0]!;
    assert.equal(call.model, 'echo');
    assert.equal(call.request.audio.length, 3200);
    assert.equal(call.request.language, 'en');
    assert.equal(call.request.prompt, 'Star Wars');
    assert.equal(call.request.wordTimestamps, false);
    assert.equal(call.options.timeoutMs, 30_000 - 40); // the deadline counts from arrival: decoding took 40 ms
    assert.equal(call.options.requestId, 'call-42');
    assert.ok(call.options.signal instanceof AbortSignal);
  });

  it('passes the voxmux-priority header to the scheduler, normal by default, and rejects other values', async () => {
    const { app, calls } = await setup();
    assert.equal((await post(app, [['model', 'echo'], audioFile(320)])).statusCode, 200);
    assert.equal((await post(app, [['model', 'echo'], audioFile(320)], { 'voxmux-priority': 'high' })).statusCode, 200);
    assert.deepEqual(
      calls.map((c) => c.options.priority),
      ['normal', 'high'],
    );
    const bad = await post(app, [['model', 'echo'], audioFile(320)], { 'voxmux-priority': 'urgent' });
    assert.equal(bad.statusCode, 400);
    assert.equal(errorOf(bad).param, 'voxmux-priority');
  });

  it('takes the deadline from the voxmux-deadline-ms header up to maxRequestTimeoutMs, and answers 400 for other values (#16)', async () => {
    const { app, calls } = await setup();
    assert.equal((await post(app, [['model', 'echo'], audioFile(320)], { 'voxmux-deadline-ms': '2000' })).statusCode, 200);
    assert.equal(calls[0]!.options.timeoutMs, 2000 - 40); // counted from arrival, like the default
    assert.equal((await post(app, [['model', 'echo'], audioFile(320)], { 'voxmux-deadline-ms': '600000' })).statusCode, 200);
    for (const value of ['0', '-5', '1.5', 'soon', '600001', '99999999999', '']) {
      const bad = await post(app, [['model', 'echo'], audioFile(320)], { 'voxmux-deadline-ms': value });
      assert.equal(bad.statusCode, 400, value);
      assert.equal(errorOf(bad).code, 'invalid_parameter', value);
      assert.equal(errorOf(bad).param, 'voxmux-deadline-ms', value);
    }
    assert.equal(calls.length, 2);
  });

  it('answers 429 deadline_unreachable with Retry-After rounded up from the predicted drain time (#16)', async () => {
    const { app } = await setup({
      transcribe: () => {
        throw errors.deadlineUnreachable({ model: 'echo', timeoutMs: 2000, predictedMs: 2400, drainMs: 1300 });
      },
    });
    const res = await post(app, [['model', 'echo'], audioFile(320)]);
    assert.equal(res.statusCode, 429);
    assert.equal(res.headers['retry-after'], '2');
    assert.deepEqual([errorOf(res).code, errorOf(res).type], ['deadline_unreachable', 'rate_limit_error']);
  });

  it('sends null language and prompt when the form leaves them out, and ignores fields OpenAI defines that voxmux does not use', async () => {
    const { app, calls } = await setup();
    const res = await post(app, [['model', 'echo'], ['chunking_strategy', 'auto'], ['include[]', 'logprobs'], audioFile()]);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(calls[0]!.request.language, null);
    assert.equal(calls[0]!.request.prompt, null);
  });

  it('ignores chunking_strategy as the openai SDK sends a VAD config object (bracketed keys), not only the string auto', async () => {
    const { app, calls } = await setup();
    const res = await post(app, [
      ['model', 'echo'],
      ['chunking_strategy[type]', 'server_vad'],
      ['chunking_strategy[prefix_padding_ms]', '300'],
      ['chunking_strategy[silence_duration_ms]', '200'],
      ['chunking_strategy[threshold]', '0.5'],
      ['known_speaker_names[]', 'agent'],
      ['known_speaker_references[]', 'data:audio/wav;base64,AAA='],
      audioFile(),
    ]);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(calls.length, 1);
  });

  it('refuses known speakers with diarized_json (400 unsupported_option naming the field), before any work', async () => {
    let diarized = 0;
    const { app, calls } = await setup({
      sequences: {
        submit: async () => {
          diarized++;
          return segOut([{ start: 0, end: 1, speaker: 0 }]) as never;
        },
        end: async () => {},
      },
    });
    for (const field of ['known_speaker_names[]', 'known_speaker_references[]', 'extra_body[known_speaker_names][]']) {
      const value = field.includes('references') ? 'data:audio/wav;base64,AAA=' : 'agent';
      const res = await post(app, [['model', 'echo'], ['response_format', 'diarized_json'], [field, value], audioFile()]);
      assert.equal(res.statusCode, 400, res.body);
      const error = errorOf(res);
      assert.equal(error.code, 'unsupported_option');
      assert.equal(error.param, field.includes('references') ? 'known_speaker_references' : 'known_speaker_names');
      assert.match(error.message, /^Known speakers are not supported/);
    }
    assert.deepEqual([calls.length, diarized], [0, 0]);
  });

  it('answers json by default as application/json', async () => {
    const { app } = await setup();
    const res = await post(app, [['model', 'echo'], audioFile()]);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    assert.deepEqual(res.json(), { text: 'Hello there. General Kenobi.', usage: { type: 'duration', seconds: 3 } });
  });

  it('answers each response_format with its content type', async () => {
    const { app } = await setup();
    const expected: Record<string, string> = {
      json: 'application/json; charset=utf-8',
      verbose_json: 'application/json; charset=utf-8',
      text: 'text/plain; charset=utf-8',
      srt: 'text/plain; charset=utf-8',
      vtt: 'text/plain; charset=utf-8',
    };
    for (const [format, contentType] of Object.entries(expected)) {
      const res = await post(app, [['model', 'echo'], ['response_format', format], audioFile()]);
      assert.equal(res.statusCode, 200, `${format}: ${res.body}`);
      assert.equal(res.headers['content-type'], contentType, format);
    }
    const text = await post(app, [['model', 'echo'], ['response_format', 'text'], audioFile()]);
    assert.equal(text.body, 'Hello there. General Kenobi.\n');
    const srt = await post(app, [['model', 'echo'], ['response_format', 'srt'], audioFile()]);
    assert.equal(srt.body, '1\n00:00:00,000 --> 00:00:01,200\nHello there.\n\n2\n00:00:01,200 --> 00:00:02,500\nGeneral Kenobi.\n');
    const vtt = await post(app, [['model', 'echo'], ['response_format', 'vtt'], audioFile()]);
    assert.ok(vtt.body.startsWith('WEBVTT\n\n00:00:00.000 --> 00:00:01.200\n'), vtt.body);
  });

  it('asks for word timestamps and returns words and segments when timestamp_granularities[] is repeated', async () => {
    const { app, calls } = await setup();
    const res = await post(app, [
      ['model', 'echo'],
      ['response_format', 'verbose_json'],
      ['timestamp_granularities[]', 'word'],
      ['timestamp_granularities[]', 'segment'],
      audioFile(),
    ]);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(calls[0]!.request.wordTimestamps, true);
    const body = res.json() as { words?: unknown[]; segments: unknown[] };
    assert.equal(body.words?.length, 2);
    assert.equal(body.segments.length, 2);
  });

  it('returns words without segments for word granularity alone, and segments without words by default', async () => {
    const { app, calls } = await setup();
    const wordsOnly = await post(app, [
      ['model', 'echo'],
      ['response_format', 'verbose_json'],
      ['timestamp_granularities[]', 'word'],
      audioFile(),
    ]);
    const wordsBody = wordsOnly.json() as { words?: unknown[]; segments: unknown[] };
    assert.equal(wordsBody.words?.length, 2);
    assert.deepEqual(wordsBody.segments, []);
    const byDefault = await post(app, [['model', 'echo'], ['response_format', 'verbose_json'], audioFile()]);
    const defaultBody = byDefault.json() as { words?: unknown[]; segments: unknown[] };
    assert.equal(defaultBody.words, undefined);
    assert.equal(defaultBody.segments.length, 2);
    assert.deepEqual(
      calls.map((c) => c.request.wordTimestamps),
      [true, false],
    );
  });

  it('asks for no word timestamps when timestamp_granularities[] names word with a format that has no words', async () => {
    const { app, calls } = await setup();
    for (const format of ['json', 'text', 'srt', 'vtt']) {
      const res = await post(app, [['model', 'echo'], ['response_format', format], ['timestamp_granularities[]', 'word'], audioFile()]);
      assert.equal(res.statusCode, 200, `${format}: ${res.body}`);
    }
    assert.deepEqual(
      calls.map((c) => c.request.wordTimestamps),
      [false, false, false, false],
    );
  });

  it('accepts timestamp_granularities without brackets and comma-separated', async () => {
    const { app, calls } = await setup();
    const res = await post(app, [
      ['model', 'echo'],
      ['response_format', 'verbose_json'],
      ['timestamp_granularities', 'segment, word'],
      audioFile(),
    ]);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(calls[0]!.request.wordTimestamps, true);
  });

  it('accepts temperature as a numeric string and rejects one that is not a number from 0 to 1', async () => {
    const { app, calls } = await setup();
    assert.equal((await post(app, [['model', 'echo'], ['temperature', '0.3'], audioFile()])).statusCode, 200);
    assert.equal((await post(app, [['model', 'echo'], ['temperature', '1'], audioFile()])).statusCode, 200);
    for (const temperature of ['hot', '1.5', '-0.1', '']) {
      const res = await post(app, [['model', 'echo'], ['temperature', temperature], audioFile()]);
      assert.equal(res.statusCode, 400, temperature);
      assert.deepEqual([errorOf(res).code, errorOf(res).param], ['invalid_parameter', 'temperature'], temperature);
    }
    assert.equal(calls.length, 2);
  });

  it('streams server-sent events, deltas then done, when stream is true', async () => {
    const { app } = await setup();
    const res = await post(app, [['model', 'echo'], ['stream', 'true'], audioFile()]);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'text/event-stream; charset=utf-8');
    assert.equal(res.headers['cache-control'], 'no-cache');
    assert.ok(res.body.endsWith('\n\n'));
    const blocks = res.body.slice(0, -2).split('\n\n');
    for (const block of blocks) assert.match(block, /^data: \{.*\}$/);
    const events = blocks.map((b) => JSON.parse(b.slice('data: '.length)) as { type: string; delta?: string; text?: string });
    assert.deepEqual(
      events.map((e) => e.type),
      ['transcript.text.delta', 'transcript.text.delta', 'transcript.text.done'],
    );
    assert.equal(
      events
        .slice(0, -1)
        .map((e) => e.delta)
        .join(''),
      events.at(-1)!.text,
    );
    assert.deepEqual(events.at(-1), {
      type: 'transcript.text.done',
      text: 'Hello there. General Kenobi.',
      usage: { type: 'duration', seconds: 3 },
    });
  });

  describe('long audio in pieces', () => {
    // The harness decodes N bytes to N samples of silence: 40,000 bytes are 2.5 s, cut in the middle of the pause within reach.
    const long = (): Field => ['file', new Blob([new Uint8Array(40_000)])];
    const pieceResult = (call: Call): TranscriptResult => {
      const n = call.request.audio.length;
      return {
        text: `piece ${n}`,
        language: 'en',
        durationS: n / 16000,
        segments: [{ start: 0, end: n / 16000, text: `piece ${n}`, decoding: null }],
        words: null,
      };
    };

    it('leaves audio up to splitAboveMs whole', async () => {
      const { app, calls } = await setup({ splitAboveMs: 3000 });
      const res = await post(app, [['model', 'echo'], long()]);
      assert.equal(res.statusCode, 200);
      assert.equal(calls.length, 1);
      assert.equal(calls[0]!.request.audio.length, 40_000);
    });

    it('submits each piece as its own request and stitches segments with their offsets', async () => {
      const { app, calls, metrics } = await setup({ splitAboveMs: 1000, transcribe: async (call) => pieceResult(call) });
      const res = await post(app, [['model', 'echo'], ['response_format', 'verbose_json'], long()]);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(
        calls.map((c) => c.request.audio.length),
        [19_920, 20_080],
      );
      assert.ok(calls.every((c) => c.options.requestId?.endsWith(`.${calls.indexOf(c)}`)));
      const body = JSON.parse(res.body) as { text: string; segments: { start: number; end: number }[]; duration: number };
      assert.equal(body.text, 'piece 19920 piece 20080');
      assert.deepEqual(
        body.segments.map((x) => [x.start, x.end]),
        [
          [0, 1.245],
          [1.245, 2.5],
        ],
      );
      assert.equal(body.duration, 2.5);
      assert.match(await metrics.registry.metrics(), /voxmux_gateway_audio_pieces_total\{model="echo"\} 2/);
    });

    it('streams one delta per piece, then done', async () => {
      const { app } = await setup({ splitAboveMs: 1000, transcribe: async (call) => pieceResult(call) });
      const res = await post(app, [['model', 'echo'], ['stream', 'true'], long()]);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-type'], 'text/event-stream; charset=utf-8');
      const events = res.body
        .slice(0, -2)
        .split('\n\n')
        .map((b) => JSON.parse(b.slice('data: '.length)) as { type: string; delta?: string; text?: string });
      assert.deepEqual(events, [
        { type: 'transcript.text.delta', delta: 'piece 19920' },
        { type: 'transcript.text.delta', delta: ' piece 20080' },
        { type: 'transcript.text.done', text: 'piece 19920 piece 20080', usage: { type: 'duration', seconds: 3 } },
      ]);
    });

    it('answers the envelope when a piece fails before the stream opened, and an error event after', async () => {
      const failing = (index: number) => async (call: Call) => {
        if (call.options.requestId?.endsWith(`.${index}`))
          throw errors.fromWire({ code: 'model_failed', message: 'Boom', instanceId: 'i0' });
        return pieceResult(call);
      };
      const before = await setup({ splitAboveMs: 1000, transcribe: failing(0) });
      const early = await post(before.app, [['model', 'echo'], ['stream', 'true'], long()]);
      assert.equal(early.statusCode, 500);
      assert.equal(errorOf(early).code, 'model_failed');
      await current?.close();
      const later = await setup({ splitAboveMs: 1000, transcribe: failing(1) });
      const res = await post(later.app, [['model', 'echo'], ['stream', 'true'], long()]);
      assert.equal(res.statusCode, 200);
      const events = res.body
        .slice(0, -2)
        .split('\n\n')
        .map((b) => JSON.parse(b.slice('data: '.length)) as { type: string; error?: { code: string } });
      assert.deepEqual(
        events.map((e) => e.type),
        ['transcript.text.delta', 'error'],
      );
      assert.equal(events[1]!.error?.code, 'model_failed');
    });
  });

  it('answers plain json when stream is false', async () => {
    const { app } = await setup();
    const res = await post(app, [['model', 'echo'], ['stream', 'false'], audioFile()]);
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
  });

  it('rejects stream with a format that cannot stream, and a stream value that is not a boolean', async () => {
    const { app, calls } = await setup();
    for (const fields of [
      [
        ['stream', 'true'],
        ['response_format', 'srt'],
      ],
      [
        ['stream', 'true'],
        ['response_format', 'verbose_json'],
      ],
      [['stream', 'yes']],
    ] as Field[][]) {
      const res = await post(app, [['model', 'echo'], ...fields, audioFile()]);
      assert.equal(res.statusCode, 400);
      assert.deepEqual([errorOf(res).code, errorOf(res).param], ['invalid_parameter', 'stream']);
    }
    assert.equal(calls.length, 0);
  });

  it('answers 404 model_not_found for an unknown model without decoding or transcribing', async () => {
    const { app, calls, decoded } = await setup();
    const res = await post(app, [['model', 'whisper-2'], audioFile()]);
    assert.equal(res.statusCode, 404);
    const error = errorOf(res);
    assert.deepEqual(error, {
      message: "The model 'whisper-2' does not exist",
      type: 'invalid_request_error',
      param: 'model',
      code: 'model_not_found',
    });
    assert.equal(decoded.length, 0);
    assert.equal(calls.length, 0);
  });

  it('answers 400 invalid_parameter for invalid parameters, naming the parameter', async () => {
    const { app, calls } = await setup();
    const cases: [Field[], string][] = [
      [[['response_format', 'xml']], 'response_format'],
      [[['timestamp_granularities[]', 'char']], 'timestamp_granularities'],
      [[['language', 'english!!']], 'language'],
      [[['colour', 'blue']], 'colour'],
      [[['model', 'echo']], 'model'],
      [[['file', 'not a file upload']], 'file'],
      [[['audio', new Blob([new Uint8Array(8)])]], 'audio'],
    ];
    for (const [fields, param] of cases) {
      const res = await post(app, [['model', 'echo'], ...fields, audioFile()]);
      assert.equal(res.statusCode, 400, `${param}: ${res.body}`);
      const error = errorOf(res);
      assert.equal(error.code, 'invalid_parameter', param);
      assert.equal(error.type, 'invalid_request_error');
      assert.equal(error.param, param);
    }
    assert.equal(calls.length, 0);
  });

  it('answers 400 missing_parameter without a model or without a file', async () => {
    const { app } = await setup();
    const noModel = await post(app, [audioFile()]);
    assert.deepEqual([noModel.statusCode, errorOf(noModel).code, errorOf(noModel).param], [400, 'missing_parameter', 'model']);
    const noFile = await post(app, [['model', 'echo']]);
    assert.deepEqual([noFile.statusCode, errorOf(noFile).code, errorOf(noFile).param], [400, 'missing_parameter', 'file']);
  });

  it('answers 400 invalid_content_type for a body that is not multipart, naming its content type', async () => {
    const { app } = await setup();
    for (const [contentType, payload] of [
      ['application/json', '{"model":"echo"}'],
      ['application/json', '{"model":'],
      ['application/octet-stream', 'RIFF'],
    ]) {
      const res = await app.inject({ method: 'POST', url: URL_PATH, payload, headers: { 'content-type': contentType } });
      assert.equal(res.statusCode, 400, `${contentType} ${payload}`);
      const error = errorOf(res);
      assert.equal(error.code, 'invalid_content_type');
      assert.ok(error.message.endsWith(`got ${contentType}`), error.message);
    }
  });

  it('answers 413 body_too_large for a file over maxBodyBytes', async () => {
    const { app, calls } = await setup();
    const res = await post(app, [['model', 'echo'], audioFile(64 * 1024 + 1)]);
    assert.equal(res.statusCode, 413);
    assert.equal(errorOf(res).code, 'body_too_large');
    assert.equal(calls.length, 0);
  });

  it('maps a decoder error through the catalogue', async () => {
    const { app, calls } = await setup({
      decode: async () => {
        throw errors.unsupportedAudioFormat({ detected: 'png' });
      },
    });
    const res = await post(app, [['model', 'echo'], audioFile()]);
    assert.equal(res.statusCode, 415);
    assert.deepEqual([errorOf(res).code, errorOf(res).param], ['unsupported_audio_format', 'file']);
    assert.equal(calls.length, 0);
  });

  it('answers 429 with Retry-After when transcribe fails with queue_full', async () => {
    const { app } = await setup({
      transcribe: async ({ model }) => {
        throw errors.queueFull({ model, queued: 512, retryAfterMs: 1500 });
      },
    });
    const res = await post(app, [['model', 'echo'], audioFile()]);
    assert.equal(res.statusCode, 429);
    assert.equal(res.headers['retry-after'], '2');
    assert.deepEqual(errorOf(res), {
      message: "The queue for model 'echo' is full: 512 requests queued",
      type: 'rate_limit_error',
      param: null,
      code: 'queue_full',
    });
  });

  it('answers 504 without Retry-After when transcribe fails with deadline_exceeded', async () => {
    const { app } = await setup({
      transcribe: async ({ options }) => {
        throw errors.deadlineExceeded({ requestId: options.requestId ?? '', timeoutMs: options.timeoutMs });
      },
    });
    const res = await post(app, [['model', 'echo'], audioFile()]);
    assert.equal(res.statusCode, 504);
    assert.equal(res.headers['retry-after'], undefined);
    assert.deepEqual([errorOf(res).code, errorOf(res).type], ['deadline_exceeded', 'server_error']);
  });

  it('answers 503 with Retry-After when transcribe fails with instance_crashed', async () => {
    const { app } = await setup({
      transcribe: async () => {
        throw errors.instanceCrashed({ instanceId: 'echo-0', reason: 'exit code 137' });
      },
    });
    const res = await post(app, [['model', 'echo'], audioFile()]);
    assert.equal(res.statusCode, 503);
    assert.equal(res.headers['retry-after'], '1');
    assert.deepEqual([errorOf(res).code, errorOf(res).type], ['instance_crashed', 'server_error']);
  });

  it('answers 500 internal_error without the message when transcribe fails with a plain Error', async () => {
    const { app, metrics } = await setup({
      transcribe: async () => {
        throw new Error('tensor shape mismatch at /srv/models/secret-path');
      },
    });
    const res = await post(app, [['model', 'echo'], audioFile()]);
    assert.equal(res.statusCode, 500);
    assert.deepEqual(errorOf(res), { message: 'Internal server error', type: 'server_error', param: null, code: 'internal_error' });
    assert.ok(!res.body.includes('secret-path'));
    assert.equal(await callCount(metrics, 'internal'), 1);
  });

  it('counts calls by endpoint and outcome, streamed calls included, and times them on the injected clock', async () => {
    let isFull = false;
    const { app, metrics } = await setup({
      transcribe: async ({ model }) => {
        if (isFull) throw errors.queueFull({ model, queued: 1, retryAfterMs: 1000 });
        return RESULT;
      },
    });
    await post(app, [['model', 'echo'], audioFile()]);
    await post(app, [['model', 'echo'], ['stream', 'true'], audioFile()]);
    await post(app, [['model', 'echo'], ['response_format', 'xml'], audioFile()]);
    await post(app, [['model', 'nope'], audioFile()]);
    isFull = true;
    await post(app, [['model', 'echo'], audioFile()]);
    await settle();
    assert.equal(await callCount(metrics, 'ok'), 2);
    assert.equal(await callCount(metrics, 'invalid_argument'), 1);
    assert.equal(await callCount(metrics, 'not_found'), 1);
    assert.equal(await callCount(metrics, 'resource_exhausted'), 1);
    const duration = await metrics.gatewayCallDuration.get();
    const sum = duration.values.find((v) => v.metricName === 'voxmux_gateway_call_duration_seconds_sum' && v.labels.endpoint === URL_PATH);
    // Three calls reached the decoder (40 ms) and transcribe (210 ms) on the fake clock; the two rejected early took no time.
    assert.equal(sum?.value, 0.75);
  });

  it('counts a client that disconnects during decoding as cancelled, not as an internal error', async () => {
    let response: ServerResponse | undefined;
    const { app, metrics, calls } = await setup({
      onRequest: (raw) => {
        response = raw;
      },
      decode: async (_bytes, signal) => {
        // The socket closes while the decoder runs; a real decoder then throws signal.reason.
        response!.emit('close');
        signal!.throwIfAborted();
        throw new Error('The decoder should have seen the abort');
      },
    });
    await post(app, [['model', 'echo'], audioFile()]).catch(() => undefined);
    await settle();
    assert.equal(calls.length, 0);
    assert.equal(await callCount(metrics, 'internal'), 0);
    assert.equal(await callCount(metrics, 'cancelled'), 1);
  });
});

/** The real decoder's fast path: the samples are a view of the upload itself. */
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

describe('POST /v1/audio/transcriptions: upload memory', () => {
  it("gives an upload's memory to the next upload once its result is in, and not when its call failed", async () => {
    const seen: ArrayBufferLike[] = [];
    let shouldFailNext = false;
    const { app, metrics } = await setup({
      decode: viewDecode,
      transcribe: async ({ request }) => {
        seen.push(request.audio.buffer);
        if (shouldFailNext) {
          shouldFailNext = false;
          throw errors.deadlineExceeded({ requestId: 'r', timeoutMs: 1 });
        }
        return RESULT;
      },
    });
    assert.equal((await post(app, [['model', 'echo'], audioFile(3200, 1)])).statusCode, 200);
    assert.equal((await post(app, [['model', 'echo'], audioFile(3000, 2)])).statusCode, 200);
    assert.equal(seen[1], seen[0], "the second upload reused the first one's memory");
    const gauge = async (metric: { get(): Promise<{ values: Array<{ value: number }> }> }) => (await metric.get()).values[0]?.value;
    assert.equal(await gauge(metrics.uploadAllocatedBytes), 64 * 1024);
    assert.equal(await gauge(metrics.uploadPoolBytes), 64 * 1024);
    shouldFailNext = true;
    assert.equal((await post(app, [['model', 'echo'], audioFile(3200, 3)])).statusCode, 504);
    assert.equal((await post(app, [['model', 'echo'], audioFile(3200, 4)])).statusCode, 200);
    assert.notEqual(seen[3], seen[2], "a failed call's upload may still be read by its batch: not reused");
  });

  it('keeps every upload intact until its own result is in while calls overlap', async () => {
    const damaged: number[] = [];
    const { app } = await setup({
      decode: viewDecode,
      transcribe: async ({ request }) => {
        const expected = request.audio[0]!;
        // Later uploads arrive and are decoded while this one waits for its "batch".
        await new Promise((resolve) => setTimeout(resolve, 30));
        if (!request.audio.every((sample) => sample === expected)) damaged.push(expected);
        return RESULT;
      },
    });
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => post(app, [['model', 'echo'], audioFile(3200, 10 * round + i + 1)])),
      );
      assert.deepEqual(
        answers.map((res) => res.statusCode),
        Array(8).fill(200),
      );
    }
    assert.deepEqual(damaged, []);
  });

  it('gives the upload back when the form fails after its file part: a second file, a text field named file', async () => {
    const { app, metrics } = await setup({ decode: viewDecode });
    const pooled = async () => (await metrics.uploadPoolBytes.get()).values[0]?.value;
    const twice = await post(app, [['model', 'echo'], audioFile(3200, 1), audioFile(3200, 2)]);
    assert.equal(twice.statusCode, 400, twice.body);
    assert.equal(await pooled(), 64 * 1024, 'the first file went back to the pool');
    const textAfter = await post(app, [audioFile(3200, 1), ['file', 'abc'], ['model', 'echo']]);
    assert.equal(errorOf(textAfter).param, 'file');
    assert.equal(await pooled(), 64 * 1024);
    assert.equal((await metrics.uploadAllocatedBytes.get()).values[0]?.value, 64 * 1024, 'the second call reused the memory');
    const tooLarge = await post(app, [['model', 'echo'], audioFile(70_000, 1)]);
    assert.equal(errorOf(tooLarge).code, 'body_too_large');
    assert.equal(await pooled(), 64 * 1024 + 128 * 1024);
  });

  it('gives the upload back when the call is refused before anything reads it: a bad field, an unknown model, undecodable audio', async () => {
    let shouldDecode = false;
    const { app, metrics, calls } = await setup({
      decode: async (bytes) => {
        if (!shouldDecode) throw errors.invalidAudio({ reason: 'the test says so' });
        return viewDecode(bytes);
      },
    });
    const pooled = async () => (await metrics.uploadPoolBytes.get()).values[0]?.value;
    assert.equal(errorOf(await post(app, [['model', 'echo'], ['temperature', '7'], audioFile()])).param, 'temperature');
    assert.equal(await pooled(), 64 * 1024);
    assert.equal(errorOf(await post(app, [['model', 'nope'], audioFile()])).code, 'model_not_found');
    assert.equal(await pooled(), 64 * 1024);
    assert.equal(errorOf(await post(app, [['model', 'echo'], audioFile()])).code, 'invalid_audio');
    assert.equal(await pooled(), 64 * 1024);
    shouldDecode = true;
    assert.equal((await post(app, [['model', 'echo'], audioFile()])).statusCode, 200);
    assert.equal(calls.length, 1);
    assert.equal((await metrics.uploadAllocatedBytes.get()).values[0]?.value, 64 * 1024, "every call reused the first one's memory");
  });

  it('takes fresh memory for every upload with a pool of 0 bytes', async () => {
    const seen: ArrayBufferLike[] = [];
    const { app } = await setup({
      uploadPoolBytes: 0,
      decode: viewDecode,
      transcribe: async ({ request }) => {
        seen.push(request.audio.buffer);
        return RESULT;
      },
    });
    await post(app, [['model', 'echo'], audioFile()]);
    await post(app, [['model', 'echo'], audioFile()]);
    assert.equal(seen.length, 2);
    assert.notEqual(seen[1], seen[0]);
  });
});

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
  it('a second file part is 400 invalid_parameter naming file, whatever its field name', async () => {
    const { app, calls } = await setup();
    for (const second of ['file', 'audio']) {
      const res = await post(app, [['model', 'echo'], audioFile(), [second, new Blob([new Uint8Array(10)])]]);
      assert.equal(res.statusCode, 400, res.body);
      assert.deepEqual(
        { ...errorOf(res), message: undefined },
        { message: undefined, type: 'invalid_request_error', param: 'file', code: 'invalid_parameter' },
      );
      assert.match(errorOf(res).message, /one file/);
    }
    assert.equal(calls.length, 0);
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
    const damaged: string[] = [];
    const { app, calls } = await setup({
      splitAboveMs: 1000,
      maxBodyBytes: 256 * 1024,
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
