/**
 * Diarization sessions end to end (#17): the server as app/build-server.ts wires it, over three
 * real Python hosts running the `test` adapter's diarization mode (a speaker per loudness level,
 * so every timeline is known in advance and identical however the chunks were batched or moved).
 *
 * 40 concurrent sessions send their chunks in order; every session also retries one of its chunk
 * numbers. The same 40 recordings run twice: undisturbed, then with one instance SIGKILLed midway.
 * Every final timeline must equal the undisturbed run's, each retry must get its first answer
 * without running again, and the scheduler must count each chunk exactly once.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import OpenAI, { toFile } from 'openai';
import type { TranscriptionDiarized } from 'openai/resources/audio/transcriptions';
import { runBenchCli } from '../../bench/cli/cli.js';
import type { DiarizationChunkResult, DiarizationSessionCreated, DiarizationSessionTimeline } from '../../src/api/diarization.js';
import { buildServer, type Server } from '../../src/app/build-server.js';
import { systemClock } from '../../src/core/clock.js';
import { readProcessEnvironment } from '../../src/config/env.js';
import { loadConfig } from '../../src/config/load.js';
import { spawnInstance } from '../../src/supervisor/index.js';
import { pcm16Wav } from '../support/audio.js';
import { HOST_PATH } from '../support/supervisor-fixture.js';
import { silentLogger } from '../support/test-logger.js';
import { waitFor } from '../support/wait-for.js';

const SESSIONS = 40;
const CHUNKS = 5;
const CHUNK_SAMPLES = 16_000;
/** Loudness levels of the test diarizer: silence and three speakers. */
const AMPLITUDES = [0, 3000, 8000, 13000];

let server: Server;
let url: string;
before(async () => {
  const config = loadConfig({
    file: {
      models: {
        diar: { adapter: 'test', task: 'diarization', instances: 3, maxBatchSize: 8, options: { itemDelayMs: 3 } },
        echo: { adapter: 'test', aliases: ['gpt-4o-transcribe-diarize'], instances: 1, diarizationModel: 'diar' },
      },
      supervisor: { hostPath: HOST_PATH, heartbeatIntervalMs: 100, restartInitialBackoffMs: 50, gpus: [] },
      gateway: { voiceActivity: 'energy', maxDiarizationChunkMs: 5000 },
    },
  });
  server = await buildServer(config, { log: silentLogger(), clock: systemClock, spawn: spawnInstance, baseEnv: readProcessEnvironment() });
  await server.startInstances();
  url = await server.app.listen({ port: 0, host: '127.0.0.1' });
});
after(() => server.destroy());

/** Chunk `c` of recording `s`: four quarter seconds, each of a loudness chosen by (s, c, quarter). */
function chunkWav(s: number, c: number): Buffer {
  const samples = new Int16Array(CHUNK_SAMPLES);
  for (let q = 0; q < 4; q++) {
    const amplitude = AMPLITUDES[(s * 7 + c * 3 + q * (s % 3 === 0 ? 1 : 2)) % AMPLITUDES.length]!;
    for (let i = q * 4000; i < (q + 1) * 4000; i++) samples[i] = i % 2 === 0 ? amplitude : -amplitude;
  }
  return pcm16Wav(samples);
}

function multipart(fields: Record<string, string>, file: Buffer): { payload: Buffer; headers: Record<string, string> } {
  const boundary = 'voxmuxsessions';
  const head = Object.entries(fields)
    .map(([name, value]) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
    .join('');
  const payload = Buffer.concat([
    Buffer.from(`${head}--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="c.wav"\r\ncontent-type: audio/wav\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

async function sendChunk(id: string, s: number, c: number): Promise<DiarizationChunkResult> {
  const res = await server.app.inject({
    method: 'POST',
    url: `/v1/audio/diarization/sessions/${id}/chunks`,
    ...multipart({ seq: String(c), ...(c === CHUNKS - 1 ? { is_last: 'true' } : {}) }, chunkWav(s, c)),
  });
  assert.equal(res.statusCode, 200, `${id} chunk ${c}: ${res.body}`);
  return res.json<DiarizationChunkResult>();
}

/** One recording as a session: create, chunks in order (one retried), close; its final timeline. */
async function runSession(prefix: string, s: number, onAnswer: () => void): Promise<DiarizationSessionTimeline> {
  const created = await server.app.inject({
    method: 'POST',
    url: '/v1/audio/diarization/sessions',
    payload: JSON.stringify({ model: 'diar', id: `${prefix}-${s}` }),
    headers: { 'content-type': 'application/json' },
  });
  assert.equal(created.statusCode, 201, created.body);
  const { id } = created.json<DiarizationSessionCreated>();
  const retried = s % CHUNKS;
  for (let c = 0; c < CHUNKS; c++) {
    const answer = await sendChunk(id, s, c);
    onAnswer();
    if (c === retried) assert.deepEqual(await sendChunk(id, s, c), answer, `${id}: a retry gets the first answer`);
  }
  const closed = await server.app.inject({ method: 'DELETE', url: `/v1/audio/diarization/sessions/${id}` });
  assert.equal(closed.statusCode, 200, closed.body);
  // The runs name their sessions apart; everything else must be equal.
  return { ...closed.json<DiarizationSessionTimeline>(), id: String(s) };
}

async function okItems(): Promise<number> {
  const text = await server.metrics.registry.metrics();
  const match = /voxmux_scheduler_sequence_items_total\{model="diar",outcome="ok"\} (\d+)/.exec(text);
  return Number(match?.[1] ?? 0);
}

/** 3 s at 16 kHz for the test diarizer: speaker A (level 1) for 1 s, half a second of silence, speaker B (level 3) for 1.5 s. */
function twoSpeakers(): Int16Array {
  const samples = new Int16Array(48_000);
  for (let i = 0; i < samples.length; i++) {
    const amplitude = i < 16_000 ? 3000 : i < 24_000 ? 0 : 8000;
    samples[i] = i % 2 === 0 ? amplitude : -amplitude;
  }
  return samples;
}

describe('diarization sessions through the server (#17)', () => {
  it('gives 40 concurrent sessions through 3 instances the undisturbed timelines when one instance is SIGKILLed midway', async () => {
    const undisturbed = await Promise.all(Array.from({ length: SESSIONS }, (_, s) => runSession('calm', s, () => undefined)));
    assert.equal(await okItems(), SESSIONS * CHUNKS, 'each chunk ran once; retries were answered from the session');
    for (const timeline of undisturbed) {
      assert.equal(timeline.status, 'closed');
      assert.equal(timeline.finalized, timeline.segments.length);
      assert.ok(timeline.segments.length > 0);
    }

    let answers = 0;
    let killedPid: number | undefined;
    const killMidway = () => {
      answers += 1;
      if (answers !== Math.floor((SESSIONS * CHUNKS) / 3)) return;
      const victim = server.supervisor.stats().instances.find((i) => i.model === 'diar' && i.state === 'ready' && i.pid !== null);
      killedPid = victim?.pid ?? undefined;
      if (killedPid !== undefined) process.kill(killedPid, 'SIGKILL');
    };
    const disturbed = await Promise.all(Array.from({ length: SESSIONS }, (_, s) => runSession('storm', s, killMidway)));
    assert.ok(killedPid !== undefined, 'an instance was killed');
    assert.deepEqual(disturbed, undisturbed);
    assert.equal(await okItems(), 2 * SESSIONS * CHUNKS);
    await waitFor(
      () => server.supervisor.stats().instances.filter((i) => i.model === 'diar' && i.state === 'ready').length === 3,
      'the killed instance back',
    );
  });

  it('answers bad chunks with clear 4xx envelopes and the session stays usable; its timeline equals the whole file', async () => {
    const created = await server.app.inject({
      method: 'POST',
      url: '/v1/audio/diarization/sessions',
      payload: JSON.stringify({ model: 'diar' }),
      headers: { 'content-type': 'application/json' },
    });
    const { id } = created.json<DiarizationSessionCreated>();
    const chunk = (seq: string, file: Buffer) =>
      server.app.inject({ method: 'POST', url: `/v1/audio/diarization/sessions/${id}/chunks`, ...multipart({ seq }, file) });
    const codeOf = (res: { json: <T>() => T }) => res.json<{ error: { code: string } }>().error.code;
    assert.equal((await chunk('0', chunkWav(1, 0))).statusCode, 200);
    const long = pcm16Wav(new Int16Array(16_000 * 6));
    const bad: [string, Buffer, number, string][] = [
      ['1', Buffer.from('RIFF\u0000\u0000\u0000\u0000WAVEjunk'), 400, 'invalid_audio'],
      ['3', chunkWav(1, 1), 400, 'sequence_gap'],
      ['1', long, 413, 'chunk_too_long'],
    ];
    for (const [seq, file, status, code] of bad) {
      const res = await chunk(seq, file);
      assert.equal(res.statusCode, status, res.body);
      assert.equal(codeOf(res), code);
    }
    assert.equal((await chunk('1', chunkWav(1, 1))).statusCode, 200);
    const old = await chunk('0', chunkWav(1, 0));
    assert.equal(codeOf(old), 'sequence_out_of_order');
    const unknown = await server.app.inject({ method: 'GET', url: '/v1/audio/diarization/sessions/nobody' });
    assert.equal(unknown.statusCode, 404);
    assert.equal(codeOf(unknown), 'session_not_found');
    assert.equal((await chunk('2', chunkWav(1, 2))).statusCode, 200);
    const closed = (
      await server.app.inject({ method: 'DELETE', url: `/v1/audio/diarization/sessions/${id}` })
    ).json<DiarizationSessionTimeline>();
    // The same three seconds as one file: the test diarizer's turns do not depend on the cuts.
    const pcm = (wav: Buffer) => wav.subarray(44);
    const whole = Buffer.concat([pcm(chunkWav(1, 0)), pcm(chunkWav(1, 1)), pcm(chunkWav(1, 2))]);
    const file = pcm16Wav(new Int16Array(whole.buffer, whole.byteOffset, whole.byteLength / 2));
    const res = await server.app.inject({ method: 'POST', url: '/v1/audio/diarization', ...multipart({ model: 'diar' }, file) });
    assert.deepEqual(closed.segments, res.json<{ segments: unknown[] }>().segments);
  });

  it('diarizes a whole file like the same audio as a one-chunk session', async () => {
    const file = chunkWav(5, 2);
    const res = await server.app.inject({ method: 'POST', url: '/v1/audio/diarization', ...multipart({ model: 'diar' }, file) });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json<{ segments: unknown[]; speakers: number; duration: number }>();
    assert.equal(body.duration, 1);
    assert.ok(body.segments.length > 0);
  });

  it('bench diarize scores the test diarizer at DER 0 against its known turns, and loads 4 sessions without errors', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-diarize-bench-'));
    writeFileSync(join(dir, 'talk.wav'), pcm16Wav(twoSpeakers()));
    // The RTTM names another file too: the manifest line's audio base name picks this one's turns.
    writeFileSync(
      join(dir, 'talk.rttm'),
      'SPEAKER talk 1 0 1 <NA> <NA> alice <NA> <NA>\nSPEAKER other 1 0 3 <NA> <NA> carol <NA> <NA>\nSPEAKER talk 1 1.5 1.5 <NA> <NA> bob <NA> <NA>\n',
    );
    writeFileSync(join(dir, 'manifest.jsonl'), `${JSON.stringify({ audio: 'talk.wav', rttm: 'talk.rttm' })}\n`);
    let out = '';
    const io = {
      stdout: { write: (text: string) => ((out += text), true) },
      stderr: { write: (text: string) => ((out += text), true) },
      isTTY: false,
    };
    const common = ['--url', url, '--model', 'diar'];
    const accuracy = await runBenchCli(
      ['diarize', '--mode', 'accuracy', ...common, '--manifest', join(dir, 'manifest.jsonl'), '--out', join(dir, 'acc')],
      io,
    );
    assert.equal(accuracy, 0, out);
    const scored = JSON.parse(readFileSync(join(dir, 'acc', 'results.json'), 'utf8')) as {
      totals: { der: number; files: number; scoredSpeechS: number };
    };
    assert.equal(scored.totals.files, 1);
    assert.equal(scored.totals.der, 0);
    assert.ok(Math.abs(scored.totals.scoredSpeechS - 1.5) < 1e-9, 'collars of 0.25 s around 4 boundaries leave 1.5 s');
    const chunked = await runBenchCli(
      [
        'diarize',
        '--mode',
        'accuracy',
        ...common,
        '--manifest',
        join(dir, 'manifest.jsonl'),
        '--chunk-s',
        '1.5',
        '--out',
        join(dir, 'chunks'),
      ],
      io,
    );
    assert.equal(chunked, 0, out);
    const session = JSON.parse(readFileSync(join(dir, 'chunks', 'results.json'), 'utf8')) as {
      options: { chunkS: number };
      totals: { der: number; files: number };
      items: { hypothesisSpeakers: number }[];
    };
    assert.deepEqual([session.options.chunkS, session.totals.files, session.items[0]!.hypothesisSpeakers], [1.5, 1, 2]);
    assert.equal(session.totals.der, 0, 'the session of two chunks gives the same final timeline');
    const load = await runBenchCli(
      [
        'diarize',
        '--mode',
        'load',
        ...common,
        '--audio',
        join(dir, 'talk.wav'),
        '--sessions',
        '4',
        '--chunk-s',
        '0.75',
        '--pacing',
        'asap',
        '--out',
        join(dir, 'load'),
      ],
      io,
    );
    assert.equal(load, 0, out);
    const loaded = JSON.parse(readFileSync(join(dir, 'load', 'results.json'), 'utf8')) as {
      totals: {
        chunks: number;
        ok: number;
        expiries: number;
        latencyMs: { p50: number; p95: number; p99: number };
        realTimeFactor: number;
      };
    };
    assert.equal(loaded.totals.chunks, 16);
    assert.equal(loaded.totals.ok, 16);
    assert.equal(loaded.totals.expiries, 0);
    assert.ok(loaded.totals.latencyMs.p99 >= loaded.totals.latencyMs.p50);
    assert.ok(loaded.totals.realTimeFactor > 0);
    assert.equal(
      readFileSync(join(dir, 'load', 'results.csv'), 'utf8')
        .trim()
        .split('\n').length,
      17,
    );
  });

  it('bench diarize --processes 3 spreads 7 real-time sessions over three bench processes that start together, and merges their parts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-diarize-spread-'));
    writeFileSync(join(dir, 'talk.wav'), pcm16Wav(twoSpeakers()));
    let out = '';
    const io = {
      stdout: { write: (text: string) => ((out += text), true) },
      stderr: { write: (text: string) => ((out += text), true) },
      isTTY: false,
    };
    // The parts run as the built voxmux command (the test runner's own script cannot run them).
    const spawnBench = (args: readonly string[]) =>
      spawn(process.execPath, [fileURLToPath(new URL('../../bin/voxmux.mjs', import.meta.url)), 'bench', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    const code = await runBenchCli(
      [
        ...['diarize', '--mode', 'load', '--url', url, '--model', 'diar', '--audio', join(dir, 'talk.wav')],
        ...['--sessions', '7', '--chunk-s', '1.5', '--pacing', 'realtime', '--processes', '3', '--out', join(dir, 'load')],
      ],
      io,
      { spawnBench },
    );
    assert.equal(code, 0, out);
    type Results = {
      options: Record<string, unknown>;
      totals: { sessions: number; chunks: number; ok: number };
      chunks: { session: number }[];
    };
    const merged = JSON.parse(readFileSync(join(dir, 'load', 'results.json'), 'utf8')) as Results;
    assert.equal(merged.options.processes, 3);
    assert.deepEqual([merged.totals.sessions, merged.totals.chunks, merged.totals.ok], [7, 14, 14]);
    assert.deepEqual([...new Set(merged.chunks.map((c) => c.session))], [0, 1, 2, 3, 4, 5, 6]);
    const parts = [1, 2, 3].map((k) => JSON.parse(readFileSync(join(dir, 'load', `process-${k}`, 'results.json'), 'utf8')) as Results);
    assert.deepEqual(
      parts.map((p) => [...new Set(p.chunks.map((c) => c.session))]),
      [
        [0, 3, 6],
        [1, 4],
        [2, 5],
      ],
    );
  });

  it('gives the unmodified openai SDK diarized_json transcripts, whole and streamed, with ASR words assigned to speaker turns', async () => {
    const wav = pcm16Wav(twoSpeakers());
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'not-needed', maxRetries: 0 });
    // NOTE: this SDK version's overloads type only json, text and verbose_json answers.
    const diarized = (await client.audio.transcriptions.create({
      file: await toFile(wav, 'talk.wav'),
      model: 'gpt-4o-transcribe-diarize',
      response_format: 'diarized_json',
      chunking_strategy: 'auto',
    })) as unknown as TranscriptionDiarized;
    // The test engine's three words span a second each: the first in speaker 0's turn (0-1 s),
    // the others mostly in speaker 1's (1.5-3 s).
    assert.equal(diarized.task, 'transcribe');
    assert.equal(diarized.duration, 3);
    assert.deepEqual(
      diarized.segments.map((s) => [s.type, s.speaker, s.start, s.end, s.text.split(' ').length]),
      [
        ['transcript.text.segment', 'A', 0, 1, 1],
        ['transcript.text.segment', 'B', 1, 3, 2],
      ],
    );
    assert.equal(diarized.text, diarized.segments.map((s) => s.text).join(' '));
    const stream = await client.audio.transcriptions.create({
      file: await toFile(wav, 'talk.wav'),
      model: 'gpt-4o-transcribe-diarize',
      response_format: 'diarized_json',
      chunking_strategy: 'auto',
      stream: true,
    });
    const segments: string[] = [];
    let deltas = '';
    let done = '';
    for await (const event of stream) {
      if (event.type === 'transcript.text.segment') segments.push(event.speaker);
      if (event.type === 'transcript.text.delta') deltas += event.delta;
      if (event.type === 'transcript.text.done') done = event.text;
    }
    assert.deepEqual(segments, ['A', 'B']);
    assert.equal(deltas, done);
    assert.equal(done, diarized.text);
    const res = await server.app.inject({
      method: 'POST',
      url: '/v1/audio/transcriptions',
      ...multipart({ model: 'diar', response_format: 'diarized_json' }, wav),
    });
    assert.equal(res.json<{ error: { code: string } }>().error.code, 'model_task_mismatch');
  });
});
