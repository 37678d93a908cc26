/**
 * A new user's first run (#16), against the built command as a real process: help and version,
 * the ready line, log formats, and a drain that answers new calls 503 until the listener closes.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

const BIN = fileURLToPath(new URL('../../bin/voxmux.mjs', import.meta.url));
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

const running: RunningServer[] = [];
after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
});

function voxmux(args: string[]) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000, env: { PATH: process.env.PATH ?? '' } });
}

function echoConfig(options: Record<string, unknown> = {}) {
  return {
    models: { echo: { adapter: 'test', instances: 1, maxBatchSize: 4, maxQueueDelayMs: 0, options } },
    supervisor: { heartbeatIntervalMs: 200 },
  };
}

function transcribe(url: string): Promise<Response> {
  const form = new FormData();
  form.append('model', 'echo');
  form.append('file', new Blob([floatWav(noise(1600, 3))]), 'a.wav');
  return fetch(`${url}/v1/audio/transcriptions`, { method: 'POST', body: form });
}

describe('voxmux command (#16)', () => {
  it('answers --help and --version on every command with exit 0 and the text on stdout', () => {
    for (const [args, pattern] of [
      [['--help'], /^usage: voxmux <command>/],
      [['serve', '--help'], /^usage: voxmux serve \[options\]/],
      [['bench', '--help'], /voxmux bench transcribe --url URL/],
      [['bench', 'transcribe', '--help'], /voxmux bench transcribe --url URL/],
      [['bench', 'accuracy', '--help'], /voxmux bench accuracy/],
      [['bench', 'compare', '--help'], /voxmux bench compare/],
      [['--version'], new RegExp(`^voxmux ${VERSION.replaceAll('.', '\\.')}\\n$`)],
      [['serve', '--version'], /^voxmux \d+\.\d+\.\d+/],
      [['bench', '--version'], /^voxmux \d+\.\d+\.\d+/],
      [['bench', 'accuracy', '--version'], /^voxmux \d+\.\d+\.\d+/],
    ] as const) {
      const r = voxmux([...args]);
      assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stdout, pattern, args.join(' '));
      assert.equal(r.stderr, '', args.join(' '));
    }
  });
});

describe('voxmux serve arguments', () => {
  it('exits 2 for an unknown flag, a flag without its value or a positional argument, as the other commands do', () => {
    for (const [args, problem] of [
      [['serve', '--bogus'], /Unknown option '--bogus'/],
      [['serve', '--port'], /Option '--port <value>' argument missing/],
      [['serve', 'extra'], /Unexpected argument 'extra'/],
      [['--bogus'], /Unknown option '--bogus'/],
    ] as const) {
      const r = voxmux([...args]);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, problem, args.join(' '));
      assert.match(r.stderr, /\(voxmux serve --help\)\n$/, args.join(' '));
      assert.equal(r.stdout, '');
    }
    // A setting's value is configuration: 78, as for the same problem in a file.
    assert.equal(voxmux(['serve', '--port', 'nope']).status, 78);
  });
});

describe('voxmux serve first run (#16)', () => {
  it('logs JSON to a pipe, with one ready line that gives the URL, the models and their instances', async () => {
    const server = await startServer({ config: echoConfig() });
    running.push(server);
    const deadline = Date.now() + 10_000;
    while (!server.logs.some((l) => l.msg !== undefined && String(l.msg).startsWith('voxmux ready')) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const ready = server.logs.filter((l) => String(l.msg).startsWith('voxmux ready'));
    assert.equal(ready.length, 1);
    assert.equal(ready[0]!.msg, `voxmux ready on ${server.url}: echo (1 instance)`);
    assert.equal(ready[0]!.level, 30);
    assert.deepEqual(ready[0]!.models, [{ model: 'echo', instances: 1, readyInstances: 1 }]);
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string; created: number; voxmux: unknown }[] };
    assert.deepEqual(models.data, [
      {
        id: 'echo',
        object: 'model',
        created: models.data[0]!.created,
        owned_by: 'voxmux',
        voxmux: { task: 'transcription', languages: null, translation: false, state: 'ready' },
      },
    ]);
  });

  it('runs the gateway in a child with the fixed mmap threshold when serve is implied by a flag first, as for serve (#16)', async (t) => {
    if (process.platform !== 'linux') return t.skip('the launcher starts a child on Linux only');
    const server = await startServer({ config: echoConfig(), isCommandOmitted: true, waitReady: false });
    running.push(server);
    const pid = server.gatewayPid();
    assert.notEqual(pid, server.process.pid, 'the gateway runs in the launcher’s child');
    assert.match(readFileSync(`/proc/${pid}/environ`, 'utf8'), /(^|\0)MALLOC_MMAP_THRESHOLD_=65536\0/);
  });

  it('writes human-readable lines with --log-format pretty, and rejects an unknown format with exit 78', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-first-run-'));
    const config = join(dir, 'config.json');
    writeFileSync(config, JSON.stringify(echoConfig()));
    const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--log-format', 'pretty', '--config', config], {
      env: { PATH: process.env.PATH ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ready line: ${stdout}`)), 20_000);
        child.stdout.on('data', (d: Buffer) => {
          stdout += d.toString();
          if (/voxmux ready on http/.test(stdout)) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
    } finally {
      child.kill('SIGKILL');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
    assert.match(stdout, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO.*: voxmux ready on http:\/\/127\.0\.0\.1:\d+: echo \(1 instance\)/m);
    assert.doesNotMatch(stdout, /^\{"level"/m, 'no JSON lines');
    const bad = voxmux(['serve', '--log-format', 'yaml']);
    assert.equal(bad.status, 78);
    assert.match(bad.stderr, /logFormat/);
  });

  it('answers new calls 503 shutting_down with Retry-After while draining, finishes the running one, then exits 0', async () => {
    // The running call takes 6 s: the drain stays open that long even on a busy machine, where the
    // 'draining' line can take a while to reach the test.
    const server = await startServer({ config: echoConfig({ batchDelayMs: 6000 }) });
    running.push(server);
    const first = transcribe(server.url);
    const deadline = Date.now() + 10_000;
    while ((await server.metric('voxmux_scheduler_requests_running')) < 1 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const stopped = server.stop('SIGTERM');
    while (!server.logs.some((l) => l.msg === 'draining') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const during = await transcribe(server.url);
    assert.equal(during.status, 503);
    assert.equal(during.headers.get('retry-after'), '1');
    assert.equal(((await during.json()) as { error: { code: string } }).error.code, 'shutting_down');
    const answer = await first;
    assert.equal(answer.status, 200);
    assert.match(((await answer.json()) as { text: string }).text, /^echo samples=1600 /);
    assert.equal(await stopped, 0);
  });
});
