import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { advanceSettling, FakeClock, settle } from '../../test/support/fake-clock.js';
import { pcm16Wav } from '../../test/support/audio.js';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mergeDiarizeLoadRuns, runDiarizeAccuracy, runDiarizeLoad, splitWav, type DiarizeLoadRun } from './diarize-run.js';
import { diarizeLoadLines, summarizeDiarizeLoad } from './diarize-report.js';

describe('splitWav (#17)', () => {
  it('cuts a 16-bit WAV into WAV chunks of the given length, the last one shorter', () => {
    const { chunks, chunkSeconds } = splitWav(new Uint8Array(pcm16Wav(new Int16Array(40_000))), 1);
    assert.deepEqual(chunkSeconds, [1, 1, 0.5]);
    assert.deepEqual(
      chunks.map((c) => c.byteLength),
      [44 + 32_000, 44 + 32_000, 44 + 16_000],
    );
    assert.equal(Buffer.from(chunks[2]!.subarray(0, 4)).toString('ascii'), 'RIFF');
    assert.throws(() => splitWav(new Uint8Array(Buffer.from('not a wav file at all')), 1), /WAV/);
  });

  it("keeps a float WAV's format chunk (extended, with a fact chunk) in every chunk", () => {
    // 32-bit float mono at 16 kHz: an 18-byte fmt chunk, a fact chunk, 1.5 s of samples.
    const fmt = Buffer.alloc(8 + 18);
    fmt.write('fmt ', 0, 'ascii');
    fmt.writeUInt32LE(18, 4);
    fmt.writeUInt16LE(3, 8);
    fmt.writeUInt16LE(1, 10);
    fmt.writeUInt32LE(16_000, 12);
    fmt.writeUInt32LE(64_000, 16);
    fmt.writeUInt16LE(4, 20);
    fmt.writeUInt16LE(32, 22);
    const fact = Buffer.from([...Buffer.from('fact'), 4, 0, 0, 0, 0, 0x5d, 0, 0]);
    const samples = new Float32Array(24_000).map((_, i) => Math.sin(i / 10));
    const data = Buffer.concat([Buffer.from('data'), Buffer.alloc(4), Buffer.from(samples.buffer)]);
    data.writeUInt32LE(samples.byteLength, 4);
    const riff = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVE'), fmt, fact, data]);
    riff.writeUInt32LE(riff.byteLength - 8, 4);
    const { chunks, chunkSeconds } = splitWav(new Uint8Array(riff), 1);
    assert.deepEqual(chunkSeconds, [1, 0.5]);
    const second = Buffer.from(chunks[1]!);
    assert.deepEqual(second.subarray(12, 12 + fmt.byteLength), fmt);
    assert.equal(second.readUInt32LE(4), second.byteLength - 8);
    assert.deepEqual(
      new Float32Array(second.buffer.slice(second.byteOffset + 12 + fmt.byteLength + 8, second.byteOffset + second.byteLength)),
      samples.subarray(16_000),
    );
  });
});

describe('runDiarizeLoad (#17)', () => {
  it('sends each session a chunk every chunk length in real time, starts spread over one chunk, and counts expiries', async () => {
    const clock = new FakeClock();
    const sent: { url: string; atMs: number }[] = [];
    const fetch = (async (url: string | URL, init?: RequestInit) => {
      const u = String(url);
      sent.push({ url: u, atMs: clock.nowMs() });
      if (u.endsWith('/sessions'))
        return new Response(JSON.stringify({ id: `s${sent.filter((s) => s.url === u).length}` }), { status: 201 });
      if (u.includes('/s2/chunks') && String(init?.body).length > 0 && sent.filter((s) => s.url.includes('/s2/chunks')).length === 3) {
        return new Response(
          JSON.stringify({ error: { code: 'session_expired', message: 'expired', type: 'invalid_request_error', param: null } }),
          { status: 404 },
        );
      }
      return new Response('{}', { status: 200 });
    }) as typeof globalThis.fetch;
    const recording = splitWav(new Uint8Array(pcm16Wav(new Int16Array(48_000))), 1);
    const done = runDiarizeLoad(
      { sessionsUrl: 'http://h/v1/audio/diarization/sessions', model: 'm', sessions: 2, recording, pacing: 'realtime', timeoutMs: 10_000 },
      { fetch, clock },
    );
    await settle();
    await advanceSettling(clock, 4000, 50);
    const run = await done;
    const chunkTimes = (session: string) => sent.filter((s) => s.url.includes(`/${session}/chunks`)).map((s) => s.atMs);
    assert.deepEqual(chunkTimes('s1'), [0, 1000, 2000]);
    assert.deepEqual(chunkTimes('s2'), [500, 1500, 2500]);
    const totals = summarizeDiarizeLoad(run, 2);
    assert.equal(totals.chunks, 6);
    assert.equal(totals.ok, 5);
    assert.equal(totals.expiries, 1);
    assert.deepEqual(totals.errors, { session_expired: 1 });
    assert.equal(sent.filter((s) => s.url.endsWith('/s1')).length, 1, 'the whole session is closed');
    assert.equal(sent.filter((s) => s.url.endsWith('/s2')).length, 0, 'an expired one is not');
  });

  it('records how late each chunk left its schedule: a slow answer delays the next chunk of its session', async () => {
    const clock = new FakeClock();
    let chunkCalls = 0;
    const fetch = (async (url: string | URL) => {
      const u = String(url);
      if (u.endsWith('/sessions')) return new Response(JSON.stringify({ id: 's1' }), { status: 201 });
      // The first chunk's answer takes 1.5 s: longer than the 1 s chunk.
      if (u.endsWith('/chunks') && (chunkCalls += 1) === 1) await new Promise<void>((resolve) => clock.setTimeout(resolve, 1500));
      return new Response('{}', { status: 200 });
    }) as typeof globalThis.fetch;
    const recording = splitWav(new Uint8Array(pcm16Wav(new Int16Array(48_000))), 1);
    const done = runDiarizeLoad(
      { sessionsUrl: 'http://h/v1/audio/diarization/sessions', model: 'm', sessions: 1, recording, pacing: 'realtime', timeoutMs: 10_000 },
      { fetch, clock },
    );
    await settle();
    await advanceSettling(clock, 4000, 50);
    const run = await done;
    assert.deepEqual(
      run.chunks.map((c) => [c.seq, c.lateMs]),
      [
        [0, 0],
        [1, 500],
        [2, 0],
      ],
    );
    const totals = summarizeDiarizeLoad(run, 1);
    assert.deepEqual([totals.sentLate, totals.maxLateMs], [1, 500]);
    assert.match(diarizeLoadLines(totals).join('\n'), /Pacing: 1 of 3 chunks sent late \(>= 50 ms after their time\), at most 500 ms late/);
  });

  it("runs only its share of a spread run's sessions, each at its start in the whole run, after the common start", async () => {
    const clock = new FakeClock();
    const chunkAt: { session: string; atMs: number }[] = [];
    let created = 0;
    const fetch = (async (url: string | URL) => {
      const u = String(url);
      if (u.endsWith('/sessions')) return new Response(JSON.stringify({ id: `s${(created += 1)}` }), { status: 201 });
      const match = /\/(s\d+)\/chunks$/.exec(u);
      if (match !== null) chunkAt.push({ session: match[1]!, atMs: clock.nowMs() });
      return new Response('{}', { status: 200 });
    }) as typeof globalThis.fetch;
    const recording = splitWav(new Uint8Array(pcm16Wav(new Int16Array(32_000))), 1);
    const done = runDiarizeLoad(
      {
        sessionsUrl: 'http://h/v1/audio/diarization/sessions',
        model: 'm',
        sessions: 4,
        recording,
        pacing: 'realtime',
        timeoutMs: 10_000,
        share: { index: 1, of: 2 },
        startInMs: 300,
      },
      { fetch, clock },
    );
    await settle();
    await advanceSettling(clock, 3000, 50);
    const run = await done;
    // Sessions 1 and 3 of 4 (starts at 250 and 750 ms in the whole run), after 300 ms.
    assert.deepEqual(
      run.chunks.map((c) => [c.session, c.seq]),
      [
        [1, 0],
        [3, 0],
        [1, 1],
        [3, 1],
      ],
    );
    assert.deepEqual(
      chunkAt.map((c) => c.atMs),
      [550, 1050, 1550, 2050],
    );
    assert.equal(run.wallS, 1.75);
  });
});

describe('mergeDiarizeLoadRuns (#17)', () => {
  it('joins the parts of a spread run: samples in session order, create errors summed, the longest wall time', () => {
    const part = (sessions: number[], wallS: number, createErrors: Record<string, number>): DiarizeLoadRun => ({
      chunks: sessions.map((session) => ({ session, seq: 0, latencyMs: session, lateMs: 0, audioS: 1 })),
      createErrors,
      wallS,
      isInterrupted: false,
    });
    const merged = mergeDiarizeLoadRuns([
      part([1, 3], 2.5, { queue_full: 1 }),
      { ...part([0, 2], 3, { queue_full: 2, internal_error: 1 }), isInterrupted: true },
    ]);
    assert.deepEqual(
      merged.chunks.map((c) => c.session),
      [0, 1, 2, 3],
    );
    assert.deepEqual(merged.createErrors, { queue_full: 3, internal_error: 1 });
    assert.equal(merged.wallS, 3);
    assert.equal(merged.isInterrupted, true);
  });
});

describe('runDiarizeAccuracy in chunks', () => {
  it("marks the recording's last chunk is_last, so the engine finishes the session before the final timeline is read", async () => {
    // Without is_last a streaming engine never runs the steps that still wait for audio (Sortformer's
    // chunk-15s step needs 14.96 s, plus right context, before it runs): the DELETE's timeline then
    // would lack the recording's tail, which the scorer counts as missed speech (the load run,
    // runDiarizeLoad, sends it too).
    const dir = await mkdtemp(join(tmpdir(), 'voxmux-diar-acc-'));
    const audioPath = join(dir, 'a.wav');
    const rttmPath = join(dir, 'a.rttm');
    await writeFile(audioPath, pcm16Wav(new Int16Array(40_000)));
    await writeFile(rttmPath, 'SPEAKER a 1 0.00 2.50 <NA> <NA> A <NA> <NA>\n');
    const chunkBodies: string[] = [];
    const fetch = (async (url: string | URL, init?: RequestInit) => {
      const u = String(url);
      if (u.endsWith('/sessions')) return new Response(JSON.stringify({ id: 's1' }), { status: 201 });
      if (u.endsWith('/chunks')) {
        chunkBodies.push(Buffer.from(init?.body as Uint8Array).toString('latin1'));
        return new Response('{}', { status: 200 });
      }
      return new Response(JSON.stringify({ segments: [{ start: 0, end: 2.5, speaker: 'speaker_0' }] }), { status: 200 });
    }) as typeof globalThis.fetch;
    const run = await runDiarizeAccuracy(
      {
        endpoint: 'http://h/v1/audio/diarization',
        model: 'm',
        items: [{ audio: 'a.wav', audioPath, rttmPath }],
        concurrency: 1,
        timeoutMs: 10_000,
        collarS: 0.25,
        extraFields: [],
        chunkS: 1,
      },
      { fetch, clock: new FakeClock() },
    );
    assert.equal(run.items[0]?.score?.der, 0);
    assert.equal(chunkBodies.length, 3);
    const isLast = (body: string) => /name="is_last"\r\n\r\ntrue\r\n/.test(body);
    assert.deepEqual(chunkBodies.map(isLast), [false, false, true]);
  });
});
