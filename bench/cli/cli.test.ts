import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runBenchCli } from './cli.js';
import { redactArgv } from './flags.js';

function capture() {
  let out = '';
  let err = '';
  const fetchCalls: string[] = [];
  return {
    io: { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) }, isTTY: false },
    deps: {
      fetch: (async (input: string | URL | Request) => {
        fetchCalls.push(String(input));
        throw new Error('no network in unit tests');
      }) as typeof fetch,
      shouldHandleSignals: false,
    },
    out: () => out,
    err: () => err,
    fetchCalls,
  };
}

describe('runBenchCli', () => {
  it('prints usage for help and exits 0, and exits 2 without a command', async () => {
    const help = capture();
    assert.equal(await runBenchCli(['--help'], help.io, help.deps), 0);
    assert.match(help.out(), /voxmux bench transcribe --url URL --model MODEL --audio FILE\|DIR/);
    const none = capture();
    assert.equal(await runBenchCli([], none.io, none.deps), 2);
    // An exit 2 is a failure: its usage goes to stderr, as for `voxmux models` and an unknown command.
    assert.equal(none.out(), '');
    assert.match(none.err(), /voxmux bench transcribe --url URL/);
  });

  it('routes accuracy: its own usage, and its flag errors before sending anything', async () => {
    const help = capture();
    assert.equal(await runBenchCli(['accuracy', '--help'], help.io, help.deps), 0);
    assert.match(help.out(), /voxmux bench accuracy --url URL --model MODEL --manifest FILE/);
    const cases: Array<[string[], RegExp]> = [
      [['accuracy', '--model', 'm', '--manifest', 'm.jsonl'], /Missing required flag: --url/],
      [
        ['accuracy', '--url', 'http://h', '--model', 'm', '--manifest', 'm.jsonl', '--concurrency', '0'],
        /--concurrency to be an integer from 1 to 256/,
      ],
      [['accuracy', '--url', 'http://h', '--model', 'm', '--manifest', '/nonexistent/m.jsonl'], /cannot be read/],
      [['accuracy', '--url', 'http://h', '--model', 'm', '--manifest', 'm.jsonl', '--field', 'model=x'], /field other than model/],
    ];
    for (const [argv, message] of cases) {
      const run = capture();
      assert.equal(await runBenchCli(argv, run.io, run.deps), 2, argv.join(' '));
      assert.match(run.err(), message);
      assert.deepEqual(run.fetchCalls, []);
    }
  });

  it('routes speech: its own usage, and its flag errors before sending anything', async () => {
    const help = capture();
    assert.equal(await runBenchCli(['speech', '--help'], help.io, help.deps), 0);
    assert.match(help.out(), /voxmux bench speech --url URL --model MODEL/);
    assert.match(help.out(), /--mix uniform\|zipf/);
    const speech = ['speech', '--url', 'http://h', '--model', 'm'];
    const cases: Array<[string[], RegExp]> = [
      [['speech', '--model', 'm'], /Missing required flag: --url/],
      [['speech', '--url', 'http://h'], /Missing required flag: --model/],
      [[...speech, '--mix', 'pareto'], /--mix to be uniform or zipf/],
      [[...speech, '--zipf-s', '1.2'], /--zipf-s only with --mix zipf/],
      [[...speech, '--mix', 'zipf', '--zipf-s', '11'], /--zipf-s to be a number from 0 to 10/],
      [[...speech, '--voice-count', '8'], /--voice-prefix and --voice-count together/],
      [[...speech, '--voices', 'a', '--voice-prefix', 'v', '--voice-count', '2'], /either --voices or --voice-prefix/],
      [[...speech, '--voice-prefix', 'v', '--voice-count', '0'], /--voice-count to be an integer from 1/],
      [[...speech, '--speed', '5'], /--speed to be a number from 0.25 to 4/],
      [[...speech, '--text-file', '/nonexistent/lines.txt'], /--text-file to name a readable file/],
      [[...speech, '--slo', 'stalls<=2s'], /share of calls with a stall in % or as a fraction/],
      [[...speech, '--audio', 'x.wav'], /Unknown option '--audio'/],
    ];
    for (const [argv, message] of cases) {
      const run = capture();
      assert.equal(await runBenchCli(argv, run.io, run.deps), 2, argv.join(' '));
      assert.match(run.err(), message, argv.join(' '));
      assert.deepEqual(run.fetchCalls, []);
    }
  });

  it('rejects bad flags with exit 2 and a message naming the problem, before sending anything', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['transcribe', '--model', 'm', '--audio', 'x.wav'], /Missing required flag: --url/],
      [['transcribe', '--url', 'http://h', '--audio', 'x.wav'], /Missing required flag: --model/],
      [['transcribe', '--url', 'http://h', '--model', 'm'], /Missing required flag: --audio/],
      [
        ['transcribe', '--url', 'http://h', '--model', 'm', '--audio', 'x.wav', '--rate', '5', '--concurrency', '1'],
        /either --concurrency .* or --rate/,
      ],
      [
        ['transcribe', '--url', 'http://h', '--model', 'm', '--audio', 'x.wav', '--reps', '0'],
        /Expected --reps to be an integer from 1 to 100: got '0'/,
      ],
      [
        ['transcribe', '--url', 'http://h', '--model', 'm', '--audio', 'x.wav', '--duration-s', 'soon'],
        /Expected --duration-s to be a number/,
      ],
      [
        ['transcribe', '--url', 'http://h', '--model', 'm', '--audio', 'x.wav', '--field', 'model=x'],
        /--field to set a field other than model/,
      ],
      [['transcribe', '--url', 'http://h', '--model', 'm', '--audio', 'x.wav', '--gpu', 'maybe'], /--gpu to be auto or off/],
      [['transcribe', '--url', 'http://h', '--model', 'm', '--audio', 'x.wav', '--abandon-after-s', '-1'], /--abandon-after-s/],
      [['transcribe', '--url', 'http://h', '--model', 'm', '--audio', 'x.wav', '--slo', 'p95>=1s'], /SLO clause/],
      [['transcribe', '--url', 'http://h', '--model', 'm', '--audio', '/nonexistent/x.wav'], /does not exist/],
      [
        ['transcribe', '--url', 'http://h', '--model', 'm', '--audio', 'x.wav', '--commit', 'HEAD'],
        /Expected --commit to be a commit hash \(7 to 64 hex digits\): got 'HEAD'/,
      ],
      [['transcribe', '--bogus'], /Unknown option '--bogus'/],
      [['compare', 'only-one.json'], /at least two results files/],
      [['plot'], /Unknown bench command 'plot'/],
    ];
    for (const [argv, pattern] of cases) {
      const run = capture();
      assert.equal(await runBenchCli(argv, run.io, run.deps), 2, argv.join(' '));
      assert.match(run.err(), pattern, argv.join(' '));
      assert.deepEqual(run.fetchCalls, []);
    }
  });
});

describe('runBenchCli output directory', () => {
  it('refuses an --out that cannot be created, before contacting the server', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voxmux-cli-'));
    try {
      await writeFile(join(dir, 'a.mp3'), 'ID3 bytes');
      await writeFile(join(dir, 'file'), 'not a directory');
      const run = capture();
      const argv = ['transcribe', '--url', 'http://h', '--model', 'm', '--audio', join(dir, 'a.mp3'), '--out', join(dir, 'file', 'sub')];
      assert.equal(await runBenchCli(argv, run.io, run.deps), 2);
      assert.match(run.err(), /Expected --out to name a writable directory/);
      assert.deepEqual(run.fetchCalls, []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('redactArgv', () => {
  it('hides API keys in both flag forms', () => {
    assert.deepEqual(redactArgv(['--url', 'u', '--api-key', 'sk-secret', '--api-key=sk-2', '--model', 'm']), [
      '--url',
      'u',
      '--api-key',
      '***',
      '--api-key=***',
      '--model',
      'm',
    ]);
  });
});
