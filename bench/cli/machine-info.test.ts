import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readGitCommit, readMachineInfo } from './machine-info.js';

const SHA_A = 'a'.repeat(40);
const SHA_B = 'b'.repeat(40);
const SHA_C = 'c'.repeat(40);

describe('readGitCommit', () => {
  let root: string;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'voxmux-git-'));
    // A repository with a loose ref, read from a subdirectory.
    await mkdir(join(root, 'loose', '.git', 'refs', 'heads'), { recursive: true });
    await mkdir(join(root, 'loose', 'src', 'deep'), { recursive: true });
    await writeFile(join(root, 'loose', '.git', 'HEAD'), 'ref: refs/heads/main\n');
    await writeFile(join(root, 'loose', '.git', 'refs', 'heads', 'main'), `${SHA_A}\n`);
    // Packed refs only.
    await mkdir(join(root, 'packed', '.git'), { recursive: true });
    await writeFile(join(root, 'packed', '.git', 'HEAD'), 'ref: refs/heads/dev\n');
    await writeFile(
      join(root, 'packed', '.git', 'packed-refs'),
      `# pack-refs with: peeled\n${SHA_C} refs/heads/main\n${SHA_B} refs/heads/dev\n`,
    );
    // Detached HEAD.
    await mkdir(join(root, 'detached', '.git'), { recursive: true });
    await writeFile(join(root, 'detached', '.git', 'HEAD'), `${SHA_C}\n`);
    // A worktree: .git is a file; its branch ref lives in the common dir.
    await mkdir(join(root, 'main-repo', '.git', 'worktrees', 'wt'), { recursive: true });
    await mkdir(join(root, 'main-repo', '.git', 'refs', 'heads'), { recursive: true });
    await writeFile(join(root, 'main-repo', '.git', 'refs', 'heads', 'feature'), `${SHA_B}\n`);
    await writeFile(join(root, 'main-repo', '.git', 'worktrees', 'wt', 'HEAD'), 'ref: refs/heads/feature\n');
    await writeFile(join(root, 'main-repo', '.git', 'worktrees', 'wt', 'commondir'), '../..\n');
    await mkdir(join(root, 'wt'));
    await writeFile(join(root, 'wt', '.git'), 'gitdir: ../main-repo/.git/worktrees/wt\n');
    // No commit yet.
    await mkdir(join(root, 'fresh', '.git'), { recursive: true });
    await writeFile(join(root, 'fresh', '.git', 'HEAD'), 'ref: refs/heads/main\n');
  });

  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('follows HEAD to a loose ref from any subdirectory', async () => {
    assert.equal(await readGitCommit(join(root, 'loose', 'src', 'deep')), SHA_A);
  });

  it('reads packed refs, detached heads and worktrees', async () => {
    assert.equal(await readGitCommit(join(root, 'packed')), SHA_B);
    assert.equal(await readGitCommit(join(root, 'detached')), SHA_C);
    assert.equal(await readGitCommit(join(root, 'wt')), SHA_B);
  });

  it('gives undefined for a repository without commits', async () => {
    assert.equal(await readGitCommit(join(root, 'fresh')), undefined);
  });
});

describe('readMachineInfo', () => {
  it('describes the client machine', () => {
    const info = readMachineInfo();
    assert.ok(info.cpuCores >= 1);
    assert.ok(info.memoryBytes > 0);
    assert.equal(info.nodeVersion, process.version);
    assert.ok(info.cpuModel.length > 0);
  });
});
