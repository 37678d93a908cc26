/**
 * `voxmux models pull` against a Hub and a CDN on loopback (test/support/fake-hub.ts): the real
 * transport, file system and command line; retries wait on a clock that fires at once and records
 * the delays asked for. Nothing here reaches the network.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import type { Clock } from '../../src/core/clock.js';
import { runModelsCli, type ModelsPullEnvironment } from '../../src/models-pull/index.js';
import { commitOf, FakeHub, gitOidOf, sha256Of, type FakeRepo } from '../support/fake-hub.js';

const TOKEN = 'hf_test_token';

/** Deterministic bytes that differ along the file. */
function bytesOf(length: number, seed: number): Buffer {
  const out = Buffer.alloc(length);
  let x = seed;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

const WEIGHTS = bytesOf(300_000, 1);
const NEMO = bytesOf(120_000, 2);
const CONFIG = Buffer.from('{"d_model": 8}\n');

const REPOS: Record<string, FakeRepo> = {
  'acme/tiny-model': {
    commit: commitOf('tiny-model'),
    revisions: ['v1.0'],
    files: {
      'config.json': { content: CONFIG },
      'weights.bin': { content: WEIGHTS, isLfs: true },
      'README.md': { content: Buffer.from('# tiny\n') },
    },
  },
  'acme/private-model': { commit: commitOf('private'), isPrivate: true, files: { 'weights.bin': { content: WEIGHTS, isLfs: true } } },
  'acme/gated-model': { commit: commitOf('gated'), isGated: true, files: { 'weights.bin': { content: WEIGHTS, isLfs: true } } },
  'nvidia/parakeet-tdt-0.6b-v2': {
    commit: commitOf('parakeet'),
    files: {
      '.gitattributes': { content: Buffer.from('*.nemo filter=lfs\n') },
      'README.md': { content: Buffer.from('# parakeet\n') },
      'parakeet-tdt-0.6b-v2.nemo': { content: NEMO, isLfs: true },
    },
  },
  'rhasspy/piper-voices': {
    commit: commitOf('piper'),
    files: {
      'en/en_US/lessac/medium/en_US-lessac-medium.onnx': { content: bytesOf(5000, 3), isLfs: true },
      'en/en_US/lessac/medium/en_US-lessac-medium.onnx.json': { content: Buffer.from('{}') },
      'en/en_US/lessac/low/en_US-lessac-low.onnx': { content: bytesOf(3000, 4), isLfs: true },
      'en/en_US/amy/medium/en_US-amy-medium.onnx': { content: bytesOf(4000, 5), isLfs: true },
      'de/de_DE/thorsten/medium/de_DE-thorsten-medium.onnx': { content: bytesOf(4000, 6), isLfs: true },
      'voices.json': { content: Buffer.from('{}') },
    },
  },
};

/** Fires every timer at once (on the next turn) and records the delays asked for. */
class ImmediateClock implements Clock {
  readonly delaysMs: number[] = [];
  nowMs(): number {
    return 0;
  }
  wallMs(): number {
    return 1_700_000_000_000;
  }
  setTimeout(callback: () => void, delayMs: number) {
    this.delaysMs.push(delayMs);
    const handle = setImmediate(callback);
    return { cancel: () => clearImmediate(handle) };
  }
}

describe('voxmux models pull against a local Hub and CDN', () => {
  let hub: FakeHub;
  let dir: string;

  before(async () => {
    hub = await FakeHub.start({ repos: REPOS, token: TOKEN });
  });
  after(async () => {
    await hub.close();
  });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'voxmux-pull-'));
    hub.requests.length = 0;
    hub.faults.clear();
    hub.apiStatuses = [];
    hub.isCommitHidden = false;
    hub.onRequest = undefined;
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function pull(
    args: string[],
    options: { token?: string; freeBytes?: number; isTTY?: boolean; env?: ModelsPullEnvironment; homeDir?: string } = {},
  ) {
    let stdout = '';
    let stderr = '';
    const clock = new ImmediateClock();
    const code = await runModelsCli(['pull', ...args, '--endpoint', hub.endpoint, '--dir', dir], {
      version: '9.9.9',
      env: { ...options.env, ...(options.token === undefined ? {} : { hfToken: options.token }) },
      homeDir: options.homeDir ?? '/nonexistent-home',
      cwd: dir,
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text), isTTY: options.isTTY === true },
      clock,
      ...(options.freeBytes === undefined ? {} : { freeBytes: async () => options.freeBytes }),
    });
    return { code, stdout, stderr, delaysMs: clock.delaysMs };
  }

  const snapshotOf = (repo: string) => join(dir, ...repo.split('/'), REPOS[repo]!.commit);

  it('pulls every file into <dir>/<owner>/<name>/<commit>/, LFS files through the CDN, and prints their paths', async () => {
    const r = await pull(['acme/tiny-model']);
    assert.equal(r.code, 0, r.stderr);
    const snapshot = snapshotOf('acme/tiny-model');
    assert.deepEqual(
      r.stdout.trim().split('\n'),
      ['config.json', 'weights.bin', 'README.md'].map((p) => join(snapshot, p)),
    );
    assert.deepEqual(readFileSync(join(snapshot, 'weights.bin')), WEIGHTS);
    assert.deepEqual(readFileSync(join(snapshot, 'config.json')), CONFIG);
    assert.equal(existsSync(join(snapshot, 'weights.bin.part')), false);
    assert.match(r.stderr, /downloaded weights\.bin: 300 kB .*sha256 verified/);
    assert.match(r.stderr, /downloaded config\.json: .*git blob id verified/);
    assert.equal(hub.requestsTo('cdn').length, 1);
    assert.ok(hub.requests.every((req) => req.headers['user-agent'] === 'voxmux/9.9.9'));
  });

  it('sends HF_TOKEN to the Hub and never to the CDN it redirects to', async () => {
    const r = await pull(['acme/private-model'], { token: TOKEN });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(hub.requestsTo('hub').length >= 2);
    assert.ok(hub.requestsTo('hub').every((req) => req.headers.authorization === `Bearer ${TOKEN}`));
    assert.equal(hub.requestsTo('cdn').length, 1);
    assert.equal(hub.requestsTo('cdn')[0]!.headers.authorization, undefined);
    assert.deepEqual(readFileSync(join(snapshotOf('acme/private-model'), 'weights.bin')), WEIGHTS);
  });

  it('pins a branch or tag to its commit: the folder is the commit, and files are resolved at the commit', async () => {
    const r = await pull(['acme/tiny-model@v1.0', '--file', 'config.json']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout.trim(), join(snapshotOf('acme/tiny-model'), 'config.json'));
    const resolves = hub.requestsTo('hub').filter((req) => req.url.includes('/resolve/'));
    assert.deepEqual(
      resolves.map((req) => req.url),
      [`/acme/tiny-model/resolve/${REPOS['acme/tiny-model']!.commit}/config.json`],
    );
  });

  it('keeps the files under the revision, and downloads them whole, where the endpoint gives no commit', async () => {
    hub.isCommitHidden = true;
    const folder = join(dir, 'acme', 'tiny-model', 'main');
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'weights.bin.part'), Buffer.alloc(1000));
    const r = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /gave no commit for main: the files go under the revision's name and are downloaded whole/);
    assert.deepEqual(
      hub.requestsTo('cdn').map((req) => req.headers.range),
      [undefined],
    );
    assert.deepEqual(readFileSync(join(folder, 'weights.bin')), WEIGHTS);
  });

  it('pulls only the .nemo of a Parakeet repository and prints a parakeet config entry for it', async () => {
    const r = await pull(['nvidia/parakeet-tdt-0.6b-v2']);
    assert.equal(r.code, 0, r.stderr);
    const nemo = join(snapshotOf('nvidia/parakeet-tdt-0.6b-v2'), 'parakeet-tdt-0.6b-v2.nemo');
    const [pathLine, ...json] = r.stdout.split('\n');
    assert.equal(pathLine, nemo);
    assert.deepEqual(JSON.parse(json.join('\n')), {
      models: { 'parakeet-tdt-0.6b-v2': { adapter: 'parakeet', options: { nemoPath: nemo } } },
    });
    assert.equal(existsSync(join(snapshotOf('nvidia/parakeet-tdt-0.6b-v2'), 'README.md')), false);
    assert.match(r.stderr, /the files the parakeet adapter reads/);
  });

  it("selects files with --include as huggingface-cli does ('*' crosses folders) and --exclude", async () => {
    const r = await pull(['rhasspy/piper-voices', '--include', 'en/en_US/*/medium/*', '--exclude', '*.json']);
    assert.equal(r.code, 0, r.stderr);
    const snapshot = snapshotOf('rhasspy/piper-voices');
    assert.deepEqual(
      r.stdout.trim().split('\n'),
      ['en/en_US/lessac/medium/en_US-lessac-medium.onnx', 'en/en_US/amy/medium/en_US-amy-medium.onnx'].map((p) => join(snapshot, p)),
    );
    // Piper's ONNX voices are not what the vits adapter loads: no config entry, and a note saying so.
    assert.match(r.stderr, /Piper ONNX voices: the vits adapter loads PyTorch checkpoints/);
  });

  it('asks for a selection rather than pulling every Piper voice', async () => {
    const r = await pull(['rhasspy/piper-voices']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--include/);
    assert.equal(hub.requestsTo('cdn').length, 0);
  });

  it('skips files that are already complete in the commit folder', async () => {
    assert.equal((await pull(['acme/tiny-model'])).code, 0);
    hub.requests.length = 0;
    const again = await pull(['acme/tiny-model']);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /0 of 3 files to download, 0 B; 3 already complete/);
    assert.deepEqual(
      hub.requests.map((req) => new URL(req.url, hub.endpoint).pathname),
      [`/api/models/acme/tiny-model/revision/main`],
    );
    assert.equal(again.stdout.trim().split('\n').length, 3);
  });

  it('resumes a .part file left by an interrupted run with a Range request', async () => {
    const snapshot = snapshotOf('acme/tiny-model');
    mkdirSync(snapshot, { recursive: true });
    writeFileSync(join(snapshot, 'weights.bin.part'), WEIGHTS.subarray(0, 100_000));
    const r = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      hub.requestsTo('cdn').map((req) => req.headers.range),
      ['bytes=100000-'],
    );
    assert.deepEqual(readFileSync(join(snapshot, 'weights.bin')), WEIGHTS);
    assert.match(r.stderr, /1 files to download, 200 kB/);
    assert.match(r.stderr, /downloaded weights\.bin: 300 kB, 200 kB of it in this run .*sha256 verified/);
  });

  it('resumes from the bytes that arrived when the connection drops midway', async () => {
    hub.faults.set('weights.bin', { drops: 1, dropAfterBytes: 65_536 });
    const r = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      hub.requestsTo('cdn').map((req) => req.headers.range),
      [undefined, 'bytes=65536-'],
    );
    assert.deepEqual(readFileSync(join(snapshotOf('acme/tiny-model'), 'weights.bin')), WEIGHTS);
    assert.deepEqual(r.delaysMs, [1000]);
    assert.match(r.stderr, /weights\.bin: Could not download from 127\.0\.0\.1:\d+: .*trying again in 1\.0 s/);
  });

  it('starts over when the server ignores the Range request and answers 200 with the whole file', async () => {
    const snapshot = snapshotOf('acme/tiny-model');
    mkdirSync(snapshot, { recursive: true });
    writeFileSync(join(snapshot, 'weights.bin.part'), WEIGHTS.subarray(0, 100_000));
    hub.faults.set('weights.bin', { isRangeIgnored: true });
    const r = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(readFileSync(join(snapshot, 'weights.bin')), WEIGHTS);
    assert.match(r.stderr, /weights\.bin: the server ignored the Range request: downloading it again from the start/);
  });

  it('refuses a file whose sha256 is not the one the Hub gives, and leaves neither the file nor its .part', async () => {
    const wrong = Buffer.from(WEIGHTS);
    wrong[12345] = wrong[12345]! ^ 0xff;
    hub.faults.set('weights.bin', { wrongContent: wrong });
    const r = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /weights\.bin arrived with sha256 [0-9a-f]{64}, not the Hub's [0-9a-f]{64}: the file was deleted/);
    const snapshot = snapshotOf('acme/tiny-model');
    assert.equal(existsSync(join(snapshot, 'weights.bin')), false);
    assert.equal(existsSync(join(snapshot, 'weights.bin.part')), false);
  });

  it('refuses a file stored in git whose bytes do not match its git blob id', async () => {
    hub.faults.set('config.json', { wrongContent: Buffer.from('{"d_model": 9}\n') });
    const r = await pull(['acme/tiny-model', '--file', 'config.json']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /config\.json arrived with git blob id/);
    assert.equal(existsSync(join(snapshotOf('acme/tiny-model'), 'config.json')), false);
  });

  it('says to set HF_TOKEN for a private repository (401), and that a wrong token is invalid', async () => {
    const without = await pull(['acme/private-model']);
    assert.equal(without.code, 1);
    assert.match(
      without.stderr,
      /acme\/private-model was not found on .*, or it is private or gated \(401 without a token\): .*set HF_TOKEN/,
    );
    const wrong = await pull(['acme/private-model'], { token: 'hf_wrong' });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /refused HF_TOKEN as invalid: create an access token at http:\/\/127\.0\.0\.1:\d+\/settings\/tokens/);
    assert.equal(hub.requestsTo('cdn').length, 0);
  });

  it('sends HF_TOKEN without the line break a secret file leaves at its end, as huggingface_hub does', async () => {
    const r = await pull(['acme/private-model'], { token: `  ${TOKEN}\r\n` });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(hub.requestsTo('hub').every((req) => req.headers.authorization === `Bearer ${TOKEN}`));
    assert.deepEqual(readFileSync(join(snapshotOf('acme/private-model'), 'weights.bin')), WEIGHTS);
  });

  it('reads the token that huggingface-cli login saved, in $HF_HOME/token or ~/.cache/huggingface/token, when HF_TOKEN is unset', async () => {
    const home = join(dir, 'home');
    mkdirSync(join(home, '.cache', 'huggingface'), { recursive: true });
    writeFileSync(join(home, '.cache', 'huggingface', 'token'), `${TOKEN}\n`);
    const fromHome = await pull(['acme/private-model'], { homeDir: home });
    assert.equal(fromHome.code, 0, fromHome.stderr);
    assert.ok(hub.requestsTo('hub').every((req) => req.headers.authorization === `Bearer ${TOKEN}`));

    const hfHome = join(dir, 'hf-home');
    mkdirSync(hfHome);
    writeFileSync(join(hfHome, 'token'), 'hf_wrong');
    const fromHfHome = await pull(['acme/private-model'], { env: { hfHome } });
    assert.equal(fromHfHome.code, 1);
    assert.match(fromHfHome.stderr, new RegExp(`refused the token saved in ${join(hfHome, 'token')} as invalid`));

    // HF_TOKEN wins over the saved token; HF_TOKEN_PATH names another file.
    assert.equal((await pull(['acme/private-model'], { env: { hfHome }, token: TOKEN })).code, 0);
    writeFileSync(join(dir, 'other-token'), TOKEN);
    assert.equal((await pull(['acme/private-model'], { env: { hfHome, hfTokenPath: join(dir, 'other-token') } })).code, 0);
  });

  it('refuses a token that no HTTP header can carry as a usage error, before sending anything', async () => {
    const r = await pull(['acme/private-model'], { token: 'hf_\u00e9t\u00e9\u0001' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /HF_TOKEN holds characters that no access token has/);
    assert.equal(hub.requests.length, 0);
  });

  it('says where to accept the conditions of a gated repository', async () => {
    const r = await pull(['acme/gated-model']);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      /acme\/gated-model is a gated repository: accept its conditions at http:\/\/127\.0\.0\.1:\d+\/acme\/gated-model, then set HF_TOKEN/,
    );
  });

  it('names the unknown repository, revision or file (404)', async () => {
    const repo = await pull(['acme/no-such-model'], { token: TOKEN });
    assert.equal(repo.code, 1);
    assert.match(repo.stderr, /Repository acme\/no-such-model was not found on 127\.0\.0\.1:\d+: check the name/);
    const revision = await pull(['acme/tiny-model@no-such-branch']);
    assert.equal(revision.code, 1);
    assert.match(revision.stderr, /Revision 'no-such-branch' of acme\/tiny-model was not found: check the branch, tag or commit/);
    const file = await pull(['acme/tiny-model', '--file', 'missing.bin']);
    assert.equal(file.code, 1);
    assert.match(file.stderr, /acme\/tiny-model@main has no file 'missing\.bin'/);
    const include = await pull(['acme/tiny-model', '--include', '*.gguf']);
    assert.equal(include.code, 1);
    assert.match(include.stderr, /No file of acme\/tiny-model@main matches --include '\*\.gguf'/);
  });

  it('retries 5xx answers with exponential backoff, then gives up after the last attempt', async () => {
    hub.apiStatuses = [503, 502];
    hub.faults.set('weights.bin', { statuses: [500] });
    const ok = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.deepEqual(ok.delaysMs, [1000, 2000, 1000]);

    hub.faults.set('weights.bin', { statuses: [500, 500, 500, 500, 500] });
    rmSync(dir, { recursive: true, force: true });
    const failed = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(failed.code, 1);
    assert.deepEqual(failed.delaysMs, [1000, 2000, 4000, 8000]);
    assert.match(failed.stderr, /answered 500 .*gave up on weights\.bin after 5 attempts; run the command again to resume/);
  });

  it('tells a refusal by the CDN from one by the Hub: no HF_TOKEN advice, and a fresh signed URL on the next attempt', async () => {
    hub.faults.set('weights.bin', { statuses: [403] });
    const once = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(once.code, 0, once.stderr);
    assert.equal(hub.requestsTo('cdn').length, 2);
    assert.deepEqual(once.delaysMs, [1000]);
    const cdnHost = new URL(hub.cdnOrigin).host;
    assert.match(once.stderr, new RegExp(`weights\\.bin: ${cdnHost} answered 403 for weights\\.bin .*trying again`));

    hub.faults.set('weights.bin', { statuses: [403, 403, 403, 403, 403] });
    rmSync(dir, { recursive: true, force: true });
    const always = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(always.code, 1);
    assert.match(
      always.stderr,
      new RegExp(
        `${cdnHost} answered 403 for weights\\.bin of acme/tiny-model, where the Hub redirected .*gave up on weights\\.bin after 5 attempts`,
      ),
    );
    assert.doesNotMatch(always.stderr, /HF_TOKEN/);
  });

  it('refuses a file that another live pull is writing, and takes over the lock of one that is gone', async () => {
    const snapshot = snapshotOf('acme/tiny-model');
    const lockPath = join(snapshot, 'weights.bin.part.lock');
    mkdirSync(snapshot, { recursive: true });
    writeFileSync(lockPath, JSON.stringify({ host: hostname(), pid: process.ppid }));
    const live = await pull(['acme/tiny-model', '--file', 'weights.bin']);
    assert.equal(live.code, 1);
    assert.match(
      live.stderr,
      new RegExp(`Another pull \\(process ${process.ppid} on .*\\) is downloading into .*weights\\.bin\\.part: wait for it to end`),
    );
    assert.equal(hub.requestsTo('cdn').length, 0);

    // A process that no longer exists (above Linux's largest pid), on this host.
    writeFileSync(lockPath, JSON.stringify({ host: hostname(), pid: 2 ** 22 + 1 }));
    assert.equal((await pull(['acme/tiny-model', '--file', 'weights.bin'])).code, 0);
    assert.equal(existsSync(lockPath), false);
    assert.deepEqual(readFileSync(join(snapshot, 'weights.bin')), WEIGHTS);
  });

  it('does not download again a file that another pull completed while this one waited to start it', async () => {
    const snapshot = snapshotOf('acme/tiny-model');
    hub.onRequest = (url) => {
      // While config.json downloads, another pull renames its complete weights.bin into place.
      if (url.endsWith('/resolve/' + REPOS['acme/tiny-model']!.commit + '/config.json'))
        writeFileSync(join(snapshot, 'weights.bin'), WEIGHTS);
    };
    const r = await pull(['acme/tiny-model', '--file', 'config.json', '--file', 'weights.bin', '--concurrency', '1']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(hub.requestsTo('cdn').length, 0);
    assert.match(r.stderr, /weights\.bin: completed by another pull meanwhile/);
    assert.deepEqual(readFileSync(join(snapshot, 'weights.bin')), WEIGHTS);
  });

  it('takes over the lock of another host once it has not been touched for 10 minutes', async () => {
    const snapshot = snapshotOf('acme/tiny-model');
    const lockPath = join(snapshot, 'config.json.part.lock');
    mkdirSync(snapshot, { recursive: true });
    writeFileSync(lockPath, JSON.stringify({ host: 'another-host', pid: 1 }));
    // The test clock's wall time is 2023-11-14; the lock was touched a minute before it.
    const touched = new Date(1_700_000_000_000 - 60_000);
    utimesSync(lockPath, touched, touched);
    assert.equal((await pull(['acme/tiny-model', '--file', 'config.json'])).code, 1);
    const old = new Date(1_700_000_000_000 - 11 * 60_000);
    utimesSync(lockPath, old, old);
    assert.equal((await pull(['acme/tiny-model', '--file', 'config.json'])).code, 0);
  });

  it('with HF_HUB_OFFLINE set, reports a pulled revision as present by its branch or commit, and sends nothing', async () => {
    assert.equal((await pull(['acme/tiny-model@v1.0'])).code, 0);
    hub.requests.length = 0;
    const commit = REPOS['acme/tiny-model']!.commit;
    for (const [revision, value] of [
      ['v1.0', '1'],
      ['v1.0', 'yes'],
      [commit, 'TRUE'],
      [commit, 'On'],
    ] as const) {
      const r = await pull([`acme/tiny-model@${revision}`, '--file', 'weights.bin'], { env: { hfHubOffline: value } });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.trim(), join(snapshotOf('acme/tiny-model'), 'weights.bin'));
      assert.match(r.stderr, /HF_HUB_OFFLINE is set: 1 of 1 files in place, nothing sent/);
    }
    const json = await pull(['acme/tiny-model@v1.0', '--json'], { env: { hfHubOffline: '1' } });
    const result = JSON.parse(json.stdout) as { commit: string; files: Array<{ status: string }> };
    assert.equal(result.commit, commit);
    assert.deepEqual(
      result.files.map((f) => f.status),
      ['skipped', 'skipped', 'skipped'],
    );
    assert.equal(hub.requests.length, 0);
  });

  it('with HF_HUB_OFFLINE set, fails naming it and what is missing, without sending anything', async () => {
    const never = await pull(['acme/tiny-model'], { env: { hfHubOffline: '1' } });
    assert.equal(never.code, 1);
    assert.match(
      never.stderr,
      /HF_HUB_OFFLINE is set and no pull of acme\/tiny-model@main into .* recorded its commit, nor has huggingface_hub's cache \(\/nonexistent-home\/\.cache\/huggingface\/hub\) a snapshot of it: unset HF_HUB_OFFLINE/,
    );
    assert.equal(hub.requests.length, 0);

    assert.equal((await pull(['acme/tiny-model', '--file', 'config.json'])).code, 0);
    hub.requests.length = 0;
    const partial = await pull(['acme/tiny-model'], { env: { hfHubOffline: 'true' } });
    assert.equal(partial.code, 1);
    assert.match(
      partial.stderr,
      /HF_HUB_OFFLINE is set and 2 of 3 files of acme\/tiny-model@main \(commit [0-9a-f]{40}\) are not complete in .*: 'weights\.bin', 'README\.md'; unset HF_HUB_OFFLINE to download them/,
    );
    assert.equal(hub.requests.length, 0);
  });

  it('reads HF_HUB_OFFLINE as huggingface_hub does: other values than 1, on, yes and true leave the network on', async () => {
    for (const value of ['0', 'false', 'off', 'no', '']) {
      hub.requests.length = 0;
      assert.equal((await pull(['acme/tiny-model', '--file', 'config.json'], { env: { hfHubOffline: value } })).code, 0);
      assert.ok(hub.requests.length > 0, value);
    }
  });

  /** Lays `files` out as huggingface_hub's cache does: snapshot entries are symlinks into blobs named by ETag. */
  function writeHfCache(
    hubCache: string,
    files: Record<string, Buffer>,
    options: { revision?: string; etags?: Record<string, string> } = {},
  ) {
    const repo = REPOS['acme/tiny-model']!;
    const root = join(hubCache, 'models--acme--tiny-model');
    mkdirSync(join(root, 'blobs'), { recursive: true });
    mkdirSync(join(root, 'refs'), { recursive: true });
    writeFileSync(join(root, 'refs', options.revision ?? 'main'), repo.commit);
    for (const [path, content] of Object.entries(files)) {
      const isLfs = repo.files[path]!.isLfs === true;
      const etag = options.etags?.[path] ?? (isLfs ? sha256Of(repo.files[path]!.content) : gitOidOf(repo.files[path]!.content));
      writeFileSync(join(root, 'blobs', etag), content);
      const link = join(root, 'snapshots', repo.commit, path);
      mkdirSync(dirname(link), { recursive: true });
      symlinkSync(relative(dirname(link), join(root, 'blobs', etag)), link);
    }
  }

  it("hard-links a file that huggingface_hub's cache holds at the commit instead of downloading it, once its hash matches", async () => {
    const hfHome = join(dir, 'hf');
    writeHfCache(join(hfHome, 'hub'), { 'weights.bin': WEIGHTS, 'config.json': CONFIG });
    // What an interrupted download left: the cache's whole file makes it useless.
    mkdirSync(snapshotOf('acme/tiny-model'), { recursive: true });
    writeFileSync(join(snapshotOf('acme/tiny-model'), 'weights.bin.part'), WEIGHTS.subarray(0, 1000));
    const r = await pull(['acme/tiny-model', '--json'], { env: { hfHome } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(hub.requestsTo('cdn').length, 0);
    assert.deepEqual(
      hub.requests.map((req) => new URL(req.url, hub.endpoint).pathname),
      ['/api/models/acme/tiny-model/revision/main', '/acme/tiny-model/resolve/' + REPOS['acme/tiny-model']!.commit + '/README.md'],
    );
    const snapshot = snapshotOf('acme/tiny-model');
    assert.deepEqual(readFileSync(join(snapshot, 'weights.bin')), WEIGHTS);
    assert.equal(
      statSync(join(snapshot, 'weights.bin')).ino,
      statSync(realpathSync(join(hfHome, 'hub', 'models--acme--tiny-model', 'snapshots', REPOS['acme/tiny-model']!.commit, 'weights.bin')))
        .ino,
    );
    assert.equal(lstatSync(join(snapshot, 'weights.bin')).isSymbolicLink(), false);
    assert.deepEqual(readdirSync(snapshot).sort(), ['README.md', 'config.json', 'weights.bin']);
    assert.match(r.stderr, /weights\.bin: hard-linked from huggingface_hub's cache .*, sha256 verified/);
    assert.match(r.stderr, /config\.json: hard-linked from huggingface_hub's cache .*, git blob id verified/);
    const result = JSON.parse(r.stdout) as { files: Array<{ path: string; status: string }> };
    assert.deepEqual(
      result.files.map((f) => [f.path, f.status]),
      [
        ['config.json', 'linked'],
        ['weights.bin', 'linked'],
        ['README.md', 'downloaded'],
      ],
    );
  });

  it("downloads a file whose copy in huggingface_hub's cache ($HF_HUB_CACHE) does not match the Hub's hash", async () => {
    const hubCache = join(dir, 'elsewhere');
    writeHfCache(hubCache, { 'weights.bin': Buffer.from(WEIGHTS).fill(0, 0, 10) });
    const r = await pull(['acme/tiny-model', '--file', 'weights.bin'], { env: { hfHubCache: hubCache, hfHome: join(dir, 'unused') } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(hub.requestsTo('cdn').length, 1);
    assert.match(r.stderr, /weights\.bin: the copy in huggingface_hub's cache .* has sha256 [0-9a-f]{64}, not the Hub's: downloading it/);
    assert.deepEqual(readFileSync(join(snapshotOf('acme/tiny-model'), 'weights.bin')), WEIGHTS);
  });

  it("with HF_HUB_OFFLINE set, takes a revision from huggingface_hub's cache, and names what it lacks", async () => {
    const hfHome = join(dir, 'hf');
    writeHfCache(join(hfHome, 'hub'), { 'weights.bin': WEIGHTS, 'config.json': CONFIG }, { revision: 'v1.0' });
    const r = await pull(['acme/tiny-model@v1.0', '--file', 'weights.bin', '--file', 'config.json'], {
      env: { hfHome, hfHubOffline: '1' },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(hub.requests.length, 0);
    assert.deepEqual(readFileSync(join(snapshotOf('acme/tiny-model'), 'weights.bin')), WEIGHTS);
    assert.match(r.stderr, /weights\.bin: hard-linked from huggingface_hub's cache .*, sha256 verified/);

    const missing = await pull(['acme/tiny-model@v1.0', '--file', 'README.md'], { env: { hfHome, hfHubOffline: '1' } });
    assert.equal(missing.code, 1);
    assert.match(
      missing.stderr,
      /HF_HUB_OFFLINE is set and 1 of 1 files of acme\/tiny-model@v1\.0 \(commit [0-9a-f]{40}\) are not complete in .*: 'README\.md'/,
    );
    const all = await pull(['acme/tiny-model@v1.0'], { env: { hfHome, hfHubOffline: '1' } });
    assert.equal(all.code, 0, all.stderr);
    assert.equal(all.stdout.trim().split('\n').length, 2);
    assert.equal(hub.requests.length, 0);
  });

  it('refuses to start when the folder has less free space than the files need', async () => {
    const r = await pull(['acme/tiny-model'], { freeBytes: 1000 });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /300 kB to download but 1\.00 kB free in .*: free some space, or choose another folder with --dir/);
    assert.equal(hub.requestsTo('cdn').length, 0);
  });

  it('writes progress on a terminal as one line rewritten in place', async () => {
    const r = await pull(['acme/tiny-model', '--file', 'weights.bin'], { isTTY: true });
    assert.equal(r.code, 0, r.stderr);
    const live = r.stderr.split('\r\x1b[2K');
    assert.ok(live.length > 1, r.stderr);
    assert.match(live[1]!, /^0\/1 files, [\d.]+ kB of 300 kB \(\d+ %\), .*weights\.bin$/);
  });

  it('prints one JSON object with --json', async () => {
    const r = await pull(['acme/tiny-model', '--file', 'config.json', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const result = JSON.parse(r.stdout) as { commit: string; files: Array<{ path: string; status: string; verifiedBy: string }> };
    assert.equal(result.commit, REPOS['acme/tiny-model']!.commit);
    assert.deepEqual(
      result.files.map((f) => [f.path, f.status, f.verifiedBy]),
      [['config.json', 'downloaded', 'git blob id']],
    );
  });
});
