/**
 * `voxmux bench accuracy` against `npm start`'s server on its CPU default engine (pocketsphinx):
 * speech synthesized by flite with known sentences, one upload that is not audio, and a second run
 * scored against the first as its baseline.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AccuracyResults } from '../../bench/cli/accuracy-report.js';
import { runBenchCli } from '../../bench/cli/cli.js';
import { fliteWav } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

const SENTENCES = ['we will meet at the station at nine in the morning', 'the quick brown fox jumped over the lazy dog'];

async function bench(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runBenchCli(
    ['accuracy', ...args],
    { stdout: { write: (s: string) => ((out += s), true) }, stderr: { write: (s: string) => ((err += s), true) }, isTTY: false },
    { shouldHandleSignals: false },
  );
  return { code, out, err };
}

describe('bench accuracy against the default engine', () => {
  let server: RunningServer;
  let dir: string;
  let manifest: string;

  before(async () => {
    server = await startServer({ timeoutMs: 60_000 });
    dir = await mkdtemp(join(tmpdir(), 'voxmux-accuracy-e2e-'));
    SENTENCES.forEach((sentence, i) => fliteWav(sentence, join(dir, `s${i}.wav`)));
    await writeFile(join(dir, 'not-audio.wav'), 'this is not a recording');
    manifest = join(dir, 'manifest.jsonl');
    await writeFile(
      manifest,
      [
        JSON.stringify({ audio: 's0.wav', reference: 'We will meet at the station at nine in the morning.' }),
        JSON.stringify({ audio_filepath: join(dir, 's1.wav'), text: SENTENCES[1] }),
        JSON.stringify({ audio: 'not-audio.wav', reference: 'nothing' }),
        JSON.stringify({ audio: 's0.wav' }),
      ].join('\n'),
    );
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
  });

  it('scores each file against its reference and records the failed one', async () => {
    const run = await bench([
      '--url',
      server.url,
      '--model',
      'whisper-1',
      '--manifest',
      manifest,
      '--concurrency',
      '3',
      '--out',
      join(dir, 'first'),
    ]);
    assert.equal(run.code, 0, run.err);
    const results = JSON.parse(await readFile(join(dir, 'first', 'results.json'), 'utf8')) as AccuracyResults;
    assert.equal(results.schema, 'voxmux.bench.accuracy/1');
    assert.deepEqual([results.totals.items, results.totals.ok, results.totals.failed, results.totals.scored], [4, 3, 1, 2]);
    assert.ok(results.totals.wer !== undefined && results.totals.wer <= 0.25, `WER ${results.totals.wer}`);
    assert.equal(results.totals.referenceWords, 20);
    const failed = results.items.find((item) => item.audio === 'not-audio.wav')!;
    assert.ok(failed.status !== undefined && failed.status >= 400 && failed.status < 500, JSON.stringify(failed));
    assert.deepEqual(results.totals.errorsByCode, { [failed.errorCode!]: 1 });
    // The unreferenced line is transcribed like the first one, and not scored.
    const unscored = results.items[3]!;
    assert.equal(unscored.errors, undefined);
    assert.equal(unscored.hypothesis, results.items[0]!.hypothesis);
    assert.match(run.out, /WER: [\d.]+ % over 2 file\(s\), 20 reference words/);
    assert.match(await readFile(join(dir, 'first', 'summary.md'), 'utf8'), /\| not-audio\.wav \| /);
  });

  it('compares a second run with the first: one request at a time instead of three, the same transcripts', async () => {
    const run = await bench([
      '--url',
      `${server.url}/v1`,
      '--model',
      'pocketsphinx-en-us',
      '--manifest',
      manifest,
      '--concurrency',
      '1',
      '--baseline',
      join(dir, 'first', 'results.json'),
      '--out',
      join(dir, 'second'),
    ]);
    assert.equal(run.code, 0, run.err);
    const results = JSON.parse(await readFile(join(dir, 'second', 'results.json'), 'utf8')) as AccuracyResults;
    assert.deepEqual(results.baseline && [results.baseline.compared, results.baseline.changed, results.baseline.bothScored], [3, 0, 2]);
    assert.equal(results.baseline!.disagreement.wer, 0);
    assert.equal(results.baseline!.wer, results.baseline!.baselineWer);
    assert.match(run.out, /0 of 3 transcript\(s\) differ/);
  });

  it('fails clearly when nothing can be done', async () => {
    const unreachable = await bench([
      '--url',
      'http://127.0.0.1:9',
      '--model',
      'whisper-1',
      '--manifest',
      manifest,
      '--out',
      join(dir, 'x'),
    ]);
    assert.equal(unreachable.code, 2);
    assert.match(unreachable.err, /Cannot reach URL/);
    const missing = await bench(['--url', server.url, '--model', 'whisper-1']);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /Missing required flag: --manifest/);
    const onlyBad = join(dir, 'bad.jsonl');
    await writeFile(onlyBad, JSON.stringify({ audio: 'not-audio.wav', reference: 'x' }));
    const allFailed = await bench(['--url', server.url, '--model', 'whisper-1', '--manifest', onlyBad, '--out', join(dir, 'bad')]);
    assert.equal(allFailed.code, 1);
    assert.match(allFailed.err, /no file was transcribed/);
  });
});
