/**
 * The server and the bench ship apart: `node scripts/bundle.mjs` writes a server bundle that holds
 * none of bench/, and a bench bundle beside it that `voxmux bench` imports only when it is run.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** esbuild names each bundled module in a comment line: `// bench/cli/cli.ts`. */
function bundledModules(text: string): string[] {
  return [...text.matchAll(/^\/\/ ((?:src|bench|scripts)\/\S+\.ts)$/gm)].map((match) => match[1]!);
}

function node(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('bundles', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'voxmux-bundle-'));
    const built = node(['scripts/bundle.mjs', dir]);
    assert.equal(built.status, 0, built.stderr);
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps the bench out of the server bundle', async () => {
    const server = bundledModules(await readFile(join(dir, 'voxmux.mjs'), 'utf8'));
    assert.ok(server.includes('src/app/cli.ts'), 'the server bundle names its modules');
    assert.deepEqual(
      server.filter((path) => path.startsWith('bench/')),
      [],
    );
    const bench = bundledModules(await readFile(join(dir, 'voxmux-bench.mjs'), 'utf8'));
    assert.ok(bench.includes('bench/cli/cli.ts'));
    assert.deepEqual(
      bench.filter((path) => path.startsWith('src/') && !/^src\/(core|api)\//.test(path)),
      [],
    );
  });

  it('runs `voxmux bench` from the bench bundle beside the server bundle', () => {
    const help = node([join(dir, 'voxmux.mjs'), '--help']);
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /usage: voxmux <command>/);
    const serveHelp = node([join(dir, 'voxmux.mjs'), 'serve', '--help']);
    assert.equal(serveHelp.status, 0, serveHelp.stderr);
    assert.match(serveHelp.stdout, /usage: voxmux serve/);
    const version = node([join(dir, 'voxmux.mjs'), '--version']);
    assert.equal(version.status, 0, version.stderr);
    assert.equal(
      version.stdout,
      `voxmux ${(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version}\n`,
    );
    const bench = node([join(dir, 'voxmux.mjs'), 'bench', '--help']);
    assert.equal(bench.status, 0, bench.stderr);
    assert.match(bench.stdout, /voxmux bench transcribe --url URL --model MODEL/);
    const bad = node([join(dir, 'voxmux.mjs'), 'bench', 'transcribe', '--bogus']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /Unknown option '--bogus'/);
  });

  it('says so when the bench bundle is missing', async () => {
    await rm(join(dir, 'voxmux-bench.mjs'));
    const bench = node([join(dir, 'voxmux.mjs'), 'bench', '--help']);
    assert.equal(bench.status, 2);
    assert.match(bench.stderr, /the bench is not part of this installation/);
  });
});
