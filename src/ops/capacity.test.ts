import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { estimateCapacity, type LoadSample } from './capacity.js';

const policy = { targetBusyRatio: 0.5, backlogDrainMs: 10_000 };
const sample = (atMs: number, model: Partial<LoadSample['models'][string]>): LoadSample => ({
  atMs,
  models: { asr: { instances: 2, busyMs: 0, completedRequests: 0, queued: 0, ...model } },
});

describe('estimateCapacity', () => {
  it('asks for no replica without load', () => {
    assert.deepEqual(estimateCapacity(sample(0, {}), sample(30_000, {}), policy), {
      asr: { busyInstances: 0, requestsPerBusySecond: undefined, desiredReplicas: 0 },
    });
  });

  it('measures busy instances and capacity, and sizes the pool at the target busy share', () => {
    // 2 instances busy 45 s in all over 30 s (1.5 busy instances), 900 requests done: 20 per busy second.
    const capacity = estimateCapacity(
      sample(1000, { busyMs: 5000, completedRequests: 100 }),
      sample(31_000, { busyMs: 50_000, completedRequests: 1000 }),
      policy,
    ).asr!;
    assert.equal(capacity.busyInstances, 1.5);
    assert.equal(capacity.requestsPerBusySecond, 20);
    // 1.5 busy instances against 2 × 0.5 at target: 1.5 replicas of this node.
    assert.equal(capacity.desiredReplicas, 1.5);
  });

  it('adds the queue as the instances needed to run it within the drain time', () => {
    // 20 requests per busy second; 400 queued over 10 s need 2 more busy instances.
    const capacity = estimateCapacity(sample(0, {}), sample(10_000, { busyMs: 20_000, completedRequests: 400, queued: 400 }), policy).asr!;
    assert.equal(capacity.busyInstances, 2);
    assert.equal(capacity.desiredReplicas, (2 + 2) / (2 * 0.5));
  });

  it('asks for one instance per queue before any request completed (a cold node)', () => {
    const capacity = estimateCapacity(sample(0, {}), sample(10_000, { queued: 3 }), policy).asr!;
    assert.equal(capacity.requestsPerBusySecond, undefined);
    assert.equal(capacity.desiredReplicas, 1 / (2 * 0.5));
  });

  it('asks for nothing for a model without instances, and caps busy instances at the count', () => {
    const none = estimateCapacity(
      sample(0, {}),
      { atMs: 1000, models: { asr: { instances: 0, busyMs: 0, completedRequests: 0, queued: 5 } } },
      policy,
    );
    assert.equal(none.asr!.desiredReplicas, 0);
    const capped = estimateCapacity(sample(0, {}), sample(1000, { busyMs: 5000, completedRequests: 10 }), policy);
    assert.equal(capped.asr!.busyInstances, 2);
  });
});
