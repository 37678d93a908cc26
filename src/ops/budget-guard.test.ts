import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createMetrics } from '../telemetry/metrics.js';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { silentLogger } from '../../test/support/test-logger.js';
import { createBudgetGuard, type BudgetGuardOptions, type BudgetWebhookBody } from './budget-guard.js';

const H = 3_600_000;

/** A FakeClock at the start of a UTC day (its wall time starts at 2023-11-14 22:13:20). */
function midnightClock(): FakeClock {
  const clock = new FakeClock();
  clock.advance(Date.UTC(2023, 10, 15) - clock.wallMs());
  return clock;
}

function setup(overrides: Partial<BudgetGuardOptions> = {}, clock = midnightClock()) {
  const posts: BudgetWebhookBody[] = [];
  const metrics = createMetrics();
  let gpus = 1;
  const guard = createBudgetGuard(
    {
      gpuHourPriceUsd: 10,
      monthlyBudgetUsd: 100,
      dailyUptimeLimitHours: 0,
      checkIntervalMs: 300_000,
      webhookUrl: 'http://127.0.0.1:9/hook',
      hardStop: true,
      statePath: '',
      ...overrides,
    },
    {
      clock,
      log: silentLogger(),
      metrics,
      gpusHeld: () => gpus,
      postJson: (_url, body) => {
        posts.push(body as BudgetWebhookBody);
        return Promise.resolve();
      },
    },
  );
  return { clock, guard, posts, metrics, setGpus: (n: number) => (gpus = n) };
}

describe('BudgetGuard', () => {
  it('checks every checkIntervalMs, exports GPU hours and spend, and posts each threshold once', async () => {
    const t = setup();
    t.guard.start();
    t.clock.advance(7.5 * H); // $75: under 80 %
    await settle();
    assert.equal(t.posts.length, 0);
    assert.match(await t.metrics.registry.getSingleMetricAsString('voxmux_budget_gpu_hours'), /voxmux_budget_gpu_hours 7.5/);
    t.clock.advance(0.5 * H); // $80
    await settle();
    assert.deepEqual(
      t.posts.map((p) => [p.guard, p.percent]),
      [['monthly_spend', 80]],
    );
    t.clock.advance(1 * H); // $90: 80 % already fired
    await settle();
    assert.equal(t.posts.length, 1);
    assert.equal(t.guard.wakeRefusal('m'), undefined);
    t.clock.advance(1 * H); // $100
    await settle();
    assert.deepEqual(
      t.posts.map((p) => [p.guard, p.percent]),
      [
        ['monthly_spend', 80],
        ['monthly_spend', 100],
      ],
    );
    assert.equal(t.guard.wakeRefusal('m')?.code, 'gpu_budget_exhausted');
    assert.match(await t.metrics.registry.getSingleMetricAsString('voxmux_budget_spend_usd'), /voxmux_budget_spend_usd 100/);
    t.guard.close();
  });

  it('makes up a missed check at the next one: a check after a long gap accrues the whole gap', async () => {
    const t = setup({ webhookUrl: '' });
    t.guard.start();
    t.setGpus(2);
    await t.guard.check(); // the count seen at either end of an interval is held throughout
    const snapshotBefore = t.guard.snapshot();
    t.guard.close(); // no timer: only explicit checks from here
    t.clock.advance(5 * H);
    await t.guard.check();
    assert.equal(t.guard.snapshot().gpuHours - snapshotBefore.gpuHours, 10);
    assert.equal(t.guard.snapshot().exhausted, 'monthly_spend');
  });

  it('keeps the ledger in statePath: after a restart a threshold still over fires once more, one no longer over does not', async () => {
    const statePath = join(mkdtempSync(join(tmpdir(), 'voxmux-budget-')), 'budget.json');
    const first = setup({ statePath, dailyUptimeLimitHours: 10, monthlyBudgetUsd: 1000 });
    first.guard.start();
    first.clock.advance(8 * H); // uptime 8 of 10 h (80 %); spend $80 of $1000
    await settle();
    assert.deepEqual(
      first.posts.map((p) => [p.guard, p.percent]),
      [['daily_uptime', 80]],
    );
    first.guard.close();
    assert.equal(JSON.parse(readFileSync(statePath, 'utf8')).uptimeMs, 8 * H);

    // Restart the same day: still over 80 % of the daily limit, so it fires once more.
    const again = setup({ statePath, dailyUptimeLimitHours: 10, monthlyBudgetUsd: 1000 }, first.clock);
    again.setGpus(0);
    again.guard.start();
    await settle();
    assert.deepEqual(
      again.posts.map((p) => [p.guard, p.percent]),
      [['daily_uptime', 80]],
    );
    again.clock.advance(H);
    await settle();
    assert.equal(again.posts.length, 1, 'no second post for the same crossing');
    again.guard.close();

    // Restart the next day: the day's uptime starts from zero, nothing is over, nothing fires.
    first.clock.advance(24 * H);
    const nextDay = setup({ statePath, dailyUptimeLimitHours: 10, monthlyBudgetUsd: 1000 }, first.clock);
    nextDay.setGpus(0);
    nextDay.guard.start();
    await settle();
    assert.deepEqual(nextDay.posts, []);
    assert.equal(nextDay.guard.snapshot().uptimeHours, 0);
    nextDay.guard.close();
  });

  it('lets wakes through once the UTC day whose uptime limit was reached has ended, not only after the next check', async () => {
    // The checks fall at 00:02, 00:07, ... 23:57 of each day (every 5 minutes from a start at 00:02).
    const clock = midnightClock();
    clock.advance(2 * 60_000);
    const t = setup({ gpuHourPriceUsd: 0, monthlyBudgetUsd: 0, dailyUptimeLimitHours: 1, webhookUrl: '' }, clock);
    t.guard.start();
    t.clock.advance(2 * H); // 2 h of uptime today: the daily guard is at 200 %
    await settle();
    assert.equal(t.guard.wakeRefusal('m')?.code, 'gpu_budget_exhausted');
    t.setGpus(0); // the model stopped; nothing holds a GPU from here on
    // 00:01 UTC the next day (the last check ran at 23:57): the new day has used 0 of its 1 h.
    t.clock.advance(Date.UTC(2023, 10, 16, 0, 1) - t.clock.wallMs());
    await settle();
    const refusal = t.guard.wakeRefusal('m');
    assert.equal(
      refusal,
      undefined,
      `a wake on a new UTC day is refused with Retry-After ${refusal?.retryAfterMs} ms (until the end of the new day, not the old one)`,
    );
    t.guard.close();
  });

  it('keeps the GPU time since the last check when it closes, so a restart does not drop it', async () => {
    // "A late or missed check is made up by the next one" and the guard "errs towards counting too much":
    // the minutes between the last check and the close are made up by no later check.
    const statePath = join(mkdtempSync(join(tmpdir(), 'voxmux-budget-')), 'budget.json');
    const first = setup({ statePath, webhookUrl: '' });
    first.guard.start();
    first.clock.advance(4 * 60_000); // 4 minutes with 1 GPU held, under one checkIntervalMs (5 min)
    await settle();
    first.guard.close(); // a drain: the server stops (instances close after the guard, still holding the GPU)
    const again = setup({ statePath, webhookUrl: '' }, first.clock);
    again.setGpus(0);
    assert.equal(again.guard.snapshot().gpuMs, 4 * 60_000, 'GPU time accrued before the restart');
    again.guard.close();
  });

  it('counts from zero when the state file is not JSON', async () => {
    const statePath = join(mkdtempSync(join(tmpdir(), 'voxmux-budget-')), 'budget.json');
    writeFileSync(statePath, 'not json');
    const t = setup({ statePath });
    assert.equal(t.guard.snapshot().gpuHours, 0);
  });
});
