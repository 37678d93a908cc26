import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { releaseIdleMemory } from './idle-memory.js';

/** How many full (mark-compact) collections `work` caused, as V8 reports them. */
async function majorCollections(work: () => Promise<void>): Promise<number> {
  let count = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const { detail } = entry as PerformanceEntry & { detail?: { kind?: number } };
      if (detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) count += 1;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  await work();
  await sleep(50); // the entries arrive after the collection
  observer.disconnect();
  return count;
}

describe('releaseIdleMemory', () => {
  it('runs a full collection when no call is in progress, and none while calls are', async () => {
    assert.equal(await majorCollections(() => releaseIdleMemory({ isServing: true })), 0);
    assert.ok((await majorCollections(() => releaseIdleMemory({ isServing: false }))) >= 1);
    assert.ok((await majorCollections(() => releaseIdleMemory({ isServing: false }))) >= 1, 'again: the collector is kept');
  });
});
