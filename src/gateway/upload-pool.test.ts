import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../test/support/fake-clock.js';
import { UploadPool, readIntoPool } from './upload-pool.js';

async function* chunksOf(...parts: number[][]): AsyncIterable<Buffer> {
  for (const part of parts) yield Buffer.from(part);
}

describe('UploadPool', () => {
  it('lets go of all its memory once no upload has taken a buffer for idleMs, and not before (#16)', () => {
    const clock = new FakeClock();
    const changes: number[] = [];
    let idleReleases = 0;
    const pool = new UploadPool(
      { maxPooledBytes: 1024 * 1024, idleMs: 1000 },
      { clock, onChange: ({ pooledBytes }) => changes.push(pooledBytes), onIdleRelease: () => (idleReleases += 1) },
    );
    pool.giveBack(pool.take(100_000));
    assert.equal(pool.pooledBytes, 128 * 1024);
    clock.advance(600);
    // A take at 600 ms restarts the idle period.
    const again = pool.take(100_000);
    pool.giveBack(again);
    clock.advance(999);
    assert.equal(pool.pooledBytes, 128 * 1024);
    assert.equal(idleReleases, 0);
    clock.advance(1);
    assert.equal(pool.pooledBytes, 0);
    assert.equal(changes.at(-1), 0);
    // Idle memory is given back once the pool's has gone (gateway.ts passes releaseIdleMemory).
    assert.equal(idleReleases, 1);
    // The pool works as before afterwards, and releases again.
    pool.giveBack(pool.take(10));
    assert.equal(pool.pooledBytes, 64 * 1024);
    clock.advance(1000);
    assert.equal(pool.pooledBytes, 0);
    assert.equal(idleReleases, 2);
  });

  it('hands out buffers of the size asked, and reuses one given back for the next of its size class', () => {
    const pool = new UploadPool({ maxPooledBytes: 1024 * 1024 });
    const first = pool.take(100_000);
    assert.equal(first.length, 100_000);
    assert.equal(first.byteOffset, 0);
    pool.giveBack(first.subarray(10, 20));
    assert.equal(pool.pooledBytes, 128 * 1024);
    const second = pool.take(70_000);
    assert.equal(second.buffer, first.buffer);
    assert.equal(second.length, 70_000);
    assert.equal(pool.pooledBytes, 0);
    // A different size class gets its own memory.
    assert.notEqual(pool.take(200_000).buffer, first.buffer);
  });

  it('reports each allocation and the pooled bytes after each change', () => {
    const changes: Array<{ pooledBytes: number; allocatedBytes: number }> = [];
    const pool = new UploadPool({ maxPooledBytes: 1024 * 1024 }, { onChange: (change) => changes.push(change) });
    const taken = pool.take(100);
    pool.giveBack(taken);
    pool.take(200);
    assert.deepEqual(changes, [
      { pooledBytes: 0, allocatedBytes: 64 * 1024 },
      { pooledBytes: 64 * 1024, allocatedBytes: 0 },
      { pooledBytes: 0, allocatedBytes: 0 },
    ]);
  });

  it('ignores a second give-back and buffers it did not hand out', () => {
    const pool = new UploadPool({ maxPooledBytes: 1024 * 1024 });
    const taken = pool.take(1000);
    pool.giveBack(taken);
    pool.giveBack(taken);
    pool.giveBack(Buffer.alloc(64 * 1024));
    assert.equal(pool.pooledBytes, 64 * 1024);
    assert.equal(pool.take(1000).buffer, taken.buffer);
    assert.notEqual(pool.take(1000).buffer, taken.buffer);
  });

  it('keeps no more than its limit, and nothing with a limit of 0', () => {
    const pool = new UploadPool({ maxPooledBytes: 128 * 1024 });
    const a = pool.take(64 * 1024);
    const b = pool.take(64 * 1024);
    const c = pool.take(64 * 1024);
    for (const buffer of [a, b, c]) pool.giveBack(buffer);
    assert.equal(pool.pooledBytes, 128 * 1024);
    const off = new UploadPool({ maxPooledBytes: 0 });
    const taken = off.take(10);
    off.giveBack(taken);
    assert.equal(off.pooledBytes, 0);
    assert.notEqual(off.take(10).buffer, taken.buffer);
  });
});

describe('UploadPool.adopt', () => {
  it('pools memory that came back from another thread, and ignores sizes it never hands out', () => {
    const pool = new UploadPool({ maxPooledBytes: 1024 * 1024 });
    const taken = pool.take(100_000);
    const memory = taken.buffer as ArrayBuffer;
    const back = structuredClone(memory, { transfer: [memory] });
    assert.equal(taken.byteLength, 0);
    pool.adopt(back);
    assert.equal(pool.pooledBytes, 128 * 1024);
    assert.equal(pool.take(100_000).buffer, back);
    pool.adopt(new ArrayBuffer(100_000));
    assert.equal(pool.pooledBytes, 0);
  });
});

describe('readIntoPool', () => {
  it('reads the chunks into a pooled buffer and returns a view of exactly what was read', async () => {
    const pool = new UploadPool({ maxPooledBytes: 1024 * 1024 });
    const read = await readIntoPool(chunksOf([1, 2, 3], [4], [5, 6]), 100, pool);
    assert.deepEqual([...read], [1, 2, 3, 4, 5, 6]);
    assert.equal(read.buffer.byteLength, 64 * 1024);
    pool.giveBack(read);
    assert.equal(pool.pooledBytes, 64 * 1024);
  });

  it('gathers the bytes in a fresh buffer when more arrive than the capacity said, giving the pooled one back', async () => {
    const pool = new UploadPool({ maxPooledBytes: 1024 * 1024 });
    const big = Array.from({ length: 40_000 }, (_, i) => i % 251);
    const read = await readIntoPool(chunksOf(big, big), 70_000, pool);
    assert.equal(read.length, 80_000);
    assert.deepEqual([...read.subarray(39_998, 40_002)], [big[39_998], big[39_999], 0, 1]);
    assert.equal(pool.pooledBytes, 128 * 1024);
    assert.notEqual(pool.take(70_000).buffer, read.buffer);
  });

  it('gives the pooled buffer back when the chunks fail part way (a client that left mid-upload)', async () => {
    const pool = new UploadPool({ maxPooledBytes: 1024 * 1024 });
    async function* cut(): AsyncIterable<Buffer> {
      yield Buffer.from([1, 2, 3]);
      throw new Error('premature close');
    }
    await assert.rejects(readIntoPool(cut(), 100, pool), /premature close/);
    assert.equal(pool.pooledBytes, 64 * 1024);
  });
});
