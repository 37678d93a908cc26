import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { takePartLock } from './part-lock.js';

describe('takePartLock', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'voxmux-lock-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails with disk_full and leaves no lock behind when the disk is full as its owner is written', async (t) => {
    const probe = await open(join(dir, 'probe'), 'w');
    const fileHandle = Object.getPrototypeOf(probe) as { writeFile: (...args: unknown[]) => Promise<void> };
    await probe.close();
    // A full disk still lets the file be created, then refuses its bytes (as a full tmpfs does).
    t.mock.method(fileHandle, 'writeFile', () =>
      Promise.reject(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })),
    );
    const partPath = join(dir, 'w.bin.part');
    await assert.rejects(takePartLock(partPath, Date.now()), { code: 'disk_full' });
    assert.equal(existsSync(`${partPath}.lock`), false);

    t.mock.restoreAll();
    const lock = await takePartLock(partPath, Date.now());
    await lock.release();
  });
});
