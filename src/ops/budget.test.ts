import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { accrue, decideAlerts, emptyLedger, exhaustedGuard, gpuHoursOf, spendUsd, uptimeHoursOf } from './budget.js';

const H = 3_600_000;
const T0 = Date.UTC(2026, 11, 4, 10, 0, 0); // 2026-12-04 10:00 UTC
const POLICY = { gpuHourPriceUsd: 2.5, monthlyBudgetUsd: 100, dailyUptimeLimitHours: 20 };

describe('budget accounting', () => {
  it('accrues GPU hours per GPU held and uptime once, and spend as GPU hours times the price', () => {
    const ledger = accrue(emptyLedger(T0), { fromWallMs: T0, toWallMs: T0 + 3 * H, gpusHeld: 2 });
    assert.equal(gpuHoursOf(ledger), 6);
    assert.equal(uptimeHoursOf(ledger), 3);
    assert.equal(spendUsd(ledger, POLICY), 15);
    const idle = accrue(ledger, { fromWallMs: T0 + 3 * H, toWallMs: T0 + 5 * H, gpusHeld: 0 });
    assert.equal(gpuHoursOf(idle), 6);
    assert.equal(uptimeHoursOf(idle), 3);
  });

  it('starts a new day and month from their first instant, dropping the part before', () => {
    const lateDay = Date.UTC(2026, 11, 31, 23, 0, 0);
    const ledger = accrue(
      { month: '2026-12', gpuMs: 40 * H, day: '2026-12-31', uptimeMs: 5 * H },
      {
        fromWallMs: lateDay,
        toWallMs: lateDay + 3 * H,
        gpusHeld: 1,
      },
    );
    assert.deepEqual(ledger, { month: '2027-01', gpuMs: 2 * H, day: '2027-01-01', uptimeMs: 2 * H });
  });

  it('decides the thresholds at or over 80 % and 100 % of each enabled guard, by period', () => {
    const at80 = { month: '2026-12', gpuMs: 32 * H, day: '2026-12-04', uptimeMs: 10 * H }; // $80 of $100; 10 of 20 h
    assert.deepEqual(
      decideAlerts(at80, POLICY).map((a) => [a.guard, a.percent, a.period]),
      [['monthly_spend', 80, '2026-12']],
    );
    const over = { ...at80, gpuMs: 40 * H, uptimeMs: 20 * H };
    assert.deepEqual(
      decideAlerts(over, POLICY).map((a) => [a.guard, a.percent]),
      [
        ['monthly_spend', 80],
        ['monthly_spend', 100],
        ['daily_uptime', 80],
        ['daily_uptime', 100],
      ],
    );
    assert.equal(exhaustedGuard(over, POLICY), 'monthly_spend');
    assert.deepEqual(decideAlerts(over, { ...POLICY, monthlyBudgetUsd: 0, dailyUptimeLimitHours: 0 }), []);
  });
});
