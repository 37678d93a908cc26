import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { BenchError, usageError } from './bench-error.js';
import { defineCommand, type CommandContext } from './command.js';

const FLAGS = { name: { type: 'string' }, tag: { type: 'string', multiple: true }, loud: { type: 'boolean' } } as const;

function capture() {
  let out = '';
  let err = '';
  return {
    io: { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) }, isTTY: false },
    out: () => out,
    err: () => err,
  };
}

function probe(run: (context: CommandContext<typeof FLAGS>) => Promise<number>) {
  return defineCommand({ name: 'probe', usage: 'Usage: probe\n', flags: FLAGS, hasPositionals: true, run });
}

describe('defineCommand', () => {
  it('parses the declared flags and positionals', async () => {
    let seen: unknown;
    const command = probe(async ({ values, positionals, args }) => {
      seen = { values: { ...values }, positionals, args };
      return 0;
    });
    const run = capture();
    assert.equal(await command.run(['--name', 'n', '--tag', 'a', '--tag=b', '--loud', 'x.wav'], run.io, {}), 0);
    assert.deepEqual(seen, {
      values: { name: 'n', tag: ['a', 'b'], loud: true },
      positionals: ['x.wav'],
      args: ['--name', 'n', '--tag', 'a', '--tag=b', '--loud', 'x.wav'],
    });
  });

  it('answers --help and -h with the usage before checking other flags', async () => {
    let isRun = false;
    const command = probe(async () => {
      isRun = true;
      return 0;
    });
    for (const args of [['--help'], ['-h'], ['--bogus', '--help']]) {
      const run = capture();
      assert.equal(await command.run(args, run.io, {}), 0, args.join(' '));
      assert.equal(run.out(), 'Usage: probe\n');
    }
    const afterTerminator = capture();
    assert.equal(await command.run(['--', '--help'], afterTerminator.io, {}), 0);
    assert.equal(isRun, true);
  });

  it('maps unknown flags and usage errors to 2, other bench errors to their codes, with a message', async () => {
    const unknown = capture();
    assert.equal(await probe(async () => 0).run(['--bogus'], unknown.io, {}), 2);
    assert.match(unknown.err(), /^Unknown option '--bogus'.*\nRun voxmux bench --help for usage\n$/);
    const usage = capture();
    assert.equal(await probe(async () => Promise.reject(usageError('Missing required flag: --name'))).run([], usage.io, {}), 2);
    assert.equal(usage.err(), 'Missing required flag: --name\nRun voxmux bench --help for usage\n');
    const unreachable = capture();
    const refused = new BenchError('unreachable', 'Cannot reach http://h');
    assert.equal(await probe(async () => Promise.reject(refused)).run([], unreachable.io, {}), 2);
    assert.equal(unreachable.err(), 'Cannot reach http://h\n');
    await assert.rejects(probe(async () => Promise.reject(new Error('a bug'))).run([], capture().io, {}), /a bug/);
  });

  it('resolves --out against the working directory and refuses one that cannot be created', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voxmux-command-'));
    try {
      await writeFile(join(dir, 'file'), 'not a directory');
      const dirs: string[] = [];
      const command = probe(async ({ values, outputDir }) => {
        dirs.push(await outputDir(values.name, 'default-name'));
        return 0;
      });
      assert.equal(await command.run(['--name', 'sub'], capture().io, { cwd: dir }), 0);
      assert.equal(await command.run([], capture().io, { cwd: dir }), 0);
      assert.deepEqual(dirs, [join(dir, 'sub'), join(dir, 'bench', 'out', 'default-name')]);
      const refused = capture();
      assert.equal(await command.run(['--name', 'file/sub'], refused.io, { cwd: dir }), 2);
      assert.match(refused.err(), /Expected --out to name a writable directory/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('aborts the work on the caller signal', async () => {
    const controller = new AbortController();
    const command = probe(({ interruptibly }) =>
      interruptibly(
        () => undefined,
        async (signal) => {
          controller.abort();
          return signal.aborted ? 130 : 0;
        },
      ),
    );
    assert.equal(await command.run([], capture().io, { signal: controller.signal, shouldHandleSignals: false }), 130);
  });
});
