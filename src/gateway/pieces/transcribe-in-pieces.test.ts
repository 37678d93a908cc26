import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errors } from '../../core/error-catalog.js';
import type { SubmitOptions, TranscriptionRequest, TranscriptResult } from '../../scheduler/index.js';
import { stitchPieces } from './stitch.js';
import { transcribeInPieces, type ReadyPiece } from './transcribe-in-pieces.js';
import { energyActivity } from './voice-activity.js';

function result(text: string, durationS: number, words = true): TranscriptResult {
  const tokens = text === '' ? [] : text.split(' ');
  return {
    text,
    language: 'en',
    durationS,
    segments: text === '' ? [] : [{ start: 0.1, end: durationS - 0.1, text, decoding: null }],
    words: words ? tokens.map((word, i) => ({ word, start: i * 0.5, end: i * 0.5 + 0.4 })) : null,
  };
}

interface Pending {
  request: TranscriptionRequest;
  options: SubmitOptions;
  resolve: (r: TranscriptResult) => void;
  reject: (e: unknown) => void;
}

function harness() {
  const pending: Pending[] = [];
  const submit = (request: TranscriptionRequest, options: SubmitOptions) =>
    new Promise<TranscriptResult>((resolve, reject) => pending.push({ request, options, resolve, reject }));
  return { pending, submit };
}

const flush = () => new Promise((r) => setImmediate(r));
const REQUEST: TranscriptionRequest = { audio: new Int16Array(48_000), language: null, prompt: null, wordTimestamps: true };
const RANGES = [
  { startSample: 0, endSample: 16_000 },
  { startSample: 16_000, endSample: 40_000 },
  { startSample: 40_000, endSample: 48_000 },
];

describe('transcribeInPieces', () => {
  it('judges the call as a whole: only its last piece, submitted after the others, is predicted (#16)', () => {
    const { pending, submit } = harness();
    void transcribeInPieces({ request: REQUEST, ranges: RANGES, sampleRateHz: 16_000, options: { timeoutMs: 1000 }, submit }).catch(
      () => undefined,
    );
    assert.deepEqual(
      pending.map((p) => p.options.admission),
      ['queueLimitOnly', 'queueLimitOnly', undefined],
    );
  });

  it('submits every piece at once and hears them in order as each and all before it are done', async () => {
    const { pending, submit } = harness();
    const ready: ReadyPiece[] = [];
    const done = transcribeInPieces({
      request: REQUEST,
      ranges: RANGES,
      sampleRateHz: 16_000,
      options: { timeoutMs: 1000, requestId: 'r1', priority: 'high' },
      submit,
      onReady: (p) => ready.push(p),
    });
    assert.equal(pending.length, 3);
    assert.deepEqual(
      pending.map((p) => [p.request.audio.length, p.options.requestId, p.options.priority, p.request.piece]),
      [
        [16_000, 'r1.0', 'high', true],
        [24_000, 'r1.1', 'high', true],
        [8000, 'r1.2', 'high', true],
      ],
    );
    assert.equal(pending[1]!.request.audio.byteOffset, 32_000);
    pending[1]!.resolve(result('two words', 1.5));
    await flush();
    assert.equal(ready.length, 0);
    pending[0]!.resolve(result('', 1));
    await flush();
    assert.deepEqual(ready, [
      { index: 0, delta: '' },
      { index: 1, delta: 'two words' },
    ]);
    pending[2]!.resolve(result('three', 0.5));
    const stitched = await done;
    assert.deepEqual(ready[2], { index: 2, delta: ' three' });
    assert.equal(stitched.text, 'two words three');
    assert.equal(ready.map((r) => r.delta).join(''), stitched.text);
    assert.equal(stitched.durationS, 3);
    assert.deepEqual(stitched.segments, [
      { start: 1.1, end: 2.4, text: 'two words', decoding: null },
      { start: 2.6, end: 2.9, text: 'three', decoding: null },
    ]);
    assert.deepEqual(
      stitched.words?.map((w) => [w.word, w.start]),
      [
        ['two', 1],
        ['words', 1.5],
        ['three', 2.5],
      ],
    );
  });

  it('sends one range, the whole recording, as a clip of its own, not a piece', () => {
    const { pending, submit } = harness();
    const whole = [{ startSample: 0, endSample: 48_000 }];
    void transcribeInPieces({ request: REQUEST, ranges: whole, sampleRateHz: 16_000, options: { timeoutMs: 1000 }, submit }).catch(
      () => undefined,
    );
    assert.deepEqual(
      pending.map((p) => [p.request.audio.length, p.request.piece]),
      [[48_000, false]],
    );
  });

  it('fails with the first error and aborts the other pieces', async () => {
    const { pending, submit } = harness();
    const done = transcribeInPieces({ request: REQUEST, ranges: RANGES, sampleRateHz: 16_000, options: { timeoutMs: 1000 }, submit });
    const error = errors.queueFull({ model: 'm', queued: 1, retryAfterMs: 1000 });
    pending[2]!.reject(error);
    await assert.rejects(done, (e) => e === error);
    assert.ok(pending[0]!.options.signal?.aborted);
    pending[0]!.resolve(result('late', 1));
  });

  it("aborts the pieces when the call's signal aborts", async () => {
    const { pending, submit } = harness();
    const call = new AbortController();
    const done = transcribeInPieces({
      request: REQUEST,
      ranges: RANGES,
      sampleRateHz: 16_000,
      options: { timeoutMs: 1000, signal: call.signal },
      submit,
    });
    call.abort(errors.clientDisconnected({ requestId: 'r' }));
    assert.ok(pending.every((p) => p.options.signal?.aborted));
    pending[0]!.reject(pending[0]!.options.signal!.reason);
    await assert.rejects(done, (e: { code?: string }) => e.code === 'client_disconnected');
  });
});

describe('stitchPieces', () => {
  it('gives a piece without segments one segment spanning it, and keeps words null when no piece has any', () => {
    const r = { ...result('hello', 2, false), segments: null };
    const stitched = stitchPieces([{ offsetS: 30, durationS: 2, result: r }], 32);
    assert.deepEqual(stitched.segments, [{ start: 30, end: 32, text: 'hello', decoding: null }]);
    assert.equal(stitched.words, null);
  });

  it("moves a Whisper segment's window start (seek, 10 ms frames) by its piece's offset", () => {
    const decoding = { seek: 250, tokens: [1, 2], temperature: 0, avgLogprob: -0.5, compressionRatio: 1.5, noSpeechProb: 0.25 };
    const r = { ...result('hello', 2, false), segments: [{ start: 2.5, end: 3, text: ' hello', decoding }] };
    const stitched = stitchPieces([{ offsetS: 22.52, durationS: 3, result: r }], 25.52);
    assert.deepEqual(stitched.segments, [{ start: 25.02, end: 25.52, text: 'hello', decoding: { ...decoding, seek: 2502 } }]);
  });
});

describe('energyActivity', () => {
  it('reads pauses low and speech high whatever the level', () => {
    const audio = new Int16Array(48_000);
    for (let i = 0; i < audio.length; i++) if (i < 16_000 || i >= 32_000) audio[i] = Math.round(300 * Math.sin(i / 3));
    const { frameSamples, values } = energyActivity(audio);
    assert.equal(frameSamples, 480);
    assert.ok(values[5]! > 0.9);
    assert.ok(values[Math.floor(24_000 / 480)]! < 0.1);
  });
});

describe('transcribeInPieces and a call already aborted', () => {
  it('aborts every piece when the call signal had aborted before it was called', async () => {
    const { pending, submit } = harness();
    const call = new AbortController();
    call.abort(errors.clientDisconnected({ requestId: 'r' }));
    void transcribeInPieces({
      request: REQUEST,
      ranges: RANGES,
      sampleRateHz: 16_000,
      options: { timeoutMs: 1000, signal: call.signal },
      submit,
    }).catch(() => undefined);
    assert.deepEqual(
      pending.map((p) => p.options.signal?.aborted),
      [true, true, true],
    );
  });
});
