import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fake-clock.js';
import { pcm16Wav } from '../../../test/support/audio.js';
import type {
  DiarizationChunkResult,
  DiarizationJson,
  DiarizationSessionCreated,
  DiarizationSessionTimeline,
} from '../../api/diarization.js';
import { errors } from '../../core/error-catalog.js';
import type { SequenceItem, SequenceResult, SubmitOptions } from '../../scheduler/index.js';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics } from '../../telemetry/metrics.js';
import type { EngineSegment } from '../diarization/timeline.js';
import { buildGateway, createAudioDecoder, createEnergyDetector, type ModelCatalog, type ModelEntry } from '../index.js';

const ENTRIES: ModelEntry[] = [
  {
    id: 'diar',
    created: 0,
    ownedBy: 'voxmux',
    task: 'diarization',
    diarization: { wantsSpeechRegions: true, sessionIdleTimeoutMs: 60_000 },
  },
  { id: 'asr', created: 0, ownedBy: 'voxmux', task: 'transcription' },
  {
    id: 'diar-2s',
    created: 0,
    ownedBy: 'voxmux',
    task: 'diarization',
    diarization: { wantsSpeechRegions: false, sessionIdleTimeoutMs: 60_000, maxItemMs: 2_000, maxSpeakers: 3 },
  },
];
const MODELS: ModelCatalog = { list: () => ENTRIES, resolve: (name) => (ENTRIES.some((e) => e.id === name) ? name : undefined) };

/**
 * A sequence port that plays a diarizer: each chunk is one turn of speaker seq % 2, provisional
 * until the next chunk finalizes it. It records every submitted item and can hold items back.
 */
class FakeSequences {
  readonly items: { model: string; item: SequenceItem }[] = [];
  readonly ended: string[] = [];
  nextError: Error | undefined;
  /** Engine outputs to answer with, one per item, in place of the played diarizer's. */
  readonly scripted: { finalized: EngineSegment[]; provisional: EngineSegment[]; speakers: number }[] = [];
  /** While set, answers wait until `release()`. */
  isHolding = false;
  #held: (() => void)[] = [];

  release(): void {
    this.isHolding = false;
    for (const go of this.#held.splice(0)) go();
  }
  #open = new Map<string, { start: number; end: number; speaker: number } | undefined>();

  submit = (model: string, item: SequenceItem, options: SubmitOptions): Promise<SequenceResult> => {
    assert.ok(options.timeoutMs > 0);
    this.items.push({ model, item });
    if (this.nextError !== undefined) {
      const error = this.nextError;
      this.nextError = undefined;
      return Promise.reject(error);
    }
    const script = this.scripted.shift();
    if (script !== undefined) return Promise.resolve({ sessionId: item.sessionId, seq: item.seq, output: script });
    const offset = item.options.chunkOffsetS as number;
    // An empty chunk (the close's final step) adds no turn.
    const turns = item.audio.length === 0 ? [] : [{ start: offset, end: offset + item.audio.length / 16_000, speaker: item.seq % 2 }];
    const previous = this.#open.get(item.sessionId);
    const finalized = previous === undefined ? [] : [previous];
    this.#open.set(item.sessionId, turns[0]);
    const output = item.isLast
      ? { finalized: [...finalized, ...turns], provisional: [], speakers: Math.min(2, item.seq + 1) }
      : { finalized, provisional: turns, speakers: Math.min(2, item.seq + 1) };
    const result = { sessionId: item.sessionId, seq: item.seq, output };
    if (!this.isHolding) return Promise.resolve(result);
    return new Promise((resolve) => this.#held.push(() => resolve(result)));
  };

  end = (_model: string, sessionId: string): Promise<void> => {
    this.ended.push(sessionId);
    return Promise.resolve();
  };
}

let current: FastifyInstance | undefined;
afterEach(async () => {
  await current?.close();
  current = undefined;
});

async function setup(p: { uploadPoolBytes?: number } = {}) {
  const clock = new FakeClock();
  const sequences = new FakeSequences();
  const metrics = createMetrics();
  const app = await buildGateway(
    {
      maxBodyBytes: 1024 * 1024,
      requestTimeoutMs: 30_000,
      apiKeys: [],
      uploadPoolBytes: p.uploadPoolBytes ?? 0,
      uploadPoolIdleMs: 10_000,
      bodyTimeoutMs: 60_000,
      splitAboveMs: 0,
      pieceTargetMs: 15_000,
      maxPieceMs: 60_000,
      maxDiarizationChunkMs: 5_000,
    },
    {
      transcribe: () => Promise.reject(new Error('not used')),
      openStream: () => {
        throw new Error('not used');
      },
      sequences,
      models: MODELS,
      voices: { models: () => [], catalog: () => [], residency: () => [] },
      readiness: () => ({ isReady: true, body: {} }),
      metricsText: () => metrics.registry.metrics(),
      metricsContentType: 'text/plain',
      voiceActivity: createEnergyDetector(),
      decoder: createAudioDecoder({ maxDurationMs: 600_000, ffmpegPath: 'ffmpeg', ffmpegTimeoutMs: 10_000, tmpDir: '/tmp' }),
      clock,
      log: createLogger({ level: 'silent' }),
      metrics,
    },
  );
  current = app;
  return { app, clock, sequences, metrics };
}

/** `seconds` of a loud square wave (speech to the energy detector) after a quiet half second. */
function chunkWav(seconds: number): Buffer {
  const samples = new Int16Array(Math.round(seconds * 16_000));
  for (let i = 8000; i < samples.length; i++) samples[i] = i % 2 === 0 ? 8000 : -8000;
  return pcm16Wav(samples);
}

function multipart(
  fields: Record<string, string>,
  file?: Buffer,
  fileName = 'a.wav',
): { payload: Buffer; headers: Record<string, string> } {
  const boundary = 'voxmuxdiarization';
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  }
  if (file !== undefined) {
    parts.push(
      Buffer.from(
        `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="${fileName}"\r\ncontent-type: audio/wav\r\n\r\n`,
      ),
      file,
      Buffer.from('\r\n'),
    );
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(parts), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

async function createSession(app: FastifyInstance, body: Record<string, unknown> = { model: 'diar' }) {
  return app.inject({
    method: 'POST',
    url: '/v1/audio/diarization/sessions',
    payload: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
}

async function sendChunk(app: FastifyInstance, id: string, fields: Record<string, string>, file?: Buffer) {
  return app.inject({ method: 'POST', url: `/v1/audio/diarization/sessions/${id}/chunks`, ...multipart(fields, file) });
}

describe('POST /v1/audio/diarization (#17)', () => {
  it('diarizes a whole file as a one-chunk session with its speech regions, and forgets the session', async () => {
    const { app, sequences } = await setup();
    const res = await app.inject({
      method: 'POST',
      url: '/v1/audio/diarization',
      ...multipart({ model: 'diar', min_speakers: '1', max_speakers: '3' }, chunkWav(2)),
    });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json<DiarizationJson>();
    assert.deepEqual(body, { duration: 2, speakers: 1, segments: [{ start: 0, end: 2, speaker: 'speaker_0' }] });
    const item = sequences.items[0]!.item;
    assert.equal(item.isLast, true);
    assert.equal(item.options.minSpeakers, 1);
    assert.equal(item.options.maxSpeakers, 3);
    assert.equal(item.options.chunkOffsetS, 0);
    const speech = item.options.speech as [number, number][];
    assert.equal(speech.length, 1);
    // The speech starts at 0.5 s and lasts to the end; regions are padded by Silero's 30 ms.
    assert.ok(Math.abs(speech[0]![0] - 0.5) <= 0.06 && Math.abs(speech[0]![1] - 2) <= 0.03, JSON.stringify(speech));
    assert.deepEqual(sequences.ended, [item.sessionId]);
  });

  it('answers RTTM, and rejects a model of another task, a bad speaker range and an unknown format', async () => {
    const { app } = await setup();
    const rttm = await app.inject({
      method: 'POST',
      url: '/v1/audio/diarization',
      ...multipart({ model: 'diar', response_format: 'rttm' }, chunkWav(1)),
    });
    assert.equal(rttm.statusCode, 200);
    // The file id is the uploaded file's name without its extension (what DER scorers match references by).
    assert.equal(rttm.body, 'SPEAKER a 1 0.000 1.000 <NA> <NA> speaker_0 <NA> <NA>\n');
    for (const [fileName, fileId] of [
      ['meeting 2024-01.final.wav', 'meeting_2024-01.final'],
      ['dir/sub/call.flac', 'call'],
      ['', 'audio'],
      ['.wav', 'audio'],
    ]) {
      const named = await app.inject({
        method: 'POST',
        url: '/v1/audio/diarization',
        ...multipart({ model: 'diar', response_format: 'rttm' }, chunkWav(1), fileName),
      });
      assert.equal(named.body.split(' ')[1], fileId, fileName);
    }
    const cases: [Record<string, string>, number, string][] = [
      [{ model: 'asr' }, 400, 'model_task_mismatch'],
      [{ model: 'nope' }, 404, 'model_not_found'],
      [{ model: 'diar', min_speakers: '3', max_speakers: '2' }, 400, 'invalid_parameter'],
      [{ model: 'diar', max_speakers: 'many' }, 400, 'invalid_parameter'],
      [{ model: 'diar', response_format: 'srt' }, 400, 'unsupported_response_format'],
    ];
    for (const [fields, status, code] of cases) {
      const res = await app.inject({ method: 'POST', url: '/v1/audio/diarization', ...multipart(fields, chunkWav(1)) });
      assert.equal(res.statusCode, status, JSON.stringify(fields));
      assert.equal(res.json<{ error: { code: string } }>().error.code, code);
    }
  });
});

describe('diarization sessions (#17)', () => {
  it('runs chunks in order with their offsets, replays a retried number without running it, and closes with the final timeline', async () => {
    const { app, sequences } = await setup();
    const created = await createSession(app, { model: 'diar', id: 'call-42', max_speakers: 2 });
    assert.equal(created.statusCode, 201, created.body);
    const session = created.json<DiarizationSessionCreated>();
    assert.equal(session.id, 'call-42');
    assert.equal(session.idle_timeout, 60);
    const first = await sendChunk(app, 'call-42', { seq: '0' }, chunkWav(1.5));
    assert.equal(first.statusCode, 200, first.body);
    assert.deepEqual(first.json<DiarizationChunkResult>().provisional, [{ start: 0, end: 1.5, speaker: 'speaker_0' }]);
    const second = await sendChunk(app, 'call-42', { seq: '1' }, chunkWav(1));
    const answer = second.json<DiarizationChunkResult>();
    assert.deepEqual(answer.finalized, [{ start: 0, end: 1.5, speaker: 'speaker_0' }]);
    assert.deepEqual(answer.provisional, [{ start: 1.5, end: 2.5, speaker: 'speaker_1' }]);
    assert.equal(answer.duration, 2.5);
    const retried = await sendChunk(app, 'call-42', { seq: '1' }, chunkWav(1));
    assert.deepEqual(retried.json(), second.json(), 'the same answer');
    assert.equal(sequences.items.length, 2, 'the retry did not run');
    assert.deepEqual(
      sequences.items.map(({ item }) => [item.seq, item.options.chunkOffsetS, item.options.maxSpeakers]),
      [
        [0, 0, 2],
        [1, 1.5, 2],
      ],
    );
    const got = await app.inject({ method: 'GET', url: '/v1/audio/diarization/sessions/call-42' });
    const timeline = got.json<DiarizationSessionTimeline>();
    assert.equal(timeline.status, 'open');
    assert.equal(timeline.finalized, 1);
    assert.equal(timeline.segments.length, 2);
    const rttm = await app.inject({ method: 'GET', url: '/v1/audio/diarization/sessions/call-42?response_format=rttm' });
    assert.equal(rttm.body.split('\n').filter(Boolean).length, 2);
    const closed = await app.inject({ method: 'DELETE', url: '/v1/audio/diarization/sessions/call-42' });
    const final = closed.json<DiarizationSessionTimeline>();
    assert.equal(final.status, 'closed');
    assert.equal(final.finalized, 2);
    assert.equal(final.chunks, 2);
    assert.deepEqual(sequences.ended, ['call-42']);
    const after = await app.inject({ method: 'GET', url: '/v1/audio/diarization/sessions/call-42' });
    assert.equal(after.statusCode, 404);
    assert.equal(after.json<{ error: { code: string } }>().error.code, 'session_not_found');
  });

  it('answers a clear 4xx to gaps, old numbers, malformed and oversized chunks, and the session stays usable', async () => {
    const { app, sequences } = await setup();
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    assert.equal((await sendChunk(app, id, { seq: '0' }, chunkWav(1))).statusCode, 200);
    const cases: [Record<string, string>, Buffer | undefined, number, string, string?][] = [
      [{ seq: '3' }, chunkWav(1), 400, 'sequence_gap', 'Expected sequence number 1: got 3'],
      [{ seq: 'x' }, chunkWav(1), 400, 'invalid_parameter'],
      [{}, chunkWav(1), 400, 'missing_parameter'],
      [{ seq: '1' }, undefined, 400, 'missing_parameter'],
      [{ seq: '1' }, Buffer.from('RIFF....WAVEfmt garbage'), 400, 'invalid_audio'],
      [{ seq: '1' }, Buffer.from('this is not audio at all, just text'), 415, 'unsupported_audio_format'],
      [{ seq: '1' }, chunkWav(6), 413, 'chunk_too_long'],
      [{ seq: '1', is_last: 'maybe' }, chunkWav(1), 400, 'invalid_parameter'],
    ];
    for (const [fields, file, status, code, message] of cases) {
      const res = await sendChunk(app, id, fields, file);
      assert.equal(res.statusCode, status, `${code}: ${res.body}`);
      const body = res.json<{ error: { code: string; message: string; type: string } }>();
      assert.equal(body.error.code, code);
      if (message !== undefined) assert.equal(body.error.message, message);
    }
    assert.equal(sequences.items.length, 1, 'no rejected chunk reached the scheduler');
    const next = await sendChunk(app, id, { seq: '1' }, chunkWav(1));
    assert.equal(next.statusCode, 200, next.body);
    const old = await sendChunk(app, id, { seq: '0' }, chunkWav(1));
    assert.equal(old.statusCode, 400);
    assert.equal(old.json<{ error: { code: string } }>().error.code, 'sequence_out_of_order');
    assert.equal((await sendChunk(app, id, { seq: '2' }, chunkWav(1))).statusCode, 200);
  });

  it('refuses a chunk after the is_last one, sent while it runs or after it answered, without running it', async () => {
    const { app, sequences } = await setup();
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    sequences.isHolding = true;
    const last = sendChunk(app, id, { seq: '0', is_last: 'true' }, chunkWav(1));
    while (sequences.items.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const during = await sendChunk(app, id, { seq: '1' }, chunkWav(1));
    sequences.release();
    assert.equal((await last).statusCode, 200);
    const after = await sendChunk(app, id, { seq: '1' }, chunkWav(1));
    for (const res of [during, after]) {
      assert.equal(res.statusCode, 400, res.body);
      const { error } = res.json<{ error: { code: string; param: string; message: string } }>();
      assert.deepEqual([error.code, error.param], ['invalid_parameter', 'seq']);
      assert.equal(error.message, 'Expected seq to be at most 0 (chunk 0 was is_last): got 1');
    }
    assert.equal(sequences.items.length, 1);
    // The last chunk's retry still gets its answer.
    assert.equal((await sendChunk(app, id, { seq: '0', is_last: 'true' }, chunkWav(1))).statusCode, 200);
  });

  it('takes a chunk after an is_last one that failed, or that the scheduler never took', async () => {
    const { app, sequences } = await setup();
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    sequences.nextError = errors.queueFull({ model: 'diar', queued: 1, retryAfterMs: 1000 });
    assert.equal((await sendChunk(app, id, { seq: '0', is_last: 'true' }, chunkWav(1))).statusCode, 429);
    assert.equal((await sendChunk(app, id, { seq: '0' }, chunkWav(1))).statusCode, 200);
    sequences.nextError = errors.fromWire({ code: 'model_failed', message: 'no', instanceId: 'diar-0' });
    assert.equal((await sendChunk(app, id, { seq: '1', is_last: 'true' }, chunkWav(1))).statusCode, 500);
    assert.equal((await sendChunk(app, id, { seq: '2', is_last: 'true' }, chunkWav(1))).statusCode, 200);
  });

  it("diarizes a whole file longer than the engine's longest item as items no longer than it, and refuses such a chunk (413)", async () => {
    const { app, sequences } = await setup();
    const whole = await app.inject({
      method: 'POST',
      url: '/v1/audio/diarization',
      ...multipart({ model: 'diar-2s' }, chunkWav(4.5)),
    });
    assert.equal(whole.statusCode, 200, whole.body);
    assert.deepEqual(
      sequences.items.map(({ item }) => [item.seq, item.audio.length / 16_000, item.isLast, item.options.chunkOffsetS]),
      [
        [0, 2, false, 0],
        [1, 2, false, 2],
        [2, 0.5, true, 4],
      ],
    );
    assert.deepEqual(whole.json<DiarizationJson>().segments.at(-1), { start: 4, end: 4.5, speaker: 'speaker_0' });
    const id = (await createSession(app, { model: 'diar-2s' })).json<DiarizationSessionCreated>().id;
    const long = await sendChunk(app, id, { seq: '0' }, chunkWav(3));
    assert.equal(long.statusCode, 413, long.body);
    assert.equal(
      long.json<{ error: { code: string; message: string } }>().error.message,
      'Expected a chunk of at most 2000 ms: got 3000 ms',
    );
    assert.equal(sequences.items.length, 3);
    assert.equal((await sendChunk(app, id, { seq: '0' }, chunkWav(2))).statusCode, 200);
  });

  it("refuses min_speakers above the engine's most speakers when a session opens or a file comes, before any work", async () => {
    const { app, sequences } = await setup();
    const created = await createSession(app, { model: 'diar-2s', min_speakers: 4 });
    const whole = await app.inject({
      method: 'POST',
      url: '/v1/audio/diarization',
      ...multipart({ model: 'diar-2s', min_speakers: '4' }, chunkWav(1)),
    });
    for (const res of [created, whole]) {
      assert.equal(res.statusCode, 400, res.body);
      const { error } = res.json<{ error: { code: string; param: string; message: string } }>();
      assert.deepEqual([error.code, error.param], ['invalid_parameter', 'min_speakers']);
      assert.equal(error.message, "Expected min_speakers to be at most 3 (the most speakers model 'diar-2s' finds): got 4");
    }
    assert.equal(sequences.items.length, 0);
    // max_speakers above it is capped by the engine, as documented.
    assert.equal((await createSession(app, { model: 'diar-2s', min_speakers: 3, max_speakers: 8 })).statusCode, 201);
  });

  it('answers a retry of a running chunk with the same answer, without running it twice', async () => {
    const { app, sequences } = await setup();
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    sequences.isHolding = true;
    const first = sendChunk(app, id, { seq: '0' }, chunkWav(1));
    while (sequences.items.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const retry = sendChunk(app, id, { seq: '0' }, chunkWav(1));
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    sequences.release();
    const [a, b] = await Promise.all([first, retry]);
    assert.equal(a.statusCode, 200, a.body);
    assert.deepEqual(b.json(), a.json());
    assert.equal(sequences.items.length, 1);
  });

  it('takes the next chunk before the previous one is answered, with its offset, and answers both in order', async () => {
    const { app, sequences } = await setup();
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    sequences.isHolding = true;
    const first = sendChunk(app, id, { seq: '0' }, chunkWav(1));
    while (sequences.items.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const second = sendChunk(app, id, { seq: '1' }, chunkWav(2));
    while (sequences.items.length === 1) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(sequences.items[1]!.item.options.chunkOffsetS, 1);
    sequences.release();
    const [a, b] = await Promise.all([first, second]);
    assert.equal(a.statusCode, 200, a.body);
    assert.deepEqual(b.json<DiarizationChunkResult>().finalized, [{ start: 0, end: 1, speaker: 'speaker_0' }]);
    assert.equal(b.json<DiarizationChunkResult>().duration, 3);
  });

  it('keeps the number of a chunk the scheduler refused before taking it (queue_full), so the client retries it', async () => {
    const { app, sequences } = await setup();
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    sequences.nextError = errors.queueFull({ model: 'diar', queued: 1, retryAfterMs: 1000 });
    const refused = await sendChunk(app, id, { seq: '0' }, chunkWav(1));
    assert.equal(refused.statusCode, 429);
    const retried = await sendChunk(app, id, { seq: '0' }, chunkWav(1));
    assert.equal(retried.statusCode, 200, retried.body);
  });

  it('refuses the ids . and .. (a URL path resolves them away, so no chunk could reach the session)', async () => {
    const { app } = await setup();
    for (const id of ['.', '..']) {
      const res = await createSession(app, { model: 'diar', id });
      assert.equal(res.statusCode, 400, res.body);
      assert.deepEqual(
        [res.json<{ error: { code: string; param: string } }>().error.code, res.json<{ error: { param: string } }>().error.param],
        ['invalid_parameter', 'id'],
      );
    }
    assert.equal((await createSession(app, { model: 'diar', id: '...' })).statusCode, 201);
  });

  it('rejects unknown sessions, duplicate and malformed ids, and non-JSON bodies', async () => {
    const { app } = await setup();
    const unknown = await sendChunk(app, 'nope', { seq: '0' }, chunkWav(1));
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json<{ error: { code: string } }>().error.code, 'session_not_found');
    assert.equal((await createSession(app, { model: 'diar', id: 'dup' })).statusCode, 201);
    const dup = await createSession(app, { model: 'diar', id: 'dup' });
    assert.equal(dup.json<{ error: { code: string } }>().error.code, 'session_already_exists');
    const bad = await createSession(app, { model: 'diar', id: 'a/b' });
    assert.equal(bad.json<{ error: { code: string; param: string } }>().error.param, 'id');
    const text = await app.inject({
      method: 'POST',
      url: '/v1/audio/diarization/sessions',
      payload: 'model=diar',
      headers: { 'content-type': 'text/plain' },
    });
    assert.equal(text.json<{ error: { code: string } }>().error.code, 'invalid_content_type');
    const broken = await app.inject({
      method: 'POST',
      url: '/v1/audio/diarization/sessions',
      payload: '{',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(broken.json<{ error: { code: string } }>().error.code, 'invalid_parameter');
    const asr = await createSession(app, { model: 'asr' });
    assert.equal(asr.json<{ error: { code: string } }>().error.code, 'model_task_mismatch');
  });

  it('expires an idle session on the clock: 404 session_expired, counted in metrics, its engine state released', async () => {
    const { app, clock, sequences, metrics } = await setup();
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    assert.equal((await sendChunk(app, id, { seq: '0' }, chunkWav(1))).statusCode, 200);
    clock.advance(59_999);
    assert.equal((await app.inject({ method: 'GET', url: `/v1/audio/diarization/sessions/${id}` })).statusCode, 200);
    clock.advance(60_000);
    assert.deepEqual(sequences.ended, [id], 'expired by the timer, without a call');
    const res = await sendChunk(app, id, { seq: '1' }, chunkWav(1));
    assert.equal(res.statusCode, 404);
    const error = res.json<{ error: { code: string; message: string } }>().error;
    assert.equal(error.code, 'session_expired');
    assert.match(error.message, /expired after 60000 ms/);
    assert.match(await metrics.registry.metrics(), /voxmux_gateway_diarization_sessions_expired_total\{model="diar"\} 1/);
  });
});

describe('diarization uploads (#17)', () => {
  it("gives a chunk's or file's upload to the next one once its result is in, and not when it failed", async () => {
    const { app, sequences, metrics } = await setup({ uploadPoolBytes: 16 * 1024 * 1024 });
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    const bufferOf = (n: number) => sequences.items[n]!.item.audio.buffer;
    assert.equal((await sendChunk(app, id, { seq: '0' }, chunkWav(1))).statusCode, 200);
    assert.equal((await sendChunk(app, id, { seq: '1' }, chunkWav(1))).statusCode, 200);
    // A 16 kHz 16-bit WAV decodes to a view of its upload, so the second chunk's samples sit in
    // the first one's memory.
    assert.equal(bufferOf(1), bufferOf(0), "the second chunk reused the first one's upload memory");
    const whole = await app.inject({ method: 'POST', url: '/v1/audio/diarization', ...multipart({ model: 'diar' }, chunkWav(1)) });
    assert.equal(whole.statusCode, 200);
    assert.equal(bufferOf(2), bufferOf(0), 'a whole file takes the pooled memory too, and gives it back');
    sequences.nextError = errors.instanceCrashed({ instanceId: 'diar-0', reason: 'test' });
    assert.equal((await sendChunk(app, id, { seq: '2' }, chunkWav(1))).statusCode, 503);
    const again = await createSession(app);
    assert.equal((await sendChunk(app, again.json<DiarizationSessionCreated>().id, { seq: '0' }, chunkWav(1))).statusCode, 200);
    assert.notEqual(bufferOf(4), bufferOf(3), "a failed chunk's upload may still be read by its batch: not reused");
    const allocated = (await metrics.uploadAllocatedBytes.get()).values[0]?.value;
    assert.equal(allocated, 2 * 64 * 1024, 'two uploads allocated: the first, and the one after the failure');
  });
});

describe('diarization uploads refused before they are submitted', () => {
  it('give their memory back: an unknown format, undecodable audio, a malformed chunk number', async () => {
    const { app, metrics } = await setup({ uploadPoolBytes: 16 * 1024 * 1024 });
    const pooled = async () => (await metrics.uploadPoolBytes.get()).values[0]?.value;
    const post = (fields: Record<string, string>, file: Buffer) =>
      app.inject({ method: 'POST', url: '/v1/audio/diarization', ...multipart(fields, file) });
    assert.equal((await post({ model: 'diar', response_format: 'mp3' }, chunkWav(1))).statusCode, 400);
    assert.equal(await pooled(), 64 * 1024);
    const undecodable = await post({ model: 'diar' }, Buffer.from('RIFF\0\0\0\0WAVE'));
    assert.equal(undecodable.json<{ error: { code: string } }>().error.code, 'invalid_audio');
    assert.equal(await pooled(), 64 * 1024);
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    assert.equal((await sendChunk(app, id, { seq: 'one' }, chunkWav(1))).statusCode, 400);
    assert.equal(await pooled(), 64 * 1024);
    assert.equal((await metrics.uploadAllocatedBytes.get()).values[0]?.value, 64 * 1024, 'each call reused the memory');
  });
});

describe('truncated WAV uploads', () => {
  it('answer with voxmux-audio-truncated: true, for a whole file and for a chunk, as transcriptions do', async () => {
    const { app } = await setup();
    const truncated = chunkWav(1);
    truncated.writeUInt32LE(truncated.readUInt32LE(40) * 2, 40); // the data chunk declares twice what it holds
    const post = (fields: Record<string, string>, file: Buffer) =>
      app.inject({ method: 'POST', url: '/v1/audio/diarization', ...multipart(fields, file) });
    const whole = await post({ model: 'diar' }, truncated);
    assert.equal(whole.statusCode, 200, whole.body);
    assert.equal(whole.headers['voxmux-audio-truncated'], 'true');
    const rttm = await post({ model: 'diar', response_format: 'rttm' }, truncated);
    assert.equal(rttm.headers['voxmux-audio-truncated'], 'true');
    assert.equal((await post({ model: 'diar' }, chunkWav(1))).headers['voxmux-audio-truncated'], undefined);
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    const chunk = await sendChunk(app, id, { seq: '0' }, truncated);
    assert.equal(chunk.statusCode, 200, chunk.body);
    assert.equal(chunk.headers['voxmux-audio-truncated'], 'true');
    assert.equal((await sendChunk(app, id, { seq: '1' }, chunkWav(1))).headers['voxmux-audio-truncated'], undefined);
  });
});

describe('closing a diarization session', () => {
  it("runs the engine's final step when no chunk was is_last: an empty is_last item after the last number, at the end of the audio", async () => {
    const { app, sequences } = await setup();
    const id = (await createSession(app, { model: 'diar', max_speakers: 2 })).json<DiarizationSessionCreated>().id;
    assert.equal((await sendChunk(app, id, { seq: '0' }, chunkWav(1.5))).statusCode, 200);
    assert.equal((await sendChunk(app, id, { seq: '1' }, chunkWav(1))).statusCode, 200);
    const closed = await app.inject({ method: 'DELETE', url: `/v1/audio/diarization/sessions/${id}` });
    assert.equal(closed.statusCode, 200, closed.body);
    const last = sequences.items.at(-1)!.item;
    assert.deepEqual(
      [sequences.items.length, last.seq, last.isLast, last.audio.length, last.options],
      [3, 2, true, 0, { maxSpeakers: 2, chunkOffsetS: 2.5 }],
    );
    const final = closed.json<DiarizationSessionTimeline>();
    assert.deepEqual(final.segments, [
      { start: 0, end: 1.5, speaker: 'speaker_0' },
      { start: 1.5, end: 2.5, speaker: 'speaker_1' },
    ]);
    assert.equal(final.chunks, 2);
  });

  it('places the final step at the end of the last successful chunk, and keeps the timeline when the step fails', async () => {
    const { app, sequences } = await setup();
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    assert.equal((await sendChunk(app, id, { seq: '0' }, chunkWav(1))).statusCode, 200);
    sequences.nextError = errors.fromWire({ code: 'model_failed', message: 'no', instanceId: 'diar-0' });
    assert.equal((await sendChunk(app, id, { seq: '1' }, chunkWav(2))).statusCode, 500);
    sequences.nextError = errors.deadlineExceeded({ requestId: 'r', timeoutMs: 1 });
    const closed = await app.inject({ method: 'DELETE', url: `/v1/audio/diarization/sessions/${id}` });
    assert.equal(closed.statusCode, 200, closed.body);
    const last = sequences.items.at(-1)!.item;
    assert.deepEqual([last.seq, last.isLast, last.options.chunkOffsetS], [2, true, 1]);
    const final = closed.json<DiarizationSessionTimeline>();
    assert.deepEqual(final.segments, [{ start: 0, end: 1, speaker: 'speaker_0' }]);
    assert.equal(final.duration, 3);
  });

  it('sends nothing more after an is_last chunk, nor for a session whose chunks all failed', async () => {
    const { app, sequences } = await setup();
    const done = (await createSession(app)).json<DiarizationSessionCreated>().id;
    assert.equal((await sendChunk(app, done, { seq: '0', is_last: 'true' }, chunkWav(1))).statusCode, 200);
    assert.equal((await app.inject({ method: 'DELETE', url: `/v1/audio/diarization/sessions/${done}` })).statusCode, 200);
    const failed = (await createSession(app)).json<DiarizationSessionCreated>().id;
    sequences.nextError = errors.fromWire({ code: 'model_failed', message: 'no', instanceId: 'diar-0' });
    assert.equal((await sendChunk(app, failed, { seq: '0' }, chunkWav(1))).statusCode, 500);
    assert.equal((await app.inject({ method: 'DELETE', url: `/v1/audio/diarization/sessions/${failed}` })).statusCode, 200);
    assert.equal(sequences.items.length, 2);
  });
});

describe("the order of a diarization session's segments", () => {
  it('lists finalized segments by start, then end, then speaker, whatever chunk finalized them, in chunk answers, JSON and RTTM', async () => {
    const { app, sequences } = await setup();
    const id = (await createSession(app)).json<DiarizationSessionCreated>().id;
    // Speaker 0 talks from 1 s to 7 s over the others: the engine finalizes the turn only with the
    // second chunk, after speaker 1's turn at 3-4 s, finalized with the first.
    sequences.scripted.push(
      { finalized: [{ start: 3, end: 4, speaker: 1 }], provisional: [{ start: 1, end: 5, speaker: 0 }], speakers: 2 },
      {
        finalized: [
          { start: 1, end: 7, speaker: 0 },
          { start: 3, end: 3.5, speaker: 2 },
          { start: 6, end: 8, speaker: 2 },
          { start: 6, end: 8, speaker: 1 },
        ],
        provisional: [{ start: 2, end: 10, speaker: 3 }],
        speakers: 4,
      },
    );
    assert.equal((await sendChunk(app, id, { seq: '0' }, chunkWav(5))).statusCode, 200);
    const second = await sendChunk(app, id, { seq: '1' }, chunkWav(5));
    assert.equal(second.statusCode, 200, second.body);
    const sorted = [
      { start: 1, end: 7, speaker: 'speaker_0' },
      { start: 3, end: 3.5, speaker: 'speaker_2' },
      { start: 3, end: 4, speaker: 'speaker_1' },
      { start: 6, end: 8, speaker: 'speaker_1' },
      { start: 6, end: 8, speaker: 'speaker_2' },
    ];
    const provisional = { start: 2, end: 10, speaker: 'speaker_3' };
    assert.deepEqual(second.json<DiarizationChunkResult>().finalized, sorted);
    assert.deepEqual(second.json<DiarizationChunkResult>().provisional, [provisional]);
    const open = (await app.inject({ method: 'GET', url: `/v1/audio/diarization/sessions/${id}` })).json<DiarizationSessionTimeline>();
    // The final ones stay the first `finalized` of the segments, the provisional ones after them.
    assert.deepEqual([open.segments, open.finalized], [[...sorted, provisional], 5]);
    const rttm = await app.inject({ method: 'GET', url: `/v1/audio/diarization/sessions/${id}?response_format=rttm` });
    assert.deepEqual(
      rttm.body
        .trim()
        .split('\n')
        .map((line) => line.split(' ').filter((_, i) => [3, 7].includes(i))),
      [...sorted, provisional].map((s) => [s.start.toFixed(3), s.speaker]),
    );
    // The engine's final step fails: the provisional segment becomes final as it is, in its place by start.
    sequences.nextError = errors.deadlineExceeded({ requestId: 'r', timeoutMs: 1 });
    const closed = await app.inject({ method: 'DELETE', url: `/v1/audio/diarization/sessions/${id}` });
    const final = closed.json<DiarizationSessionTimeline>();
    assert.deepEqual([final.segments, final.finalized], [[sorted[0], provisional, ...sorted.slice(1)], 6]);
  });

  it('lists the segments of a whole file diarized as several items by start', async () => {
    const { app, sequences } = await setup();
    sequences.scripted.push(
      { finalized: [{ start: 1, end: 1.5, speaker: 1 }], provisional: [{ start: 0.5, end: 2, speaker: 0 }], speakers: 2 },
      { finalized: [{ start: 0.5, end: 2.5, speaker: 0 }], provisional: [], speakers: 2 },
    );
    const res = await app.inject({
      method: 'POST',
      url: '/v1/audio/diarization',
      ...multipart({ model: 'diar-2s' }, chunkWav(3)),
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(sequences.items.length, 2);
    assert.deepEqual(res.json<DiarizationJson>().segments, [
      { start: 0.5, end: 2.5, speaker: 'speaker_0' },
      { start: 1, end: 1.5, speaker: 'speaker_1' },
    ]);
  });
});
