import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planSequenceDispatch, type SequenceCandidate, type SequenceHead } from './sequence-plan.js';

const head = (id: string, boundInstanceId?: string, enqueuedMs = 0): SequenceHead & { id: string } => ({
  id,
  bucket: 0,
  priority: 1,
  enqueuedMs,
  boundInstanceId,
});
const inst = (instanceId: string, boundSessions = 0, runningBatches = 0): SequenceCandidate => ({
  instanceId,
  boundSessions,
  runningBatches,
  runningRequests: runningBatches,
});
const policy = { maxBatchSize: 4, preferredBatchSizes: [], maxQueueDelayMs: 10 };
const ids = (plan: ReturnType<typeof planSequenceDispatch<ReturnType<typeof head>>>) =>
  plan.dispatches.map((d) => [d.instanceId, d.items.map((h) => h.id)]);

describe('planSequenceDispatch', () => {
  it('keeps bound sessions on their ready instance and spreads unbound ones by bound sessions', () => {
    const plan = planSequenceDispatch([head('s1', 'a'), head('n1'), head('n2'), head('s2', 'gone')], [inst('a', 3), inst('b', 0)], {
      policy,
      nowMs: 10,
      maxRunningBatchesPerInstance: 1,
    });
    assert.deepEqual(ids(plan), [
      ['a', ['s1']],
      ['b', ['n1', 'n2', 's2']],
    ]);
  });

  it('waits for maxQueueDelayMs, and does not dispatch to an instance at its running-batch limit', () => {
    const waiting = planSequenceDispatch([head('x', undefined, 5)], [inst('a')], { policy, nowMs: 6, maxRunningBatchesPerInstance: 1 });
    assert.deepEqual(waiting, { dispatches: [], wakeAtMs: 15 });
    const full = planSequenceDispatch([head('x', 'a')], [inst('a', 1, 1), inst('b')], {
      policy,
      nowMs: 100,
      maxRunningBatchesPerInstance: 1,
    });
    assert.deepEqual(full, { dispatches: [], wakeAtMs: undefined });
  });

  it('splits more heads than maxBatchSize into several batches while the instance has room', () => {
    const heads = ['1', '2', '3', '4', '5'].map((id) => head(id, 'a'));
    const plan = planSequenceDispatch(heads, [inst('a')], { policy, nowMs: 10, maxRunningBatchesPerInstance: 2 });
    assert.deepEqual(ids(plan), [
      ['a', ['1', '2', '3', '4']],
      ['a', ['5']],
    ]);
  });
});
