import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { releaseIdleMemory } from './idle-memory.js';

describe('releaseIdleMemory', () => {
  it('collects garbage the process has no other reason to collect, then trims the C heap', async () => {
    // A buffer whose memory lives outside the JavaScript heap, unreachable but not yet collected.
    let buffer: ArrayBuffer | undefined = new ArrayBuffer(8 * 1024 * 1024);
    const ref = new WeakRef(buffer);
    buffer = undefined;
    // A WeakRef's target is kept until the end of the turn that made or read it.
    await nextTurn();
    assert.ok(ref.deref() !== undefined, 'nothing has collected it yet');
    await nextTurn();
    await releaseIdleMemory();
    await nextTurn();
    assert.ok(ref.deref() === undefined, 'collected');
    await releaseIdleMemory(); // again: the collector is kept
  });
});
