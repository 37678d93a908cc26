/**
 * The request log end to end: the built server with the test engine writes one line per
 * transcription and speech call to requestLog.path, with the fields of src/api/request-log.ts,
 * and rotates the file at requestLog.maxBytes.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { parseRequestLogLine, type RequestLogLine } from '../../src/api/request-log.js';
import { floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';
import { waitFor } from '../support/wait-for.js';

const running: RunningServer[] = [];

/** A server of these models writing its request log into a fresh folder (`path`), stopped after the tests. */
async function startLoggingServer(models: Record<string, object>, requestLog: Record<string, number> = {}) {
  const path = join(mkdtempSync(join(tmpdir(), 'voxmux-request-log-e2e-')), 'requests.jsonl');
  const server = await startServer({
    config: { requestLog: { path, ...requestLog }, supervisor: { heartbeatIntervalMs: 200 }, models },
  });
  running.push(server);
  return { server, path };
}
after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
});

function readLog(path: string): RequestLogLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const line = parseRequestLogLine(l);
      assert.ok(line !== undefined, `not a request log line: ${l}`);
      return line;
    });
}

describe('request log (#20)', () => {
  it('writes one line per call with its model, kind, audio, timings, status and code, and rotates at maxBytes', async () => {
    // About 240 bytes a line: four lines a file, so seven calls need a rotation.
    const { server, path } = await startLoggingServer(
      {
        echo: { adapter: 'test', aliases: ['whisper-1'], instances: 1 },
        voice: { adapter: 'test', task: 'speech', aliases: ['tts-1'], instances: 1, voiceAliases: { alloy: 'tone-a' } },
      },
      { maxBytes: 1024, keepFiles: 5 },
    );
    const url = server.url;
    const transcribe = async (model: string, seconds: number) => {
      const form = new FormData();
      form.append('model', model);
      form.append('prompt', 'a private prompt');
      form.append('file', new Blob([floatWav(noise(16_000 * seconds, 7))]), 'a.wav');
      const res = await fetch(`${url}/v1/audio/transcriptions`, { method: 'POST', body: form });
      await res.text();
      return res.status;
    };
    const speak = async (model: string, input: string) => {
      const res = await fetch(`${url}/v1/audio/speech`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, voice: 'alloy', input, response_format: 'pcm' }),
      });
      const bytes = (await res.arrayBuffer()).byteLength;
      return { status: res.status, seconds: bytes / 2 / 24_000 };
    };
    assert.equal(await transcribe('whisper-1', 1), 200);
    assert.equal(await transcribe('echo', 2), 200);
    const spoken = await speak('tts-1', 'Hello there.');
    assert.equal(spoken.status, 200);
    assert.equal((await speak('voice', 'Second call.')).status, 200);
    assert.equal(await transcribe('missing', 1), 404);
    assert.equal((await speak('missing', 'Hi.')).status, 404);
    assert.equal(await transcribe('echo', 3), 200);
    await fetch(`${url}/health/ready`);
    // SIGTERM drains and closes the log, so every line is on disk once the process has exited.
    assert.equal(await server.stop('SIGTERM'), 0);

    assert.ok(existsSync(`${path}.1`), 'the log was not rotated');
    const files = [5, 4, 3, 2, 1].map((n) => `${path}.${n}`).filter((f) => existsSync(f));
    files.push(path);
    const all = files.flatMap(readLog);
    for (const file of files) assert.ok(readFileSync(file).length <= 1024, `${file} is over maxBytes`);
    assert.ok(readLog(path).length >= 1);
    assert.deepEqual(
      all.map((l) => [l.kind, l.model, l.status, l.code]),
      [
        ['transcription', 'echo', 200, null],
        ['transcription', 'echo', 200, null],
        ['speech', 'voice', 200, null],
        ['speech', 'voice', 200, null],
        ['transcription', 'missing', 404, 'model_not_found'],
        ['speech', 'missing', 404, 'model_not_found'],
        ['transcription', 'echo', 200, null],
      ],
    );
    assert.deepEqual(
      all.map((l) => l.audioInSeconds),
      [1, 2, 0, 0, 0, 0, 3],
    );
    assert.ok(Math.abs(all[2]!.audioOutSeconds - spoken.seconds) < 0.001, `${all[2]!.audioOutSeconds} vs ${spoken.seconds}`);
    for (const line of all) {
      const isServed = line.status === 200;
      assert.equal(line.instanceId === null, !isServed, JSON.stringify(line));
      assert.equal(line.queueMs === null, !isServed);
      assert.equal(line.serviceMs === null, !isServed);
      // The test engine runs on CPU.
      assert.equal(line.gpu, null);
      assert.equal(line.gpuSeconds, 0);
      assert.ok(line.durationMs >= (line.serviceMs ?? 0));
      assert.ok(Math.abs(Date.parse(line.time) - Date.now()) < 120_000);
    }
    assert.doesNotMatch(files.map((f) => readFileSync(f, 'utf8')).join(''), /private prompt|Hello there|Second call/);
  });

  it('records a speech call whose client left after the first audio, with client_disconnected and the audio made until then', async () => {
    const { server, path } = await startLoggingServer({
      slow: { adapter: 'test', task: 'speech', instances: 1, voiceAliases: { alloy: 'tone-a' }, options: { speechChunkDelayMs: 300 } },
    });
    const abort = new AbortController();
    const res = await fetch(`${server.url}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'slow', voice: 'alloy', input: 'One. Two. Three. Four. Five. Six.', response_format: 'pcm' }),
      signal: abort.signal,
    });
    assert.equal(res.status, 200);
    await res.body!.getReader().read();
    abort.abort();
    const hasLine = () => {
      try {
        return readLog(path).length === 1;
      } catch {
        return false; // a line being written
      }
    };
    await waitFor(hasLine, 'the request log line of the call that was left');
    const [line] = readLog(path);
    assert.equal(line!.model, 'slow');
    assert.equal(line!.status, 200);
    assert.equal(line!.code, 'client_disconnected');
    assert.equal(line!.instanceId, 'slow-0-g1');
    // The six sentences make about 5 s of audio; the client left after the first.
    assert.ok(line!.audioOutSeconds > 0 && line!.audioOutSeconds < 4, `${line!.audioOutSeconds} s`);
  });

  it('records diarization files and session chunks, and a realtime call when it ends, with the caller audio it received', async () => {
    const { server, path } = await startLoggingServer({
      echo: { adapter: 'test', instances: 1 },
      voice: { adapter: 'test', task: 'speech', instances: 1, voiceAliases: { alloy: 'tone-a' } },
      diar: { adapter: 'test', task: 'diarization', instances: 1 },
    });
    const url = server.url;
    const form = (fields: Record<string, string>, seconds: number) => {
      const body = new FormData();
      for (const [k, v] of Object.entries(fields)) body.append(k, v);
      body.append('file', new Blob([floatWav(noise(16_000 * seconds, 3))]), 'a.wav');
      return body;
    };
    const whole = await fetch(`${url}/v1/audio/diarization`, { method: 'POST', body: form({ model: 'diar' }, 2) });
    assert.equal(whole.status, 200, await whole.text());
    const created = await fetch(`${url}/v1/audio/diarization/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'diar', id: 'rec-1' }),
    });
    assert.equal(created.status, 201);
    for (const seq of [0, 1]) {
      const chunk = await fetch(`${url}/v1/audio/diarization/sessions/rec-1/chunks`, {
        method: 'POST',
        body: form({ seq: String(seq) }, 1),
      });
      assert.equal(chunk.status, 200, await chunk.text());
    }
    // A realtime call: 1.5 s of caller audio (24 kHz pcm16), committed by the client, then it hangs up.
    const socket = new WebSocket(`${url.replace('http', 'ws')}/v1/realtime?model=rt-test`);
    const events: string[] = [];
    socket.on('message', (data) => events.push((JSON.parse(String(data)) as { type: string }).type));
    await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
    await waitFor(() => events.includes('session.created'), 'session.created');
    socket.send(JSON.stringify({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } }));
    await waitFor(() => events.includes('session.updated'), 'session.updated');
    for (let i = 0; i < 15; i++)
      socket.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: Buffer.alloc(4800).toString('base64') }));
    socket.send(JSON.stringify({ type: 'input_audio_buffer.clear' }));
    await waitFor(() => events.includes('input_audio_buffer.cleared'), `input_audio_buffer.cleared among ${events.join(', ')}`);
    socket.close();
    for (let i = 0; i < 100; i++) {
      const metrics = await (await fetch(`${url}/metrics`)).text();
      if (/^voxmux_realtime_sessions_active 0$/m.test(metrics)) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(await server.stop('SIGTERM'), 0);

    const lines = readLog(path);
    const diarization = lines.filter((l) => l.kind === 'diarization');
    assert.deepEqual(
      diarization.map((l) => [l.model, l.status, Math.round(l.audioInSeconds)]),
      [
        ['diar', 200, 2],
        ['diar', 200, 1],
        ['diar', 200, 1],
      ],
    );
    for (const l of diarization) {
      assert.equal(l.instanceId, 'diar-0-g1');
      assert.ok(l.serviceMs !== null && l.queueMs !== null, JSON.stringify(l));
    }
    const call = lines.find((l) => l.kind === 'realtime')!;
    assert.deepEqual([call.model, call.status, call.code, call.instanceId, call.gpuSeconds], ['rt-test', 101, null, null, 0]);
    assert.ok(Math.abs(call.audioInSeconds - 1.5) < 0.05, `${call.audioInSeconds} s of caller audio`);
    assert.ok(call.durationMs > 0 && call.audioOutSeconds === 0);
  });
});
