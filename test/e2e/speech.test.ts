/**
 * POST /v1/audio/speech end to end: the built server, real instances of the test engine's speech
 * streams (deterministic tones, 22.05 kHz), real ffmpeg encoders, and the unmodified openai SDK.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { Stream } from 'openai/streaming';
import { probeAudio } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

const SPEECH_MODEL = { adapter: 'test', task: 'speech', voiceAliases: { alloy: 'tone-a', echo: 'tone-e' } };
const CONFIG = {
  scheduler: { maxQueuedRequests: 1, retryAfterMs: 3000 },
  supervisor: { heartbeatIntervalMs: 200 },
  models: {
    voice: { ...SPEECH_MODEL, aliases: ['tts-1'], instances: 2 },
    slow: { ...SPEECH_MODEL, instances: 1, maxStreamsPerInstance: 1, options: { speechChunkDelayMs: 150 } },
    failing: { ...SPEECH_MODEL, instances: 1, options: { speechChunkDelayMs: 50, speechFailAfterChunks: 3 } },
    patient: { ...SPEECH_MODEL, instances: 2, options: { speechChunkDelayMs: 1000 } },
    asr: { adapter: 'test', instances: 1 },
  },
};

const INPUT = 'Hello there. This is a test of speech.';
/** The test engine's length of INPUT: (200 + 60 x characters) ms per sentence (docs/adapters.md). */
const INPUT_SECONDS = (200 + 60 * 'Hello there.'.length + 200 + 60 * 'This is a test of speech.'.length) / 1000;
const INPUT_FRAMES_22K =
  (22_050 * (200 + 60 * 'Hello there.'.length)) / 1000 + (22_050 * (200 + 60 * 'This is a test of speech.'.length)) / 1000;

const CONTENT_TYPES = { mp3: 'audio/mpeg', opus: 'audio/ogg', aac: 'audio/aac', flac: 'audio/flac', wav: 'audio/wav', pcm: 'audio/pcm' };

let server: RunningServer;
let client: OpenAI;
before(async () => {
  server = await startServer({ config: CONFIG });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0 });
});
after(async () => {
  await server?.stop('SIGKILL');
});

async function sseAudio(response: Response): Promise<{ audio: Buffer; done: { usage: Record<string, number> } | undefined }> {
  const parts: Buffer[] = [];
  let done: { usage: Record<string, number> } | undefined;
  const stream = Stream.fromSSEResponse<{ type: string; audio?: string; usage?: Record<string, number> }>(response, new AbortController());
  for await (const event of stream) {
    if (event.type === 'speech.audio.delta') parts.push(Buffer.from(event.audio ?? '', 'base64'));
    if (event.type === 'speech.audio.done') done = { usage: event.usage ?? {} };
  }
  return { audio: Buffer.concat(parts), done };
}

/** Reads a body to its end; the time its first bytes and its end arrived, from the call's start. */
async function timedRead(url: string, body: unknown): Promise<{ firstMs: number; totalMs: number; bytes: number }> {
  const started = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 200);
  let firstMs = -1;
  let bytes = 0;
  for await (const chunk of res.body!) {
    if (firstMs < 0) firstMs = performance.now() - started;
    bytes += (chunk as Uint8Array).length;
  }
  return { firstMs, totalMs: performance.now() - started, bytes };
}

function ffmpegChildren(pid: number): string[] {
  try {
    return execFileSync('ps', ['--ppid', String(pid), '-o', 'comm='])
      .toString()
      .split('\n')
      .filter((name) => name.trim() === 'ffmpeg');
  } catch {
    return []; // ps exits 1 when there are no children
  }
}

describe('POST /v1/audio/speech with the openai SDK', () => {
  for (const format of ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const) {
    it(`speech.create with response_format ${format} answers audio that ffmpeg decodes to the length of the text`, async () => {
      const response = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: INPUT, response_format: format });
      assert.equal(response.headers.get('content-type'), CONTENT_TYPES[format]);
      const bytes = Buffer.from(await response.arrayBuffer());
      const probed = probeAudio(bytes, { rawPcm24k: format === 'pcm' });
      assert.equal(probed.channels, 1);
      if (format !== 'opus') assert.equal(probed.sampleRateHz, 24_000);
      assert.ok(
        Math.abs(probed.decodedSeconds - INPUT_SECONDS) < 0.15,
        `${format}: decoded ${probed.decodedSeconds} s, expected ${INPUT_SECONDS}`,
      );
      if (format === 'pcm') assert.equal(bytes.length / 2, Math.ceil((INPUT_FRAMES_22K * 24_000) / 22_050));
    });
  }

  for (const format of ['pcm', 'wav', 'mp3', 'flac'] as const) {
    it(`stream_format sse deltas (Stream.fromSSEResponse) concatenate to the same ${format} bytes as the plain response`, async () => {
      const plain = Buffer.from(
        await (await client.audio.speech.create({ model: 'voice', voice: 'echo', input: INPUT, response_format: format })).arrayBuffer(),
      );
      const response = await client.audio.speech.create({
        model: 'voice',
        voice: 'echo',
        input: INPUT,
        response_format: format,
        stream_format: 'sse',
      });
      assert.match(String(response.headers.get('content-type')), /^text\/event-stream/);
      const { audio, done } = await sseAudio(response);
      assert.ok(audio.equals(plain), `${format}: ${audio.length} streamed bytes against ${plain.length}`);
      assert.deepEqual(done?.usage, { input_tokens: INPUT.length, output_tokens: 3, total_tokens: INPUT.length + 3 });
    });
  }

  it('voices differ: alloy and echo give different audio, each the same every time', async () => {
    const speak = async (voice: string) =>
      Buffer.from(
        await (await client.audio.speech.create({ model: 'voice', voice, input: 'Same text.', response_format: 'pcm' })).arrayBuffer(),
      );
    const [alloy, alloyAgain, echo] = [await speak('alloy'), await speak('alloy'), await speak('echo')];
    assert.ok(alloy.equals(alloyAgain));
    assert.ok(!alloy.equals(echo));
  });

  it('speed 2 halves the audio; instructions are accepted and change nothing', async () => {
    const response = await client.audio.speech.create({
      model: 'voice',
      voice: 'alloy',
      input: INPUT,
      response_format: 'pcm',
      speed: 2,
      instructions: 'Speak slowly and calmly.',
    });
    const seconds = (await response.arrayBuffer()).byteLength / 2 / 24_000;
    assert.ok(Math.abs(seconds - INPUT_SECONDS / 2) < 0.01, `${seconds} s`);
  });

  it('answers SDK errors with catalogued codes: unknown voice, too long input, unknown model, transcription model', async () => {
    const cases: [Parameters<typeof client.audio.speech.create>[0], number, string][] = [
      [{ model: 'voice', voice: 'nobody', input: 'Hi.' }, 400, 'unknown_voice'],
      [{ model: 'voice', voice: 'alloy', input: 'a'.repeat(4097) }, 400, 'input_too_long'],
      [{ model: 'voice', voice: 'alloy', input: 'Hi.', speed: 8 }, 400, 'speed_out_of_range'],
      [{ model: 'voice', voice: 'alloy', input: 'Hi.', response_format: 'ogg' as 'mp3' }, 400, 'unsupported_response_format'],
      [{ model: 'tts-9', voice: 'alloy', input: 'Hi.' }, 404, 'model_not_found'],
      [{ model: 'asr', voice: 'alloy', input: 'Hi.' }, 400, 'model_task_mismatch'],
    ];
    for (const [params, status, code] of cases) {
      await assert.rejects(client.audio.speech.create(params), (err: InstanceType<typeof OpenAI.APIError>) => {
        assert.equal(err.status, status);
        assert.equal(err.code, code);
        return true;
      });
    }
  });

  it('lists speech models with voxmux.task in GET /v1/models', async () => {
    const models = await client.models.list();
    const tasks = Object.fromEntries(models.data.map((m) => [m.id, (m as unknown as { voxmux: { task: string } }).voxmux.task]));
    assert.equal(tasks['tts-1'], 'speech');
    assert.equal(tasks.asr, 'transcription');
  });

  it('counts speech calls, their first-byte latency and their audio in /metrics', async () => {
    await (await client.audio.speech.create({ model: 'voice', voice: 'alloy', input: INPUT, response_format: 'flac' })).arrayBuffer();
    assert.ok((await server.metric('voxmux_gateway_calls_total', { endpoint: '/v1/audio/speech', outcome: 'ok' })) >= 1);
    assert.ok((await server.metric('voxmux_gateway_speech_calls_total', { format: 'flac', stream_format: 'audio', outcome: 'ok' })) >= 1);
    assert.ok((await server.metric('voxmux_gateway_speech_first_byte_seconds_count', { model: 'voice', format: 'flac' })) >= 1);
    assert.ok((await server.metric('voxmux_gateway_speech_audio_seconds_total', { model: 'voice' })) >= INPUT_SECONDS);
  });
});

describe('POST /v1/audio/speech streaming behaviour', () => {
  for (const format of ['pcm', 'mp3'] as const) {
    it(`sends the first ${format} bytes long before a slow synthesis ends`, async () => {
      // 12 chunks of 200 ms audio, 150 ms apart: about 1.8 s of synthesis.
      const { firstMs, totalMs, bytes } = await timedRead(`${server.url}/v1/audio/speech`, {
        model: 'slow',
        voice: 'alloy',
        input: INPUT,
        response_format: format,
      });
      assert.ok(bytes > 0);
      assert.ok(totalMs > 1500, `total ${totalMs} ms`);
      assert.ok(firstMs < totalMs / 2, `first bytes after ${firstMs} ms of ${totalMs}`);
    });
  }

  for (const streamFormat of ['audio', 'sse'] as const) {
    it(`a client that disconnects mid-stream (stream_format ${streamFormat}) cancels it: the instance is free at once and ffmpeg is gone`, async () => {
      const abort = new AbortController();
      const res = await fetch(`${server.url}/v1/audio/speech`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'slow', voice: 'alloy', input: INPUT, response_format: 'mp3', stream_format: streamFormat }),
        signal: abort.signal,
      });
      const reader = res.body!.getReader();
      await reader.read();
      const scrapeStartedAt = performance.now();
      assert.equal(await server.metric('voxmux_scheduler_streams_running', { model: 'slow' }), 1);
      const scrapeMs = performance.now() - scrapeStartedAt;
      const abortedAt = performance.now();
      abort.abort();
      let freedMs = -1;
      while (performance.now() - abortedAt < 2000) {
        const askedAt = performance.now();
        if ((await server.metric('voxmux_scheduler_streams_running', { model: 'slow' })) === 0) {
          // The instance was free by the time the scrape that saw it started (bounded above).
          freedMs = askedAt - abortedAt;
          break;
        }
      }
      assert.ok(freedMs >= 0 && freedMs < 100 + scrapeMs, `freed within ${freedMs} ms (a scrape takes ${scrapeMs} ms)`);
      assert.deepEqual(ffmpegChildren(server.process.pid!), []);
      assert.equal(
        await server.metric('voxmux_gateway_speech_calls_total', { stream_format: streamFormat, outcome: 'client_disconnected' }),
        1,
      );
    });
  }

  it('answers 429 queue_full with Retry-After when the stream queue is full', async () => {
    const body = JSON.stringify({ model: 'slow', voice: 'alloy', input: INPUT, response_format: 'pcm' });
    const post = () => fetch(`${server.url}/v1/audio/speech`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const running = post();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const queued = post();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const refused = await post();
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('retry-after'), '3');
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'queue_full');
    for (const res of [await running, await queued]) {
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
  });

  it('a stream that fails after audio left aborts an audio body and ends an SSE call with an error event', async () => {
    const res = await fetch(`${server.url}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'failing', voice: 'alloy', input: INPUT, response_format: 'wav' }),
    });
    assert.equal(res.status, 200);
    await assert.rejects(res.arrayBuffer());
    const sse = await client.audio.speech.create({
      model: 'failing',
      voice: 'alloy',
      input: INPUT,
      response_format: 'pcm',
      stream_format: 'sse',
    });
    await assert.rejects(sseAudio(sse), (err: InstanceType<typeof OpenAI.APIError>) => {
      assert.equal(err.code, 'model_failed');
      return true;
    });
  });

  it('a SIGKILLed instance loses no stream that had not started sending: it runs again on the other instance, whole', async () => {
    const body = JSON.stringify({ model: 'patient', voice: 'alloy', input: 'Hi.', response_format: 'pcm' });
    const call = () => fetch(`${server.url}/v1/audio/speech`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const reference = Buffer.from(await (await call()).arrayBuffer());
    const pending = call();
    // The stream waits a second before its first chunk: find its instance meanwhile and kill it.
    let victim: number | undefined;
    const deadline = Date.now() + 900;
    while (victim === undefined && Date.now() < deadline) {
      const ready = await server.readiness();
      const instances = (ready.body.models as Record<string, { instances: { pid: number; runningStreams: number }[] }>).patient!.instances;
      victim = instances.find((i) => i.runningStreams > 0)?.pid;
      if (victim === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(victim !== undefined, 'the stream is running on an instance');
    process.kill(victim, 'SIGKILL');
    const res = await pending;
    assert.equal(res.status, 200, await res.clone().text());
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(reference), 'the whole audio, from the other instance');
  });

  // Last: it kills the slow model's only instance.
  it('a SIGKILLed instance ends its started SSE stream with an instance_crashed error event, not silence', async () => {
    const ready = await server.readiness();
    const [pid] = (ready.body.models as Record<string, { instances: { pid: number }[] }>).slow!.instances.map((i) => i.pid);
    const started = await client.audio.speech.create({
      model: 'slow',
      voice: 'alloy',
      input: INPUT,
      response_format: 'pcm',
      stream_format: 'sse',
    });
    const events = Stream.fromSSEResponse<{ type: string }>(started, new AbortController())[Symbol.asyncIterator]();
    assert.equal((await events.next()).value?.type, 'speech.audio.delta');
    process.kill(pid!, 'SIGKILL');
    await assert.rejects(
      (async () => {
        for (let next = await events.next(); next.done !== true; next = await events.next());
      })(),
      (err: InstanceType<typeof OpenAI.APIError>) => {
        assert.equal(err.code, 'instance_crashed');
        return true;
      },
    );
  });
});
