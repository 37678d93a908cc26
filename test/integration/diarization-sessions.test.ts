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
import { after, before, describe, it } from 'node:test';
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
before(async () => {
  const config = loadConfig({
    file: {
      models: {
        diar: { adapter: 'test', task: 'diarization', instances: 3, maxBatchSize: 8, options: { itemDelayMs: 3 } },
      },
      supervisor: { hostPath: HOST_PATH, heartbeatIntervalMs: 100, restartInitialBackoffMs: 50, gpus: [] },
      gateway: { voiceActivity: 'energy' },
    },
  });
  server = await buildServer(config, { log: silentLogger(), clock: systemClock, spawn: spawnInstance, baseEnv: readProcessEnvironment() });
  await server.startInstances();
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
      const victim = server.supervisor.stats().instances.find((i) => i.state === 'ready' && i.pid !== null);
      killedPid = victim?.pid ?? undefined;
      if (killedPid !== undefined) process.kill(killedPid, 'SIGKILL');
    };
    const disturbed = await Promise.all(Array.from({ length: SESSIONS }, (_, s) => runSession('storm', s, killMidway)));
    assert.ok(killedPid !== undefined, 'an instance was killed');
    assert.deepEqual(disturbed, undisturbed);
    assert.equal(await okItems(), 2 * SESSIONS * CHUNKS);
    await waitFor(() => server.supervisor.stats().instances.filter((i) => i.state === 'ready').length === 3, 'the killed instance back');
  });

  it('diarizes a whole file like the same audio as a one-chunk session', async () => {
    const file = chunkWav(5, 2);
    const res = await server.app.inject({ method: 'POST', url: '/v1/audio/diarization', ...multipart({ model: 'diar' }, file) });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json<{ segments: unknown[]; speakers: number; duration: number }>();
    assert.equal(body.duration, 1);
    assert.ok(body.segments.length > 0);
  });
});
