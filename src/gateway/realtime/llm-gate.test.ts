import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fake-clock.js';
import { createLlmGate, priceUsage } from './llm-gate.js';

const PRICES = { inputUsdPerMillionTokens: 2, outputUsdPerMillionTokens: 8 };

describe('LlmGate (block switch and daily budget)', () => {
  it('prices usage at the token prices', () => {
    assert.equal(priceUsage({ inputTokens: 1_000_000, outputTokens: 500_000 }, PRICES), 6);
  });

  it('the block switch refuses calls until it is switched off', () => {
    const gate = createLlmGate({ isBlocked: true, dailyBudgetUsd: 0, ...PRICES }, { clock: new FakeClock() });
    assert.equal(gate.admit(), 'blocked');
    gate.setBlocked(false);
    assert.equal(gate.admit(), 'allowed');
    gate.setBlocked(true);
    assert.equal(gate.admit(), 'blocked');
    assert.equal(gate.snapshot().isBlocked, true);
  });

  it('reads the rest of the daily budget as turns at the average cost, refuses once spent, and starts afresh the next UTC day', () => {
    const clock = new FakeClock();
    const gate = createLlmGate({ isBlocked: false, dailyBudgetUsd: 1, ...PRICES }, { clock });
    assert.equal(gate.snapshot().turnsRemaining, null);
    // 0.2 US dollars a turn
    const turn = { inputTokens: 50_000, outputTokens: 12_500 };
    assert.equal(gate.record(turn), 0.2);
    assert.equal(gate.snapshot().turnsRemaining, 4);
    for (let i = 0; i < 4; i++) gate.record(turn);
    assert.equal(gate.admit(), 'budget_exhausted');
    assert.equal(gate.snapshot().turnsRemaining, 0);
    clock.advance(86_400_000);
    assert.equal(gate.admit(), 'allowed');
    assert.deepEqual(
      { ...gate.snapshot(), spentTodayUsd: 0 },
      // FakeClock's wall clock is 80,000 s into its UTC day.
      { isBlocked: false, dailyBudgetUsd: 1, spentTodayUsd: 0, turnsToday: 0, turnsRemaining: 5, resetInMs: 6_400_000 },
    );
  });

  it('with no budget there is no limit', () => {
    const gate = createLlmGate({ isBlocked: false, dailyBudgetUsd: 0, ...PRICES }, { clock: new FakeClock() });
    gate.record({ inputTokens: 1e9, outputTokens: 1e9 });
    assert.equal(gate.admit(), 'allowed');
    assert.equal(gate.snapshot().turnsRemaining, null);
  });
});
