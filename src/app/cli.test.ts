import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runCli, SERVE_USAGE, USAGE, type CliDeps } from './cli.js';

/** Runs the command with captured output; the server and the bench are recorders, never started. */
async function run(argv: string[], deps: Partial<CliDeps> = {}) {
  let stdout = '';
  let stderr = '';
  const served: (readonly string[])[] = [];
  const benched: (readonly string[])[] = [];
  const code = await runCli(argv, {
    version: '1.2.3',
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    serve: async (args) => {
      served.push(args);
      return 0;
    },
    loadBench: async () => async (args) => {
      benched.push(args);
      return 0;
    },
    ...deps,
  });
  return { code, stdout, stderr, served, benched };
}

describe('runCli --help and --version (#16)', () => {
  it('prints the command usage on stdout and exits 0 for --help, -h and help', async () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const r = await run(argv);
      assert.deepEqual([r.code, r.stdout, r.stderr, r.served.length], [0, USAGE, '', 0]);
    }
  });

  it("prints serve's usage for serve --help, before any other flag is read", async () => {
    for (const argv of [
      ['serve', '--help'],
      ['serve', '-h'],
      ['serve', '--port', 'nope', '--help'],
      ['serve', '--bogus', '--help'],
    ]) {
      const r = await run(argv);
      assert.deepEqual([r.code, r.stdout, r.served.length], [0, SERVE_USAGE, 0]);
    }
    assert.match(SERVE_USAGE, /--log-format F/);
  });

  it('prints the version for --version on every command, and the version command', async () => {
    for (const argv of [['--version'], ['version'], ['serve', '--version'], ['bench', '--version'], ['bench', 'transcribe', '--version']]) {
      const r = await run(argv);
      assert.deepEqual([r.code, r.stdout, r.served.length, r.benched.length], [0, 'voxmux 1.2.3\n', 0, 0], argv.join(' '));
    }
  });

  it('leaves bench help to the bench, whose subcommands answer their own --help', async () => {
    const r = await run(['bench', 'accuracy', '--help', '--version']);
    assert.deepEqual([r.code, r.benched], [0, [['accuracy', '--help', '--version']]]);
  });

  it('runs cost as the bench command cost, its help included (#20)', async () => {
    assert.deepEqual((await run(['cost', 'a.jsonl', '--gpu-hour-usd', '2'])).benched, [['cost', 'a.jsonl', '--gpu-hour-usd', '2']]);
    assert.deepEqual((await run(['cost', '--help'])).benched, [['cost', '--help']]);
    assert.match(USAGE, /\n {2}cost {5}/);
  });

  it('runs models with its arguments, and answers --version itself', async () => {
    const modelled: (readonly string[])[] = [];
    const models = async (args: readonly string[]) => {
      modelled.push(args);
      return 0;
    };
    assert.equal((await run(['models', 'pull', 'nvidia/parakeet-tdt-0.6b-v2', '--dir', 'm'], { models })).code, 0);
    assert.deepEqual((await run(['models', '--version'], { models })).stdout, 'voxmux 1.2.3\n');
    assert.deepEqual(modelled, [['pull', 'nvidia/parakeet-tdt-0.6b-v2', '--dir', 'm']]);
    assert.match(USAGE, /\n {2}models {3}download model files from the Hugging Face Hub/);
  });

  it('serves with the flags when no command is given, and reads nothing after --', async () => {
    assert.deepEqual((await run([])).served, [[]]);
    assert.deepEqual((await run(['--port', '9000'])).served, [['--port', '9000']]);
    assert.deepEqual((await run(['serve', '--', '--help'])).served, [['--', '--help']]);
  });

  it('exits 2 with the usage on stderr for an unknown command', async () => {
    const r = await run(['serv']);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /unknown command 'serv'/);
  });
});
