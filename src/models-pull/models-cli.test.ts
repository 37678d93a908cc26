import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HubTransport } from './hub-http.js';
import { MODELS_USAGE, PULL_USAGE, runModelsCli, type ModelsPullEnvironment } from './models-cli.js';

/** Usage errors are found before anything is sent: the transport refuses to be used. */
const NO_NETWORK: HubTransport = {
  get: () => Promise.reject(new Error('the network was used')),
  close: () => undefined,
};

async function run(argv: string[], env: ModelsPullEnvironment = {}) {
  let stdout = '';
  let stderr = '';
  const code = await runModelsCli(argv, {
    version: '1.0.0',
    env,
    homeDir: '/home/u',
    cwd: '/work',
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    transport: NO_NETWORK,
  });
  return { code, stdout, stderr };
}

describe('runModelsCli arguments', () => {
  it('prints the help of models and of models pull on stdout, and exits 0', async () => {
    assert.deepEqual(await run(['--help']), { code: 0, stdout: MODELS_USAGE, stderr: '' });
    assert.deepEqual(await run(['pull', '--help']), { code: 0, stdout: PULL_USAGE, stderr: '' });
    assert.deepEqual(await run(['pull', 'not a repo', '-h']), { code: 0, stdout: PULL_USAGE, stderr: '' });
  });

  it('exits 2 with the problem on stderr for bad arguments, before sending anything', async () => {
    for (const [argv, problem] of [
      [[], /usage: voxmux models/],
      [['list'], /Unknown command 'list'/],
      [['pull'], /Expected a repository id/],
      [['pull', 'a/b', 'c/d'], /Expected one repository id: got 2/],
      [['pull', 'a/b', '--concurrency', '0'], /Expected --concurrency to be an integer from 1 to 16: got '0'/],
      [['pull', 'a/b', '--bogus'], /Unknown option '--bogus'/],
      [['pull', 'a/b', '--endpoint', 'ftp://x'], /Expected --endpoint to be an http or https URL/],
      [['pull', '../etc'], /Expected a Hub repository id/],
      [['pull', 'a/b', '--dir', ''], /Expected --dir to name a folder: got ''/],
      [['pull', 'a/b', '--endpoint', ''], /Expected --endpoint to be an http or https URL: got ''/],
      [['pull', 'a/b', '--include', 'model-[9-0].bin'], /--include 'model-\[9-0\]\.bin' is not a valid pattern/],
      [['pull', 'a/b', '--exclude', '[z-a]*'], /--exclude '\[z-a\]\*' is not a valid pattern/],
    ] as const) {
      const r = await run([...argv]);
      assert.equal(r.code, 2, argv.join(' '));
      assert.match(r.stderr, problem);
    }
  });

  it('names HF_ENDPOINT when the endpoint that is not a URL came from it', async () => {
    const r = await run(['pull', 'a/b'], { hfEndpoint: 'hf-mirror.com' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /Expected HF_ENDPOINT to be an http or https URL: got 'hf-mirror\.com'/);
    const flag = await run(['pull', 'a/b', '--endpoint', 'hf-mirror.com'], { hfEndpoint: 'https://hf-mirror.com' });
    assert.match(flag.stderr, /Expected --endpoint to be an http or https URL: got 'hf-mirror\.com'/);
  });
});
