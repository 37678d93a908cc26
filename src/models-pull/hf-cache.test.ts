import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { readHfCacheSnapshot, toHfCachedPath, toHfRepoDir } from './hf-cache.js';
import { parseRepoRef } from './repo-ref.js';

const COMMIT = 'b'.repeat(40);
const SHA256 = 'c'.repeat(64);

describe("huggingface_hub's cache", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'voxmux-hf-cache-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('names a repository folder as huggingface_hub does, datasets included', () => {
    assert.equal(toHfRepoDir('/c', parseRepoRef('acme/model')), join('/c', 'models--acme--model'));
    assert.equal(toHfRepoDir('/c', parseRepoRef('datasets/acme/set')), join('/c', 'datasets--acme--set'));
    assert.equal(
      toHfCachedPath('/c', parseRepoRef('acme/model'), { commit: COMMIT, path: 'a/b.bin' }),
      join('/c', 'models--acme--model', 'snapshots', COMMIT, 'a', 'b.bin'),
    );
  });

  it('lists the files of the commit a ref names, with the hash their blob is named by, leaving out broken links', async () => {
    const repoDir = join(dir, 'datasets--acme--set');
    mkdirSync(join(repoDir, 'refs', 'refs', 'pr'), { recursive: true });
    writeFileSync(join(repoDir, 'refs', 'refs', 'pr', '1'), `${COMMIT}\n`);
    mkdirSync(join(repoDir, 'blobs'), { recursive: true });
    writeFileSync(join(repoDir, 'blobs', SHA256), 'weights');
    const snapshot = join(repoDir, 'snapshots', COMMIT);
    mkdirSync(join(snapshot, 'sub'), { recursive: true });
    symlinkSync(join('..', '..', '..', 'blobs', SHA256), join(snapshot, 'sub', 'w.bin'));
    symlinkSync(join('..', '..', 'blobs', 'd'.repeat(40)), join(snapshot, 'gone.json'));
    writeFileSync(join(snapshot, 'copied.txt'), 'abc');
    const found = await readHfCacheSnapshot(dir, parseRepoRef('datasets/acme/set@refs/pr/1'));
    assert.deepEqual(found?.commit, COMMIT);
    assert.deepEqual(
      found?.files.sort((a, b) => a.path.localeCompare(b.path)),
      [
        { path: 'copied.txt', sizeBytes: 3 },
        { path: 'sub/w.bin', sizeBytes: 7, sha256: SHA256 },
      ],
    );
    assert.equal(await readHfCacheSnapshot(dir, parseRepoRef('datasets/acme/set')), undefined);
    assert.equal(await readHfCacheSnapshot(dir, parseRepoRef(`acme/set@${COMMIT}`)), undefined);
  });
});
