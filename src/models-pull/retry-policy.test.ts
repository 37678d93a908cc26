import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideRetry, DEFAULT_RETRY_POLICY, parseRetryAfterMs } from './retry-policy.js';

describe('decideRetry', () => {
  it('backs off 1, 2, 4 and 8 s for transient failures, then stops after the fifth attempt', () => {
    const delays = [1, 2, 3, 4, 5].map((failedAttempts) => decideRetry(DEFAULT_RETRY_POLICY, { failedAttempts, isTransient: true }));
    assert.deepEqual(
      delays.map((d) => (d.shouldRetry ? d.delayMs : 'stop')),
      [1000, 2000, 4000, 8000, 'stop'],
    );
  });

  it('never retries a failure that is not transient', () => {
    assert.equal(decideRetry(DEFAULT_RETRY_POLICY, { failedAttempts: 1, isTransient: false }).shouldRetry, false);
  });

  it("waits the server's Retry-After, capped at maxDelayMs", () => {
    assert.equal(decideRetry(DEFAULT_RETRY_POLICY, { failedAttempts: 1, isTransient: true, retryAfterMs: 7000 }).delayMs, 7000);
    assert.equal(decideRetry(DEFAULT_RETRY_POLICY, { failedAttempts: 1, isTransient: true, retryAfterMs: 600_000 }).delayMs, 30_000);
  });
});

describe('parseRetryAfterMs', () => {
  it('reads seconds and HTTP dates, and nothing else', () => {
    assert.equal(parseRetryAfterMs('3', 0), 3000);
    assert.equal(parseRetryAfterMs('Thu, 01 Jan 1970 00:00:05 GMT', 1000), 4000);
    assert.equal(parseRetryAfterMs('soon', 0), undefined);
    assert.equal(parseRetryAfterMs(undefined, 0), undefined);
  });
});
