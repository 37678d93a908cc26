import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideRestart, type RestartPolicy } from './restart-policy.js';

const policy: RestartPolicy = {
  restartInitialBackoffMs: 500,
  restartMaxBackoffMs: 30_000,
  crashLoopWindowMs: 60_000,
  crashLoopMaxFailures: 5,
};

/** Feeds failures at the given times through decideRestart, as the supervisor does, and returns each decision. */
function replay(timesMs: readonly number[], p: RestartPolicy = policy) {
  let failures: number[] = [];
  return timesMs.map((t) => {
    const decision = decideRestart(failures, t, p);
    failures = decision.recentFailuresMs;
    return decision;
  });
}

describe('decideRestart', () => {
  it('restarts after the initial backoff on a first failure', () => {
    assert.deepEqual(decideRestart([], 1_000, policy), { delayMs: 500, isCrashLoop: false, recentFailuresMs: [1_000] });
  });

  it('doubles the backoff with each failure inside the window', () => {
    const decisions = replay([0, 1_000, 2_000, 3_000], { ...policy, crashLoopMaxFailures: 10 });
    assert.deepEqual(
      decisions.map((d) => d.delayMs),
      [500, 1_000, 2_000, 4_000],
    );
    assert.ok(decisions.every((d) => !d.isCrashLoop));
  });

  it('caps the backoff at restartMaxBackoffMs', () => {
    const decisions = replay([0, 1, 2, 3, 4, 5, 6, 7, 8], { ...policy, crashLoopMaxFailures: 100 });
    assert.deepEqual(
      decisions.map((d) => d.delayMs),
      [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000],
    );
  });

  it('keeps the backoff a finite number after very many failures, a zero initial backoff included', () => {
    const failures = Array.from({ length: 2_000 }, (_, i) => i);
    const many = { ...policy, crashLoopMaxFailures: 10_000 };
    assert.equal(decideRestart(failures, 2_000, many).delayMs, 30_000);
    // 0 × 2^2000 would be 0 × Infinity = NaN.
    assert.equal(decideRestart(failures, 2_000, { ...many, restartInitialBackoffMs: 0 }).delayMs, 0);
  });

  it('forgets failures older than crashLoopWindowMs, so the backoff starts over', () => {
    const decision = decideRestart([0, 1_000, 2_000], 62_000, policy);
    assert.deepEqual(decision.recentFailuresMs, [62_000]);
    assert.equal(decision.delayMs, 500);
    const partly = decideRestart([0, 1_000, 30_000], 61_000, policy);
    assert.deepEqual(partly.recentFailuresMs, [30_000, 61_000]);
    assert.equal(partly.delayMs, 1_000);
  });

  it('treats a failure exactly crashLoopWindowMs old as outside the window', () => {
    assert.deepEqual(decideRestart([0], 60_000, policy).recentFailuresMs, [60_000]);
    assert.deepEqual(decideRestart([1], 60_000, policy).recentFailuresMs, [1, 60_000]);
  });

  it('reports a crash loop at crashLoopMaxFailures failures in the window and restarts it at the longest backoff', () => {
    const decisions = replay([0, 100, 200, 300, 400, 500]);
    assert.deepEqual(
      decisions.map((d) => d.isCrashLoop),
      [false, false, false, false, true, true],
    );
    assert.deepEqual(
      decisions.map((d) => d.delayMs),
      [500, 1_000, 2_000, 4_000, 30_000, 30_000],
    );
  });

  it('leaves the crash loop once enough failures age out of the window', () => {
    const decision = decideRestart([0, 100, 200, 300, 400], 60_250, policy);
    assert.deepEqual(decision.recentFailuresMs, [300, 400, 60_250]);
    assert.equal(decision.isCrashLoop, false);
    assert.equal(decision.delayMs, 2_000);
  });

  it('reports every failure as a crash loop when crashLoopMaxFailures is 1', () => {
    assert.deepEqual(decideRestart([], 0, { ...policy, crashLoopMaxFailures: 1 }), {
      delayMs: 30_000,
      isCrashLoop: true,
      recentFailuresMs: [0],
    });
  });

  it('does not modify the failure list it is given', () => {
    const failures = Object.freeze([0, 1_000]);
    decideRestart(failures, 2_000, policy);
    assert.deepEqual(failures, [0, 1_000]);
  });
});
