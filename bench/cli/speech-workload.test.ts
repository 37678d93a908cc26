import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { BUILT_IN_SENTENCES } from './speech-texts.js';
import { createSpeechWorkload, planSpeechCall, type SpeechWorkloadOptions } from './speech-workload.js';
import { createVoiceMix } from './voice-mix.js';
import { RequestAbort, type RequestOutcome } from './workload.js';

const SENTENCES = { kind: 'sentences', sentences: BUILT_IN_SENTENCES } as const;

function options(overrides: Partial<SpeechWorkloadOptions> = {}): SpeechWorkloadOptions {
  return {
    endpoint: 'http://server/v1/audio/speech',
    model: 'tts-1',
    voiceMix: createVoiceMix({ voices: ['v0', 'v1', 'v2'], kind: 'zipf', zipfS: 1.1 }),
    texts: SENTENCES,
    seed: 5,
    ...overrides,
  };
}

/** A response body the test writes to chunk by chunk, advancing the clock between chunks. */
function scriptedBody() {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
  return {
    body,
    push: (bytes: number) => controller.enqueue(new Uint8Array(bytes)),
    end: () => controller.close(),
    fail: (err: Error) => controller.error(err),
  };
}

function recordingFetch(respond: (init: RequestInit) => Response) {
  const sent: Array<{ url: string; init: RequestInit; json: Record<string, unknown> }> = [];
  const fetch = (async (input: string | URL | Request, init: RequestInit = {}) => {
    sent.push({ url: String(input), init, json: JSON.parse(String(init.body)) as Record<string, unknown> });
    return respond(init);
  }) as typeof globalThis.fetch;
  return { fetch, sent };
}

function start(opts: SpeechWorkloadOptions, fetch: typeof globalThis.fetch, clock: FakeClock, signal = new AbortController().signal) {
  return createSpeechWorkload(opts, { fetch }).makeRequest({ sequence: 0, signal, clock });
}

describe('createSpeechWorkload', () => {
  it('asks for streamed 24 kHz PCM and measures first byte, audio seconds and stalls on the playback clock', async () => {
    const clock = new FakeClock();
    const script = scriptedBody();
    const { fetch, sent } = recordingFetch(() => new Response(script.body, { status: 200, headers: { 'content-type': 'audio/pcm' } }));
    const outcome = start(options({ speed: 1.5, apiKey: 'sk-1' }), fetch, clock);
    await settle();
    clock.advance(80);
    script.push(9600); // 200 ms of audio at 80: plays until 280
    await settle();
    clock.advance(150);
    script.push(24_000); // 500 ms at 230: in time, plays until 780
    await settle();
    clock.advance(600);
    script.push(4800); // at 830: 50 ms stalled
    await settle();
    clock.advance(20);
    script.end();
    const result: RequestOutcome = await outcome;
    assert.deepEqual(result, {
      startMs: 0,
      endMs: 850,
      status: 200,
      ttfbMs: 80,
      audioSeconds: 0.8,
      playback: { stalls: 1, stalledMs: 50 },
    });
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.url, 'http://server/v1/audio/speech');
    const plan = planSpeechCall(options(), 0);
    assert.deepEqual(sent[0]!.json, {
      model: 'tts-1',
      input: plan.input,
      voice: plan.voice,
      response_format: 'pcm',
      stream_format: 'audio',
      speed: 1.5,
    });
    const headers = sent[0]!.init.headers as Record<string, string>;
    assert.equal(headers.authorization, 'Bearer sk-1');
    assert.equal(headers['content-type'], 'application/json');
    assert.equal(sent[0]!.init.redirect, 'manual');
  });

  it('with pace playback, resolves once the audio would have been heard (stalls included), or at once on abort', async () => {
    const clock = new FakeClock();
    const respond = () => {
      const script = scriptedBody();
      return { script, response: new Response(script.body, { status: 200, headers: { 'content-type': 'audio/pcm' } }) };
    };
    let current = respond();
    const { fetch } = recordingFetch(() => current.response);
    let isResolved = false;
    const outcome = start(options({ pace: 'playback' }), fetch, clock).then((r) => {
      isResolved = true;
      return r;
    });
    await settle();
    clock.advance(100);
    current.script.push(48_000); // one second at 100: heard at 1100
    await settle();
    clock.advance(50);
    current.script.end();
    await settle();
    assert.equal(isResolved, false, 'still playing');
    clock.advance(949);
    await settle();
    assert.equal(isResolved, false);
    clock.advance(1);
    await settle();
    assert.equal(isResolved, true);
    assert.deepEqual(await outcome, {
      startMs: 0,
      endMs: 150,
      status: 200,
      ttfbMs: 100,
      audioSeconds: 1,
      playback: { stalls: 0, stalledMs: 0 },
    });

    current = respond();
    const controller = new AbortController();
    const aborted = start(options({ pace: 'playback' }), fetch, clock, controller.signal);
    await settle();
    current.script.push(48_000);
    current.script.end();
    await settle();
    controller.abort(new RequestAbort('abandoned'));
    assert.equal((await aborted).errorCode, undefined, 'a call aborted while its audio plays is still a success');
  });

  it('reports the error envelope code of a refused call, with no audio figures', async () => {
    const clock = new FakeClock();
    const envelope = { error: { message: 'Unknown voice', type: 'invalid_request_error', param: 'voice', code: 'unknown_voice' } };
    const { fetch } = recordingFetch(
      () => new Response(JSON.stringify(envelope), { status: 400, headers: { 'content-type': 'application/json' } }),
    );
    assert.deepEqual(await start(options(), fetch, clock), { startMs: 0, endMs: 0, status: 400, errorCode: 'unknown_voice' });
  });

  it('fails a 2xx answer that is JSON or empty, and a stream that breaks, keeping its first byte', async () => {
    const clock = new FakeClock();
    const json = recordingFetch(() => new Response('{"text":"x"}', { status: 200, headers: { 'content-type': 'application/json' } }));
    assert.equal((await start(options(), json.fetch, clock)).errorCode, 'bad_response');
    const empty = recordingFetch(() => new Response(new Uint8Array(0), { status: 200, headers: { 'content-type': 'audio/pcm' } }));
    assert.equal((await start(options(), empty.fetch, clock)).errorCode, 'empty_audio');

    const script = scriptedBody();
    const broken = recordingFetch(() => new Response(script.body, { status: 200, headers: { 'content-type': 'audio/pcm' } }));
    const outcome = start(options(), broken.fetch, clock);
    await settle();
    clock.advance(40);
    script.push(480);
    await settle();
    script.fail(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    const result = await outcome;
    assert.equal(result.errorCode, 'ECONNRESET');
    assert.equal(result.status, 200);
    assert.equal(result.ttfbMs, 40);
    assert.equal(result.playback, undefined);
  });

  it("maps the driver's abort to its reason", async () => {
    const clock = new FakeClock();
    const controller = new AbortController();
    const fetch = ((_url: string, init: RequestInit) =>
      new Promise<Response>((_resolve, reject) => {
        init.signal?.addEventListener('abort', () => reject(new TypeError('fetch failed', { cause: init.signal?.reason })));
      })) as unknown as typeof globalThis.fetch;
    const outcome = start(options(), fetch, clock, controller.signal);
    controller.abort(new RequestAbort('timeout'));
    assert.equal((await outcome).errorCode, 'timeout');
  });

  it('describes itself for the report', () => {
    const workload = createSpeechWorkload(
      options({ voiceMix: createVoiceMix({ voices: ['a', 'b', 'c', 'd'], kind: 'uniform', zipfS: 1 }) }),
      { fetch: globalThis.fetch },
    );
    assert.equal(workload.info.kind, 'speech');
    assert.equal(workload.info.isStreaming, true);
    assert.equal(workload.info.inputCount, BUILT_IN_SENTENCES.length);
    assert.deepEqual(workload.info.settings, {
      responseFormat: 'pcm',
      streamFormat: 'audio',
      texts: 'built-in sentences, 1 to 3 per call',
      voices: '4 (a ... d)',
      mix: 'uniform',
      seed: '5',
      pace: 'none',
    });
  });
});

describe('planSpeechCall', () => {
  it('draws the same voice and input for the same seed and sequence, whatever the order of calls', () => {
    const opts = options({ voiceMix: createVoiceMix({ voices: Array.from({ length: 64 }, (_, i) => `v${i}`), kind: 'zipf', zipfS: 1.1 }) });
    const forward = Array.from({ length: 40 }, (_, i) => planSpeechCall(opts, i));
    const backward = Array.from({ length: 40 }, (_, i) => planSpeechCall(opts, 39 - i)).reverse();
    assert.deepEqual(forward, backward);
    assert.notDeepEqual(
      forward,
      Array.from({ length: 40 }, (_, i) => planSpeechCall({ ...opts, seed: 6 }, i)),
    );
    // Built-in inputs are one to three sentences, all three lengths occurring.
    const sentenceCounts = new Set(
      Array.from({ length: 200 }, (_, i) => {
        const input = planSpeechCall(opts, i).input;
        const parts = BUILT_IN_SENTENCES.filter((sentence) => input.includes(sentence));
        assert.ok(parts.length >= 1);
        return input.split(/(?<=[.?!]) /).length;
      }),
    );
    assert.deepEqual([...sentenceCounts].sort(), [1, 2, 3]);
  });

  it('cycles the lines of a text file in sequence order', () => {
    const opts = options({ texts: { kind: 'lines', lines: ['one', 'two', 'three'] } });
    assert.deepEqual(
      [0, 1, 2, 3, 4].map((i) => planSpeechCall(opts, i).input),
      ['one', 'two', 'three', 'one', 'two'],
    );
  });
});
