import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LlmGateSnapshot } from './llm-gate.js';
import { toRateLimits } from './rate-limits.js';

const SNAPSHOT: LlmGateSnapshot = {
  isBlocked: false,
  dailyBudgetUsd: 10,
  spentTodayUsd: 3,
  turnsToday: 30,
  turnsRemaining: 70,
  resetInMs: 3_600_500,
};

describe('toRateLimits (rate_limits.updated)', () => {
  it('reports the LLM budget as requests: the turns made today plus those left, resetting at the next UTC day', () => {
    assert.deepEqual(toRateLimits(SNAPSHOT), [{ name: 'requests', limit: 100, remaining: 70, reset_seconds: 3600.5 }]);
  });

  it('a spent budget has none left', () => {
    assert.deepEqual(toRateLimits({ ...SNAPSHOT, spentTodayUsd: 10, turnsRemaining: 0 }), [
      { name: 'requests', limit: 30, remaining: 0, reset_seconds: 3600.5 },
    ]);
  });

  it('reports no limit without a budget or before any LLM turn was priced', () => {
    assert.deepEqual(toRateLimits({ ...SNAPSHOT, dailyBudgetUsd: 0, turnsRemaining: null }), []);
  });
});
