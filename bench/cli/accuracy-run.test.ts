import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { systemClock, type Clock } from '../../src/core/clock.js';
import { occurrenceKeys, type AccuracyItem } from './accuracy-manifest.js';
import { runAccuracy, type AccuracyRunOptions } from './accuracy-run.js';
import { MAX_RESPONSE_BYTES } from './transcribe-workload.js';

type Answer = (audioName: string, signal: AbortSignal) => Promise<Response>;

async function items(names: string[]): Promise<AccuracyItem[]> {
  const dir = await mkdtemp(join(tmpdir(), 'voxmux-accuracy-'));
  const out: AccuracyItem[] = [];
  for (const name of names) {
    await writeFile(join(dir, name), `audio of ${name}`);
    out.push({ audio: name, audioPath: join(dir, name), reference: `words of ${name}` });
  }
  return out;
}

/** A fetch double that answers through `answer`, tracking how many calls overlap. */
function fakeFetch(answer: Answer): { fetch: typeof globalThis.fetch; maxInFlight: () => number; bodies: string[] } {
  let inFlight = 0;
  let maxInFlight = 0;
  const bodies: string[] = [];
  const fetch = (async (_url: string | URL | Request, init?: RequestInit) => {
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      const body = Buffer.from(init!.body as Uint8Array).toString('latin1');
      bodies.push(body);
      const name = /filename="([^"]+)"/.exec(body)![1]!;
      return await answer(name, init!.signal!);
    } finally {
      inFlight -= 1;
    }
  }) as typeof globalThis.fetch;
  return { fetch, maxInFlight: () => maxInFlight, bodies };
}

// The system clock's timers are unref'd; a fetch double holds no socket, so the test's timers must keep Node running.
const clock: Clock = {
  ...systemClock,
  setTimeout(callback, delayMs) {
    const handle = setTimeout(callback, delayMs);
    return { cancel: () => clearTimeout(handle) };
  },
};

const json = (value: unknown, status = 200): Response =>
  new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json' } });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function options(list: AccuracyItem[], extra: Partial<AccuracyRunOptions> = {}): AccuracyRunOptions {
  return {
    endpoint: 'http://127.0.0.1:1/v1/audio/transcriptions',
    model: 'm',
    items: list,
    concurrency: 2,
    timeoutMs: 5000,
    extraFields: [],
    ...extra,
  };
}

describe('runAccuracy', () => {
  it('sends each file once with the model and fields, at most `concurrency` at a time, and scores it', async () => {
    const list = await items(['a.wav', 'b.wav', 'c.wav', 'd.wav', 'e.wav']);
    const double = fakeFetch(async (name) => {
      await sleep(5);
      return json({ text: name === 'b.wav' ? 'words of something' : `Words of ${name}!` });
    });
    const run = await runAccuracy(options(list, { concurrency: 2, extraFields: [['language', 'en']] }), {
      fetch: double.fetch,
      clock,
    });
    assert.equal(double.maxInFlight(), 2);
    assert.equal(double.bodies.length, 5);
    assert.ok(double.bodies.every((body) => body.includes('name="model"\r\n\r\nm\r\n') && body.includes('name="language"\r\n\r\nen\r\n')));
    assert.deepEqual(
      run.items.map((item) => item.audio),
      ['a.wav', 'b.wav', 'c.wav', 'd.wav', 'e.wav'],
    );
    // 'Words of a.wav!' against 'words of a.wav': four words each once normalized.
    assert.deepEqual(run.items[0]!.errors, { referenceWords: 4, hypothesisWords: 4, substitutions: 0, deletions: 0, insertions: 0 });
    assert.equal(run.items[1]!.errors!.substitutions, 1);
    assert.equal(run.isInterrupted, false);
  });

  it('records why a file failed: the error envelope, a bad body, a timeout, unreadable audio', async () => {
    const list = await items(['envelope.wav', 'bad.wav', 'slow.wav', 'gone.wav', 'fine.wav']);
    await rm(list[3]!.audioPath);
    const double = fakeFetch(async (name, signal) => {
      if (name === 'envelope.wav') return json({ error: { message: 'no', type: 'invalid_request_error', code: 'unsupported_audio' } }, 415);
      if (name === 'bad.wav') return json({ transcript: 'wrong shape' });
      if (name === 'slow.wav') {
        await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
      }
      return json({ text: `words of ${name}` });
    });
    const run = await runAccuracy(options(list, { timeoutMs: 100, concurrency: 5 }), { fetch: double.fetch, clock });
    assert.deepEqual(
      run.items.map((item) => [item.audio, item.status, item.errorCode]),
      [
        ['envelope.wav', 415, 'unsupported_audio'],
        ['bad.wav', 200, 'bad_response'],
        ['slow.wav', undefined, 'timeout'],
        ['gone.wav', undefined, 'audio_unreadable'],
        ['fine.wav', 200, undefined],
      ],
    );
    assert.equal(run.items[0]!.errors, undefined);
  });

  it('refuses an answer larger than the bound instead of holding it', async () => {
    const list = await items(['huge.wav']);
    const double = fakeFetch(async () => new Response(new Uint8Array(MAX_RESPONSE_BYTES + 1), { status: 200 }));
    const run = await runAccuracy(options(list), { fetch: double.fetch, clock });
    assert.deepEqual(
      run.items.map((item) => [item.status, item.errorCode]),
      [[200, 'response_too_large']],
    );
  });

  it('scores against the baseline transcript of the same audio', async () => {
    const list = await items(['a.wav', 'b.wav']);
    const double = fakeFetch(async (name) => json({ text: `words of ${name}` }));
    const run = await runAccuracy(options(list, { baseline: new Map([[occurrenceKeys(['a.wav'])[0]!, 'words for a.wav']]) }), {
      fetch: double.fetch,
      clock,
    });
    assert.equal(run.items[0]!.baselineErrors!.substitutions, 1);
    assert.equal(run.items[1]!.baselineErrors, undefined);
  });

  it('stops on abort: files in flight fail as interrupted, the rest are not sent', async () => {
    const list = await items(['a.wav', 'b.wav', 'c.wav', 'd.wav']);
    const controller = new AbortController();
    const double = fakeFetch(async (_name, signal) => {
      setTimeout(() => controller.abort(), 10);
      await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
      return json({ text: '' });
    });
    const run = await runAccuracy(options(list, { concurrency: 2 }), {
      fetch: double.fetch,
      clock,
      signal: controller.signal,
    });
    assert.equal(run.isInterrupted, true);
    assert.deepEqual(
      run.items.map((item) => [item.audio, item.errorCode]),
      [
        ['a.wav', 'interrupted'],
        ['b.wav', 'interrupted'],
      ],
    );
    assert.equal(double.bodies.length, 2);
  });
});
