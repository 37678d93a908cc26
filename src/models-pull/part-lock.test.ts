import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { open } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { takePartLock, type LockFileSystem, type PartLock } from './part-lock.js';

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

  it('lets exactly one of two pulls that race to take over one stale lock have it; the other fails with locked', async () => {
    for (let race = 0; race < 20; race++) {
      const partPath = join(dir, `w${race}.bin.part`);
      // A pull on this host whose process is gone (above Linux's largest pid).
      writeFileSync(`${partPath}.lock`, JSON.stringify({ host: hostname(), pid: 2 ** 22 + 1 }));
      const outcomes = await Promise.allSettled([takePartLock(partPath, Date.now()), takePartLock(partPath, Date.now())]);
      const winners = outcomes.filter((o) => o.status === 'fulfilled');
      assert.equal(winners.length, 1, `race ${race}: ${outcomes.map((o) => o.status).join(', ')}`);
      const loser = outcomes.find((o) => o.status === 'rejected');
      assert.equal((loser?.reason as { code?: unknown } | undefined)?.code, 'locked');
      assert.equal((JSON.parse(readFileSync(`${partPath}.lock`, 'utf8')) as { pid: number }).pid, process.pid);
      await (winners[0] as PromiseFulfilledResult<PartLock>).value.release();
      assert.deepEqual(readdirSync(dir), []);
    }
  });

  it('lets one pull have a stale lock when another takes it over between its check and its own takeover', async () => {
    const partPath = join(dir, 'w.bin.part');
    const lockPath = `${partPath}.lock`;
    writeFileSync(lockPath, JSON.stringify({ host: hostname(), pid: 2 ** 22 + 1 }));
    // The first pull takes over the moment both have found the lock stale; the second moves the
    // lock aside only after the first has created its own.
    let markFirstCreated!: () => void;
    const firstCreated = new Promise<void>((resolve) => (markFirstCreated = resolve));
    let markBothChecked!: () => void;
    const bothChecked = new Promise<void>((resolve) => (markBothChecked = resolve));
    let checks = 0;
    const checked = async () => {
      if (++checks === 2) markBothChecked();
      await bothChecked;
    };
    // Each pull reads the lock, then waits until both have judged it stale.
    const readThenWait = (async (path: string, encoding: 'utf8') => {
      const text = await fs.readFile(path, encoding);
      if (path === lockPath) await checked();
      return text;
    }) as LockFileSystem['readFile'];
    const first: LockFileSystem = {
      ...fs,
      readFile: readThenWait,
      open: (async (path: string, flags: string) => {
        const handle = await fs.open(path, flags);
        if (flags === 'wx' && checks >= 2) markFirstCreated();
        return handle;
      }) as LockFileSystem['open'],
    };
    const second: LockFileSystem = {
      ...fs,
      readFile: readThenWait,
      rm: (async (path: string, options: object) => {
        if (path === lockPath) await firstCreated;
        return fs.rm(path, options);
      }) as LockFileSystem['rm'],
      rename: (async (from: string, to: string) => {
        if (from === lockPath) await firstCreated;
        return fs.rename(from, to);
      }) as LockFileSystem['rename'],
    };
    const outcomes = await Promise.allSettled([
      takePartLock(partPath, Date.now(), { fs: first }),
      takePartLock(partPath, Date.now(), { fs: second }),
    ]);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['fulfilled', 'rejected'],
    );
    assert.equal(((outcomes[1] as PromiseRejectedResult).reason as { code?: unknown }).code, 'locked');
    assert.equal(existsSync(lockPath), true);
    await (outcomes[0] as PromiseFulfilledResult<PartLock>).value.release();
    assert.deepEqual(readdirSync(dir), []);
  });
});
