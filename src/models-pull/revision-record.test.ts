import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { parseRepoRef } from './repo-ref.js';
import { readRevisionRecord, saveRevisionRecord } from './revision-record.js';

const COMMIT = 'a'.repeat(40);
const FILES = [
  { path: 'config.json', sizeBytes: 15, gitOid: 'c'.repeat(40) },
  { path: 'w.bin', sizeBytes: 99, sha256: 'd'.repeat(64) },
];

describe('revision records', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'voxmux-record-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('finds the commit and files a pull recorded, by the branch or by the commit, beside the commit folders', async () => {
    await saveRevisionRecord(dir, { ref: parseRepoRef('acme/model@v1'), snapshot: { commit: COMMIT, files: FILES } });
    const found = { isFound: true, snapshot: { commit: COMMIT, files: FILES } };
    assert.deepEqual(await readRevisionRecord(dir, parseRepoRef('acme/model@v1')), found);
    assert.deepEqual(await readRevisionRecord(dir, parseRepoRef(`acme/model@${COMMIT}`)), found);
    assert.deepEqual(await readRevisionRecord(dir, parseRepoRef('acme/model')), { isFound: false });
    assert.deepEqual(await readRevisionRecord(dir, parseRepoRef('datasets/acme/model@v1')), { isFound: false });
    assert.deepEqual(readdirSync(join(dir, 'acme', 'model')), ['.pull']);
  });

  it('reads a record it cannot parse as no record, with the commit the ref names', async () => {
    await saveRevisionRecord(dir, { ref: parseRepoRef('acme/model'), snapshot: { commit: COMMIT, files: FILES } });
    writeFileSync(join(dir, 'acme', 'model', '.pull', 'files', `${COMMIT}.json`), '{"files": [{"size": 1}]}');
    assert.deepEqual(await readRevisionRecord(dir, parseRepoRef('acme/model')), { isFound: false, commit: COMMIT });
  });
});
