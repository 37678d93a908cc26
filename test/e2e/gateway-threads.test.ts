/**
 * Gateway threads (gateway.threads) end to end: real processes, real HTTP on one shared port. With
 * 4 threads on a 2-core machine: calls spread over the threads and each answer is its own; the
 * metrics count every thread's calls once; 429 queue_full still comes from the one scheduler; a
 * SIGKILLed instance loses nothing; a drain finishes what the threads hold. With the CPU engines:
 * streamed speech, whole-file diarization, diarization sessions and a realtime call (both passed on
 * to the main thread) through a 2-thread server.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { crc32 } from 'node:zlib';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { WebSocket } from 'ws';
import { floatToPcm16 } from '../../src/gateway/audio/pcm16.js';
import { fliteWav, floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';
import { waitFor } from '../support/wait-for.js';

const running: RunningServer[] = [];
after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
});

async function start(config: unknown): Promise<RunningServer> {
  const server = await startServer({ config });
  running.push(server);
  return server;
}

function echoConfig(model: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    gateway: { threads: 4 },
    models: { echo: { adapter: 'test', aliases: ['whisper-1'], instances: 2, maxBatchSize: 8, maxQueueDelayMs: 20, ...model } },
    supervisor: { heartbeatIntervalMs: 200, restartInitialBackoffMs: 100 },
    ...extra,
  };
}

function expected(samples: Float32Array): string {
  const pcm = floatToPcm16(samples);
  const crc = crc32(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength));
  return `echo samples=${pcm.length} crc=${crc.toString(16).padStart(8, '0')}`;
}

/** One call on a connection of its own, so that the kernel hands each to whichever thread accepts first. */
async function transcribe(url: string, samples: Float32Array) {
  const body = new FormData();
  body.append('model', 'echo');
  body.append('file', new Blob([floatWav(samples)]), 'a.wav');
  const res = await fetch(`${url}/v1/audio/transcriptions`, { method: 'POST', body, headers: { connection: 'close' } });
  const json = (await res.json()) as { text?: string; error?: { code: string; type: string } };
  return { status: res.status, retryAfter: res.headers.get('retry-after'), json };
}

/** Which gateway threads wrote a 'call completed' line for the endpoint (the main thread's lines have no thread). */
function threadsThatAnswered(server: RunningServer, url: string): Set<string> {
  const lines = server.logs.filter((l) => l.msg === 'call completed' && l.url === url);
  return new Set(lines.map((l) => String(l.thread ?? 'main')));
}

describe('gateway threads', () => {
  it('spread 48 calls over the threads, answer each with its own transcript and count each call once', async () => {
    const server = await start(echoConfig({ options: { batchDelayMs: 30 } }));
    const inputs = Array.from({ length: 48 }, (_, i) => noise(6000 + i * 40, i + 1));
    const answers = await Promise.all(inputs.map((samples) => transcribe(server.url, samples)));
    answers.forEach((a, i) => assert.equal(a.json.text, expected(inputs[i]!), `call ${i}: ${JSON.stringify(a.json)}`));
    assert.equal(await server.metric('voxmux_gateway_calls_total', { endpoint: '/v1/audio/transcriptions', outcome: 'ok' }), 48);
    assert.equal(await server.metric('voxmux_scheduler_requests_total', { model: 'echo', outcome: 'ok' }), 48);
    const answered = threadsThatAnswered(server, '/v1/audio/transcriptions');
    assert.ok([...answered].filter((t) => t.startsWith('gateway-')).length >= 2, `answered by ${[...answered].join(', ')}`);
    // Each thread reports its own loop; the process metrics appear once.
    const text = await (await fetch(`${server.url}/metrics`)).text();
    for (const thread of ['gateway-1', 'gateway-2', 'gateway-3', 'gateway-4']) {
      assert.match(text, new RegExp(`voxmux_gateway_thread_busy_seconds_total\\{thread="${thread}"\\} `));
    }
    assert.equal(text.split('\n').filter((l) => l.startsWith('voxmux_process_process_cpu_seconds_total ')).length, 1);
  });

  it('answers 429 queue_full from the one scheduler, whichever thread takes the call', async () => {
    const server = await start(
      echoConfig(
        { instances: 1, maxBatchSize: 1, options: { batchDelayMs: 300 } },
        { scheduler: { maxQueuedRequests: 3, retryAfterMs: 2000 } },
      ),
    );
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => transcribe(server.url, noise(1600, i))));
    const rejected = answers.filter((a) => a.status === 429);
    const served = answers.filter((a) => a.status === 200);
    // One running, three queued: the rest is over the model's queue limit, across all threads.
    assert.ok(rejected.length >= 6, answers.map((a) => a.status).join(','));
    assert.equal(rejected.length + served.length, 12, answers.map((a) => a.status).join(','));
    for (const a of rejected) {
      assert.equal(a.json.error?.code, 'queue_full');
      assert.equal(a.json.error?.type, 'rate_limit_error');
      assert.equal(a.retryAfter, '2');
    }
    assert.equal(
      await server.metric('voxmux_gateway_calls_total', { endpoint: '/v1/audio/transcriptions', outcome: 'resource_exhausted' }),
      rejected.length,
    );
  });

  it('loses nothing when an instance is killed with SIGKILL during a 40-call burst', async () => {
    const server = await start(echoConfig({ maxBatchSize: 4, options: { batchDelayMs: 150 } }));
    const before = await server.readiness();
    const pids = (before.body.models as Record<string, { instances: { pid: number }[] }>).echo!.instances.map((i) => i.pid);
    const inputs = Array.from({ length: 40 }, (_, i) => noise(4000 + i, 100 + i));
    const calls = inputs.map((samples) => transcribe(server.url, samples));
    await new Promise((r) => setTimeout(r, 400));
    process.kill(pids[0]!, 'SIGKILL');
    const answers = await Promise.all(calls);
    answers.forEach((a, i) => assert.equal(a.json.text, expected(inputs[i]!), `call ${i}: ${JSON.stringify(a.json)}`));
    assert.ok((await server.metric('voxmux_scheduler_retries_total', { model: 'echo' })) >= 1);
  });

  it('drains on SIGTERM: calls the threads hold finish, new ones get 503, the process exits 0', async () => {
    const server = await start(echoConfig({ instances: 1, options: { batchDelayMs: 600 } }));
    const inputs = Array.from({ length: 8 }, (_, i) => noise(3000 + i, 200 + i));
    const calls = inputs.map((samples) => transcribe(server.url, samples));
    // Every call is held by the server (queued or running; each batch takes 600 ms) before the drain:
    // a fixed wait let a slow machine send SIGTERM before the last calls had arrived.
    const held = async () =>
      (await server.metric('voxmux_scheduler_requests_queued', { model: 'echo' })) +
        (await server.metric('voxmux_scheduler_requests_running', { model: 'echo' })) +
        (await server.metric('voxmux_scheduler_requests_total', { model: 'echo', outcome: 'ok' })) >=
      inputs.length;
    await waitFor(held, 'every call held by the server');
    const exited = server.stop('SIGTERM');
    await new Promise((r) => setTimeout(r, 100));
    const late = await transcribe(server.url, noise(1600, 9)).catch(() => undefined);
    if (late !== undefined) assert.equal(late.status, 503);
    const answers = await Promise.all(calls);
    answers.forEach((a, i) => assert.equal(a.json.text, expected(inputs[i]!), `call ${i}: ${JSON.stringify(a.json)}`));
    assert.equal(await exited, 0);
  });

  it('serves streamed speech, diarization (whole files and sessions) and a realtime call with the CPU engines', async () => {
    const server = await start({ gateway: { threads: 2 } });
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-threads-'));
    const wav = readFileSync(fliteWav('the quick brown fox jumps over the lazy dog', join(dir, 'a.wav')));
    // Speech: chunked, the first bytes before the end.
    const speech = await fetch(`${server.url}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ model: 'tts-1', voice: 'alloy', input: 'Hello there. This is a second sentence.', response_format: 'pcm' }),
    });
    assert.equal(speech.status, 200);
    const pcm = Buffer.from(await speech.arrayBuffer());
    assert.ok(pcm.length > 24_000, `${pcm.length} bytes of speech`);
    // Whole-file diarization (in the threads) and a session (passed on to the main thread), several times.
    for (let i = 0; i < 4; i++) {
      const whole = new FormData();
      whole.append('model', 'voxmux-diarize-cpu');
      whole.append('file', new Blob([wav]), 'a.wav');
      const res = await fetch(`${server.url}/v1/audio/diarization`, { method: 'POST', body: whole, headers: { connection: 'close' } });
      assert.equal(res.status, 200);
      assert.ok(((await res.json()) as { segments: unknown[] }).segments.length >= 1);
    }
    const id = 'threads-session-1';
    const created = await fetch(`${server.url}/v1/audio/diarization/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ model: 'voxmux-diarize-cpu', id }),
    });
    assert.equal(created.status, 201);
    for (let seq = 0; seq < 3; seq++) {
      const chunk = new FormData();
      chunk.append('seq', String(seq));
      chunk.append('file', new Blob([wav]), 'a.wav');
      const res = await fetch(`${server.url}/v1/audio/diarization/sessions/${id}/chunks`, {
        method: 'POST',
        body: chunk,
        headers: { connection: 'close' },
      });
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(((await res.json()) as { seq: number }).seq, seq);
    }
    const gap = new FormData();
    gap.append('seq', '5');
    gap.append('file', new Blob([wav]), 'a.wav');
    const gapAnswer = await fetch(`${server.url}/v1/audio/diarization/sessions/${id}/chunks`, { method: 'POST', body: gap });
    assert.equal(gapAnswer.status, 400);
    assert.equal(((await gapAnswer.json()) as { error: { code: string } }).error.code, 'sequence_gap');
    const closed = await fetch(`${server.url}/v1/audio/diarization/sessions/${id}`, { method: 'DELETE', headers: { connection: 'close' } });
    const timeline = (await closed.json()) as { status: string; chunks: number };
    assert.deepEqual([timeline.status, timeline.chunks], ['closed', 3]);
    assert.equal((await fetch(`${server.url}/v1/audio/diarization/sessions/${id}`)).status, 404);
    // Counted once each, by the main thread.
    assert.equal(await server.metric('voxmux_gateway_calls_total', { endpoint: '/v1/audio/diarization/sessions/:id/chunks' }), 4);
    // A realtime call: the upgrade is piped to the main thread, which runs the session.
    const socket = new WebSocket(`${server.url.replace('http', 'ws')}/v1/realtime?model=voxmux-realtime&intent=transcription`);
    const first = await new Promise<{ type: string }>((resolve, reject) => {
      socket.once('message', (data) => resolve(JSON.parse(String(data)) as { type: string }));
      socket.once('error', reject);
    });
    assert.equal(first.type, 'session.created');
    socket.close();
  });
});
