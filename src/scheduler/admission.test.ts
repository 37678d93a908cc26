import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canAdmit, decideAdmission, type AdmissionItem, type AdmissionSnapshot } from './admission.js';

const NOW = 10_000;
const item = (audioS = 1, bucket = 0): AdmissionItem => ({ bucket, audioS });

/** One instance, 200 ms per batch plus 100 ms per audio second, batches of up to 2, a 20 % margin. */
function snapshot(overrides: Partial<AdmissionSnapshot> = {}): AdmissionSnapshot {
  return {
    ahead: [],
    request: { ...item(), timeoutMs: 2000 },
    instanceFreeAtMs: [NOW],
    service: { perBatchMs: 200, perAudioSecondMs: 100 },
    maxBatchSize: 2,
    maxQueueDelayMs: 10,
    marginPercent: 20,
    ...overrides,
  };
}

describe('canAdmit', () => {
  it('admits below maxQueuedRequests only', () => {
    assert.equal(canAdmit(2, 3), true);
    assert.equal(canAdmit(3, 3), false);
  });
});

describe('decideAdmission', () => {
  it('admits a request that runs at once, with its batch delay and service time as the prediction', () => {
    assert.deepEqual(decideAdmission(snapshot(), NOW), { kind: 'admit', predictedDoneMs: NOW + 10 + 300 });
  });

  it('with dispatchWhenIdle, starts a short batch as soon as an instance is free, without the batch delay', () => {
    assert.deepEqual(decideAdmission(snapshot({ dispatchWhenIdle: true }), NOW), { kind: 'admit', predictedDoneMs: NOW + 300 });
    // Behind a busy instance: the short batch starts when the instance frees up.
    const busy = decideAdmission(snapshot({ dispatchWhenIdle: true, instanceFreeAtMs: [NOW + 5] }), NOW);
    assert.deepEqual(busy, { kind: 'admit', predictedDoneMs: NOW + 5 + 300 });
    // Without it, the same short batch waits its 10 ms for more requests.
    assert.deepEqual(decideAdmission(snapshot({ instanceFreeAtMs: [NOW + 5] }), NOW), { kind: 'admit', predictedDoneMs: NOW + 10 + 300 });
  });

  it('admits a request that runs at once even when its service time alone exceeds its deadline', () => {
    const decision = decideAdmission(snapshot({ service: { perBatchMs: 5000, perAudioSecondMs: 0 } }), NOW);
    assert.equal(decision.kind, 'admit');
  });

  it('counts the running work: a busy instance delays the request by what it has left', () => {
    const decision = decideAdmission(snapshot({ instanceFreeAtMs: [NOW + 700] }), NOW);
    assert.deepEqual(decision, { kind: 'admit', predictedDoneMs: NOW + 700 + 300 });
  });

  it('joins the request to the last batch of its bucket and replays the batches ahead', () => {
    // Ahead: 3 requests of 1 s in bucket 0 → a batch of 2 (400 ms), then the request joins the third: 2 × 1 s (400 ms).
    const decision = decideAdmission(snapshot({ ahead: [item(), item(), item()] }), NOW);
    assert.deepEqual(decision, { kind: 'admit', predictedDoneMs: NOW + 400 + 400 });
  });

  it('refuses a request whose predicted completion passes its deadline less the margin, with the drain time', () => {
    // 8 requests ahead: 4 batches of 400 ms = 1600 ms; the request's own batch ends at 1600 + 300 > 2000 × 0.8.
    const decision = decideAdmission(snapshot({ ahead: Array.from({ length: 8 }, () => item()) }), NOW);
    assert.deepEqual(decision, { kind: 'reject', predictedDoneMs: NOW + 1600 + 300, drainMs: 1600 });
    // Without the margin, 1900 ms is within the 2000 ms deadline.
    assert.equal(decideAdmission(snapshot({ ahead: Array.from({ length: 8 }, () => item()), marginPercent: 0 }), NOW).kind, 'admit');
  });

  it('spreads the work ahead over the ready instances', () => {
    const ahead = Array.from({ length: 8 }, () => item());
    const decision = decideAdmission(snapshot({ ahead, instanceFreeAtMs: [NOW, NOW] }), NOW);
    // 4 batches over 2 instances: each busy 800 ms; the request's batch then ends at 800 + 300.
    assert.deepEqual(decision, { kind: 'admit', predictedDoneMs: NOW + 1100 });
  });

  it('keeps buckets apart: requests of another bucket never share the request batch', () => {
    const ahead = [item(1, 1), item(1, 0)];
    // Bucket 1's short batch (10 ms delay, 300 ms) goes first, then bucket 0's full batch with the request (2 s: 400 ms).
    const decision = decideAdmission(snapshot({ ahead }), NOW);
    assert.deepEqual(decision, { kind: 'admit', predictedDoneMs: NOW + 10 + 300 + 400 });
  });

  it('reads the time left from the snapshot: a short deadline refuses what a long one admits', () => {
    const ahead = Array.from({ length: 4 }, () => item());
    assert.equal(decideAdmission(snapshot({ ahead }), NOW).kind, 'admit');
    const short = decideAdmission(snapshot({ ahead, request: { ...item(), timeoutMs: 500 } }), NOW);
    assert.equal(short.kind, 'reject');
    assert.equal(short.kind === 'reject' ? short.drainMs : 0, 800);
  });

  it('treats an instance that overran its predicted end as free now', () => {
    assert.deepEqual(decideAdmission(snapshot({ instanceFreeAtMs: [NOW - 500] }), NOW), { kind: 'admit', predictedDoneMs: NOW + 310 });
  });
});
