/**
 * Failure paths over a real socket, end to end (real server process, real test-engine hosts):
 * - clients that leave: a streamed transcription in pieces runs none of its pieces still queued;
 *   a diarization chunk still runs once and its retry gets the kept answer; a whole-file
 *   diarization call that leaves while queued is never run;
 * - requests that kill or wedge their instance fail with 503 `instance_crashed` or
 *   `instance_wedged` after their one retry, while the requests batched with them are answered;
 * - a diarization session id taken twice (`session_already_exists`), and one idle past its
 *   model's sessionIdleTimeoutMs (`session_expired`, counted; the id is free again).
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { noise, floatWav, pcm16Wav } from '../support/audio.js';
import { longRecording } from '../support/long-recording.js';
import { startServer, type RunningServer } from '../support/server-process.js';
import { waitFor } from '../support/wait-for.js';

/** How long the test diarizer takes per chunk: long enough to leave while it runs. */
const DIARIZE_ITEM_MS = 800;
const BATCH_TIMEOUT_MS = 2000;

let server: RunningServer;
before(async () => {
  server = await startServer({
    config: {
      gateway: { splitAboveMs: 30_000, pieceTargetMs: 15_000, voiceActivity: 'energy' },
      scheduler: { admissionPriorBatchMs: 200, admissionPriorMsPerAudioSecond: 1 },
      supervisor: { heartbeatIntervalMs: 200, restartInitialBackoffMs: 100, batchTimeoutMs: BATCH_TIMEOUT_MS },
      models: {
        // One piece at a time: a streamed recording's pieces wait in the scheduler's queue.
        pieces: {
          adapter: 'test',
          instances: 1,
          maxBatchSize: 1,
          maxRunningBatchesPerInstance: 1,
          options: { batchDelayMs: 300 },
        },
        poison: { adapter: 'test', instances: 2, maxBatchSize: 8, maxQueueDelayMs: 100 },
        // Sessions that expire after 400 ms without chunks.
        brief: { adapter: 'test', task: 'diarization', instances: 1, sessionIdleTimeoutMs: 400 },
        diar: {
          adapter: 'test',
          task: 'diarization',
          instances: 1,
          maxBatchSize: 8,
          maxRunningBatchesPerInstance: 1,
          options: { itemDelayMs: DIARIZE_ITEM_MS },
        },
      },
    },
  });
});
after(() => server.stop('SIGKILL'));

function form(fields: Record<string, string>, file: Buffer, name = 'a.wav'): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  f.append('file', new Blob([file]), name);
  return f;
}

type Envelope = { error: { code: string; type: string; message: string; param: string | null } };

/** 1 s of a loud square wave: one speaker for the test diarizer. */
function speakerChunk(amplitude = 3000): Buffer {
  const samples = new Int16Array(16_000);
  for (let i = 0; i < samples.length; i++) samples[i] = i % 2 === 0 ? amplitude : -amplitude;
  return pcm16Wav(samples);
}

describe('failure paths over a real socket', () => {
  it('a streamed transcription whose client leaves after the first delta runs none of its pieces still queued', async () => {
    const recording = longRecording({
      texts: ['we will meet at the station at nine in the morning', 'the quick brown fox jumped over the lazy dog'],
      durationS: 120,
      pauseS: 1,
      dir: mkdtempSync(join(tmpdir(), 'voxmux-failure-')),
    });
    const abort = new AbortController();
    const res = await fetch(`${server.url}/v1/audio/transcriptions`, {
      method: 'POST',
      body: form({ model: 'pieces', stream: 'true' }, recording.wav),
      signal: abort.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    assert.match(first, /transcript\.text\.delta/);
    abort.abort();
    // The piece running when the client left finishes; the queued ones are dropped, not run.
    await waitFor(
      async () =>
        (await server.metric('voxmux_scheduler_requests_queued', { model: 'pieces' })) === 0 &&
        (await server.metric('voxmux_scheduler_requests_running', { model: 'pieces' })) === 0,
      'the pieces queue to empty',
      5000,
    );
    const dropped = await server.metric('voxmux_scheduler_requests_total', { model: 'pieces', outcome: 'client_disconnected' });
    const ran = await server.metric('voxmux_instance_inferences_total', { model: 'pieces' });
    assert.ok(dropped >= 4, `${dropped} pieces dropped`);
    assert.ok(ran <= 3, `${ran} pieces ran`);
    // The model serves the next call at once.
    const next = await fetch(`${server.url}/v1/audio/transcriptions`, {
      method: 'POST',
      body: form({ model: 'pieces' }, floatWav(noise(8000, 1))),
    });
    assert.equal(next.status, 200, await next.text());
  });

  it('a diarization chunk whose client leaves still runs once, and its retry gets the kept answer', async () => {
    const created = await fetch(`${server.url}/v1/audio/diarization/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'diar', id: 'left-midway' }),
    });
    assert.equal(created.status, 201, await created.clone().text());
    const again = await fetch(`${server.url}/v1/audio/diarization/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'diar', id: 'left-midway' }),
    });
    assert.equal(again.status, 400);
    assert.equal(((await again.json()) as Envelope).error.code, 'session_already_exists');
    const chunkUrl = `${server.url}/v1/audio/diarization/sessions/left-midway/chunks`;
    const abort = new AbortController();
    const leaving = fetch(chunkUrl, { method: 'POST', body: form({ seq: '0' }, speakerChunk()), signal: abort.signal });
    await waitFor(
      async () => (await server.metric('voxmux_scheduler_sessions_active', { model: 'diar' })) === 1,
      'the chunk to reach the scheduler',
      3000,
    );
    abort.abort();
    await assert.rejects(leaving, { name: 'AbortError' });
    await waitFor(
      async () => (await server.metric('voxmux_instance_sequence_items_total', { model: 'diar' })) === 1,
      'the chunk to run',
      DIARIZE_ITEM_MS + 3000,
    );
    const retried = await fetch(chunkUrl, { method: 'POST', body: form({ seq: '0' }, speakerChunk()) });
    assert.equal(retried.status, 200, await retried.clone().text());
    const answer = (await retried.json()) as { seq: number; provisional: unknown[] };
    assert.equal(answer.seq, 0);
    assert.equal(answer.provisional.length, 1, JSON.stringify(answer));
    assert.equal(await server.metric('voxmux_instance_sequence_items_total', { model: 'diar' }), 1, 'the retry did not run again');
    const next = await fetch(chunkUrl, { method: 'POST', body: form({ seq: '1', is_last: 'true' }, speakerChunk()) });
    assert.equal(next.status, 200, await next.text());
    assert.equal(await server.metric('voxmux_instance_sequence_items_total', { model: 'diar' }), 2);
  });

  it('a session idle past its sessionIdleTimeoutMs answers 404 session_expired, counted, and its id is free again', async () => {
    const create = () =>
      fetch(`${server.url}/v1/audio/diarization/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'brief', id: 'brief-1' }),
      });
    const chunk = (seq: number) =>
      fetch(`${server.url}/v1/audio/diarization/sessions/brief-1/chunks`, {
        method: 'POST',
        body: form({ seq: String(seq) }, speakerChunk()),
      });
    const created = await create();
    assert.equal(((await created.json()) as { idle_timeout: number }).idle_timeout, 0.4);
    assert.equal((await chunk(0)).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 700));
    const late = await chunk(1);
    assert.equal(late.status, 404);
    assert.equal(((await late.json()) as Envelope).error.code, 'session_expired');
    assert.equal(await server.metric('voxmux_gateway_diarization_sessions_expired_total', { model: 'brief' }), 1);
    assert.equal((await create()).status, 201, 'the client starts again under its id');
    assert.equal((await chunk(0)).status, 200);
  });

  it('a whole-file diarization call whose client leaves while it is queued is never run', async () => {
    const before = await server.metric('voxmux_instance_sequence_items_total', { model: 'diar' });
    const sessionsBefore = await server.metric('voxmux_scheduler_sessions_active', { model: 'diar' });
    const running = fetch(`${server.url}/v1/audio/diarization`, { method: 'POST', body: form({ model: 'diar' }, speakerChunk()) });
    await waitFor(
      async () => (await server.metric('voxmux_scheduler_sessions_active', { model: 'diar' })) === sessionsBefore + 1,
      'the first call to reach the scheduler',
      3000,
    );
    // The first call holds the one instance (one batch in flight); the second waits behind it.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const abort = new AbortController();
    const leaving = fetch(`${server.url}/v1/audio/diarization`, {
      method: 'POST',
      body: form({ model: 'diar' }, speakerChunk(8000)),
      signal: abort.signal,
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    abort.abort();
    await assert.rejects(leaving, { name: 'AbortError' });
    const first = await running;
    assert.equal(first.status, 200, await first.clone().text());
    assert.equal(((await first.json()) as { speakers: number }).speakers, 1);
    await waitFor(
      async () => (await server.metric('voxmux_scheduler_sequence_items_total', { model: 'diar', outcome: 'client_disconnected' })) === 1,
      'the queued call to be dropped',
      3000,
    );
    await waitFor(
      async () => (await server.metric('voxmux_scheduler_sessions_active', { model: 'diar' })) === sessionsBefore,
      'both calls’ sessions to end',
      3000,
    );
    assert.equal(await server.metric('voxmux_instance_sequence_items_total', { model: 'diar' }), before + 1, 'only the first call ran');
  });

  for (const [command, verb, code, reason] of [
    ['crash', 'crashes', 'instance_crashed', 'exited'],
    ['hang', 'wedges', 'instance_wedged', 'wedged'],
  ] as const) {
    it(`a request that ${verb} its instance gets 503 ${code} after its one retry; the requests batched with it are answered`, async () => {
      const restartsBefore = await server.metric('voxmux_instance_restarts_total', { model: 'poison', reason });
      const call = (prompt?: string, seed = 1) =>
        fetch(`${server.url}/v1/audio/transcriptions`, {
          method: 'POST',
          body: form({ model: 'poison', ...(prompt === undefined ? {} : { prompt }) }, floatWav(noise(8000, seed))),
        });
      const [poisoned, ...others] = await Promise.all([call(`voxmux-test:${command}`), call(undefined, 2), call(undefined, 3)]);
      assert.equal(poisoned!.status, 503);
      assert.ok(poisoned!.headers.get('retry-after') !== null, 'Retry-After');
      const envelope = (await poisoned!.json()) as Envelope;
      assert.equal(envelope.error.code, code, JSON.stringify(envelope));
      for (const res of others) assert.equal(res.status, 200, await res.text());
      // Both instances took the request once each and were replaced.
      await waitFor(
        async () => (await server.metric('voxmux_instance_restarts_total', { model: 'poison', reason })) === restartsBefore + 2,
        `two ${reason} restarts`,
        5000,
      );
      await waitFor(async () => (await server.readiness()).status === 200, 'the instances to be back', 10_000);
      assert.equal((await call(undefined, 4)).status, 200);
    });
  }
});
