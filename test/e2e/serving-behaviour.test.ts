/**
 * The serving spine end to end with the test engine (a test double model host): real HTTP,
 * real processes. Batching, failover on SIGKILL, admission control, deadlines, auth, shutdown.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { connect } from 'node:net';
import { crc32 } from 'node:zlib';
import OpenAI, { toFile } from 'openai';
import { floatToPcm16 } from '../../src/gateway/audio/pcm16.js';
import { encodeWav } from '../../src/gateway/audio/wav-builder.js';
import { floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

const running: RunningServer[] = [];
after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
});

function testConfig(model: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    models: { echo: { adapter: 'test', aliases: ['whisper-1'], instances: 2, maxBatchSize: 8, maxQueueDelayMs: 20, ...model } },
    supervisor: { heartbeatIntervalMs: 200, restartInitialBackoffMs: 100 },
    ...extra,
  };
}

async function start(config: unknown, env: Record<string, string> = {}): Promise<RunningServer> {
  const server = await startServer({ config, env });
  running.push(server);
  return server;
}

/** The test engine's echo of float audio sent as a float WAV: the gateway hands it on as 16-bit PCM. */
function expected(samples: Float32Array): string {
  const pcm = floatToPcm16(samples);
  return `echo samples=${pcm.length} crc=${crc32(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength))
    .toString(16)
    .padStart(8, '0')}`;
}

async function post(url: string, body: FormData, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/v1/audio/transcriptions`, { method: 'POST', body, headers });
  const text = await res.text();
  let json: { text?: string; error?: { code: string; message: string; type: string; param: string | null } } = {};
  try {
    json = JSON.parse(text) as typeof json;
  } catch {
    // text response formats
  }
  return { status: res.status, headers: res.headers, text, json };
}

function form(fields: Record<string, string>, file?: Blob, name = 'audio.wav'): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  if (file !== undefined) f.append('file', file, name);
  return f;
}

describe('serving spine with the test engine', () => {
  it('batches 32 concurrent requests over 2 instances and answers each with its own transcript', async () => {
    const server = await start(testConfig({ options: { batchDelayMs: 50 } }));
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const inputs = Array.from({ length: 32 }, (_, i) => noise(8000 + i * 160, i + 1));
    const results = await Promise.all(
      inputs.map(
        async (samples) =>
          (await client.audio.transcriptions.create({ file: await toFile(floatWav(samples), 'a.wav'), model: 'whisper-1' })).text,
      ),
    );
    results.forEach((text, i) => assert.equal(text, expected(inputs[i]!)));
    const inferences = await server.metric('voxmux_instance_inferences_total', { model: 'echo' });
    const executions = await server.metric('voxmux_instance_executions_total', { model: 'echo' });
    assert.equal(inferences, 32);
    assert.ok(inferences / executions > 1, `mean batch size ${inferences / executions}`);
    const batchCount = await server.metric('voxmux_scheduler_batch_size_count', { model: 'echo' });
    assert.equal(batchCount, executions);
    // The engine's own counts reach /metrics with the next heartbeats (every 200 ms here).
    const engineRequests = () => server.metric('voxmux_instance_engine_events_total', { model: 'echo', name: 'requests' });
    const until = Date.now() + 10_000;
    while ((await engineRequests()) < 32 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(await engineRequests(), 32);
  });

  it('answers each of many overlapping 16-bit uploads with its own audio while their memory is reused', async () => {
    // 16 kHz 16-bit WAV is the decoder's zero-copy path: the samples batched and written to the
    // instance are views of the upload's pooled memory, which later uploads reuse.
    const server = await start(testConfig({ options: { batchDelayMs: 30 } }));
    const uploadsPerRound = 24;
    for (let round = 0; round < 3; round++) {
      const wavs = Array.from({ length: uploadsPerRound }, (_, i) =>
        Buffer.from(encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [noise(16000 + 64 * i, 1000 * round + i + 1)] })),
      );
      const answers = await Promise.all(wavs.map((wav) => post(server.url, form({ model: 'echo' }, new Blob([wav])))));
      answers.forEach((answer, i) => {
        const pcm = wavs[i]!.subarray(44);
        const echo = `echo samples=${pcm.length / 2} crc=${crc32(pcm).toString(16).padStart(8, '0')}`;
        assert.equal(answer.json.text, echo, `round ${round}, upload ${i}: ${answer.text}`);
      });
    }
    // Each upload (about 33 KB) takes a 64 KiB buffer: later rounds reuse the first round's.
    const allocated = await server.metric('voxmux_gateway_upload_allocated_bytes_total');
    assert.ok(allocated > 0 && allocated <= uploadsPerRound * 64 * 1024, `allocated ${allocated} bytes for ${3 * uploadsPerRound} uploads`);
  });

  it('answers diarized_json 400 no_diarization_model when the server has no diarization model', async () => {
    const server = await start(testConfig({ instances: 1 }));
    const res = await post(server.url, form({ model: 'echo', response_format: 'diarized_json' }, new Blob([floatWav(noise(8000, 5))])));
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(
      [res.json.error?.code, res.json.error?.type, res.json.error?.param],
      ['no_diarization_model', 'invalid_request_error', 'response_format'],
    );
  });

  it('loses nothing when an instance is killed with SIGKILL during a 50-request burst', async () => {
    const server = await start(testConfig({ maxBatchSize: 4, options: { batchDelayMs: 150 } }));
    const before = await server.readiness();
    const pids = (before.body.models as Record<string, { instances: { pid: number }[] }>).echo!.instances.map((i) => i.pid);
    const inputs = Array.from({ length: 50 }, (_, i) => noise(4000 + i, 100 + i));
    const calls = inputs.map((samples) => post(server.url, form({ model: 'echo' }, new Blob([floatWav(samples)]))));
    await new Promise((r) => setTimeout(r, 400));
    process.kill(pids[0]!, 'SIGKILL');
    // /health/ready shows what happened meanwhile: the killed instance restarting, the other serving.
    let seen: { state: string; restarts: number }[] = [];
    for (let i = 0; i < 100; i++) {
      const during = await server.readiness();
      seen = (during.body.models as Record<string, { instances: { state: string; restarts: number }[] }>).echo!.instances;
      if (seen.some((s) => s.restarts === 1)) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(
      seen.some((s) => s.restarts === 1 && s.state !== 'ready'),
      JSON.stringify(seen),
    );
    const answers = await Promise.all(calls);
    answers.forEach((a, i) => assert.equal(a.json.text, expected(inputs[i]!), `request ${i}: ${a.text}`));
    let after: Awaited<ReturnType<RunningServer['readiness']>> | undefined;
    for (let i = 0; i < 100; i++) {
      after = await server.readiness();
      const inst = (after.body.models as Record<string, { instances: { state: string; pid: number }[] }>).echo!.instances;
      if (after.status === 200 && inst.every((x) => x.state === 'ready')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const instances = (
      after!.body.models as Record<string, { instances: { pid: number; restarts: number; lastEnd: { signal: string } | null }[] }>
    ).echo!.instances;
    const replaced = instances.find((x) => x.restarts === 1)!;
    assert.ok(replaced, JSON.stringify(instances));
    assert.equal(replaced.lastEnd?.signal, 'SIGKILL');
    assert.ok(!pids.includes(replaced.pid));
    assert.ok((await server.metric('voxmux_scheduler_retries_total', { model: 'echo' })) >= 1);
  });

  it('answers 429 queue_full with Retry-After when the queue is full, and never hangs', async () => {
    const server = await start(
      testConfig(
        { instances: 1, maxBatchSize: 1, options: { batchDelayMs: 300 } },
        { scheduler: { maxQueuedRequests: 3, retryAfterMs: 2000 } },
      ),
    );
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post(server.url, form({ model: 'echo' }, new Blob([floatWav(noise(1600, i))])))),
    );
    const rejected = answers.filter((a) => a.status === 429);
    assert.ok(rejected.length >= 5, answers.map((a) => a.status).join(','));
    for (const a of rejected) {
      assert.equal(a.json.error?.code, 'queue_full');
      assert.equal(a.json.error?.type, 'rate_limit_error');
      assert.equal(a.headers.get('retry-after'), '2');
    }
    assert.ok(answers.filter((a) => a.status === 200).length >= 4);
  });

  it('answers 504 when a request outlives its deadline, and 401 without a valid key', async () => {
    const server = await start(
      testConfig({ instances: 1, options: { batchDelayMs: 1500 } }, { gateway: { requestTimeoutMs: 300, apiKeys: ['secret-key-1'] } }),
    );
    const wav = new Blob([floatWav(noise(1600, 1))]);
    assert.equal((await post(server.url, form({ model: 'echo' }, wav))).json.error?.code, 'missing_api_key');
    const wrong = await post(server.url, form({ model: 'echo' }, wav), { authorization: 'Bearer nope-nope-nope' });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.json.error?.code, 'invalid_api_key');
    const slow = await post(server.url, form({ model: 'echo' }, wav), { authorization: 'Bearer secret-key-1' });
    assert.equal(slow.status, 504);
    assert.equal(slow.json.error?.code, 'deadline_exceeded');
    assert.equal((await fetch(`${server.url}/health/live`)).status, 200);
    assert.equal((await fetch(`${server.url}/metrics`)).status, 200);
    assert.equal((await fetch(`${server.url}/v1/models`)).status, 401);
  });

  it('drops the queued request of a client that disconnected', async () => {
    const server = await start(testConfig({ instances: 1, maxBatchSize: 1, options: { batchDelayMs: 600 } }));
    const first = post(server.url, form({ model: 'echo' }, new Blob([floatWav(noise(1600, 1))])));
    await new Promise((r) => setTimeout(r, 100));
    const controller = new AbortController();
    const second = fetch(`${server.url}/v1/audio/transcriptions`, {
      method: 'POST',
      body: form({ model: 'echo' }, new Blob([floatWav(noise(1600, 2))])),
      signal: controller.signal,
    });
    await new Promise((r) => setTimeout(r, 150));
    controller.abort();
    await assert.rejects(second);
    assert.equal((await first).status, 200);
    for (let i = 0; i < 50 && (await server.metric('voxmux_scheduler_requests_total', { outcome: 'client_disconnected' })) === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(await server.metric('voxmux_scheduler_requests_total', { outcome: 'client_disconnected' }), 1);
    assert.equal(await server.metric('voxmux_instance_inferences_total', { model: 'echo' }), 1);
  });

  it('shrugs off a client that leaves halfway through its upload, and reuses nothing of it', async () => {
    const server = await start(testConfig({ instances: 1 }));
    const wav = Buffer.from(encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [noise(16000 * 10, 5)] }));
    const boundary = 'voxmux-e2e-boundary';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\necho\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`,
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(
      `POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\n` +
        `Content-Length: ${head.length + wav.length + tail.length}\r\n\r\n`,
    );
    socket.write(head);
    socket.write(wav.subarray(0, wav.length / 2));
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    // The server still answers whole uploads, each with its own audio.
    for (let i = 0; i < 3; i++) {
      const whole = Buffer.from(encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [noise(16000 * 10, 6 + i)] }));
      const answer = await post(server.url, form({ model: 'echo' }, new Blob([whole])));
      const pcm = whole.subarray(44);
      assert.equal(answer.json.text, `echo samples=${pcm.length / 2} crc=${crc32(pcm).toString(16).padStart(8, '0')}`);
    }
    assert.equal(await server.metric('voxmux_gateway_calls_total', { endpoint: '/v1/audio/transcriptions', outcome: 'internal' }), 0);
    // The abandoned upload's memory went to the garbage collector, not back to the pool: the
    // pool holds only the one buffer the whole uploads took turns with.
    assert.equal(await server.metric('voxmux_gateway_upload_pool_bytes'), 512 * 1024);
  });

  it('drains on SIGTERM: a running call completes, then the process exits 0', async () => {
    const server = await start(testConfig({ instances: 1, options: { batchDelayMs: 500 } }));
    const samples = noise(1600, 9);
    const call = post(server.url, form({ model: 'echo' }, new Blob([floatWav(samples)])));
    await new Promise((r) => setTimeout(r, 150));
    const stopped = server.stop('SIGTERM');
    const answer = await call;
    assert.equal(answer.json.text, expected(samples));
    assert.equal(await stopped, 0);
  });

  it('drains on SIGTERM without waiting for connections that carry no request (a spare, an idle keep-alive)', async () => {
    const server = await start(testConfig({ instances: 1 }));
    const port = Number(new URL(server.url).port);
    // A connection that never sends a request: Node counts it as neither idle nor done, and the
    // listener's close alone would wait for its headers timeout (about a minute).
    const spare = connect(port, '127.0.0.1');
    await new Promise((resolve) => spare.once('connect', resolve));
    spare.resume();
    const spareClosed = new Promise((resolve) => spare.once('close', resolve));
    const startedMs = Date.now();
    assert.equal(await server.stop('SIGTERM'), 0);
    await spareClosed;
    assert.ok(Date.now() - startedMs < 10_000, `drained in ${Date.now() - startedMs} ms`);
  });
});
