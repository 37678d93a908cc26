/**
 * The budget guard: a periodic check (every checkIntervalMs on the injected clock) that accrues
 * GPU hours, spend and uptime (budget.ts), exports them as metrics, and at 80 % and 100 % of a
 * guard logs a warning and POSTs the webhook. With hardStop, a guard at 100 % refuses every wake
 * of a stopped model (gpu_budget_exhausted); running models keep serving.
 *
 * Checks are idempotent: each accrues the time since the previous one, so a late or missed check
 * is made up by the next, and close() accrues the time since the last. A wake is judged, and the
 * snapshot given, as of now (the time since the last check included, a new day or month from zero),
 * never as of a check minutes old. An alert fires once per threshold and period (month or day). The ledger
 * is kept in statePath, so a restart keeps counting; the alerts fired are not, so after a restart
 * a threshold that is still over fires once more, and one that is no longer over (a new day or
 * month) does not.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { Clock, TimerHandle } from '../core/clock.js';
import { errors } from '../core/error-catalog.js';
import type { ServiceError } from '../core/errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import {
  accrue,
  alertKey,
  decideAlerts,
  emptyLedger,
  exhaustedGuard,
  gpuHoursOf,
  spendUsd,
  uptimeHoursOf,
  usedPercents,
  type BudgetAlert,
  type BudgetGuardName,
  type BudgetLedger,
  type BudgetPolicy,
} from './budget.js';

export interface BudgetGuardOptions extends BudgetPolicy {
  checkIntervalMs: number;
  /** Empty: no webhook. */
  webhookUrl: string;
  hardStop: boolean;
  /** Empty: the ledger is kept in memory only. */
  statePath: string;
}

export interface BudgetGuardDeps {
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** How many GPUs at least one instance of this server holds now. */
  gpusHeld(): number;
  /** POSTs a JSON body; rejects on a network error or a status other than 2xx. */
  postJson(url: string, body: unknown): Promise<void>;
}

/** The webhook's JSON body. */
export interface BudgetWebhookBody {
  event: 'budget_threshold';
  guard: BudgetGuardName;
  percent: number;
  usedPercent: number;
  period: string;
  gpuHours: number;
  spendUsd: number;
  uptimeHours: number;
  monthlyBudgetUsd: number;
  dailyUptimeLimitHours: number;
  hardStop: boolean;
}

export interface BudgetSnapshot extends BudgetLedger {
  gpuHours: number;
  uptimeHours: number;
  spendUsd: number;
  usedPercent: Partial<Record<BudgetGuardName, number>>;
  exhausted: BudgetGuardName | undefined;
}

export interface BudgetGuard {
  /** Loads the ledger and makes the first check; checks again every checkIntervalMs after. */
  start(): void;
  /** One check now (the timer calls it; idempotent). Resolves once its webhooks were sent. */
  check(): Promise<void>;
  /** The refusal of a wake under the hard stop, or undefined. */
  wakeRefusal(model: string): ServiceError | undefined;
  /** The figures as of now: the last check's ledger plus the time since (what the next check will find). */
  snapshot(): BudgetSnapshot;
  /** Stops checking; a started guard first accrues (and saves) the time since its last check. */
  close(): void;
}

const GUARD_NAMES: Record<BudgetGuardName, string> = { monthly_spend: 'monthly GPU budget', daily_uptime: 'daily uptime limit' };

export function createBudgetGuard(options: BudgetGuardOptions, deps: BudgetGuardDeps): BudgetGuard {
  const { clock, log, metrics } = deps;
  let ledger = load();
  let lastWallMs = clock.wallMs();
  let lastGpus = 0;
  let timer: TimerHandle | undefined;
  let isStarted = false;
  let isClosed = false;
  const fired = new Set<string>();
  for (const guard of ['monthly_spend', 'daily_uptime'])
    for (const percent of ['80', '100']) metrics.budgetAlerts.inc({ guard, percent }, 0);

  function load(): BudgetLedger {
    const fresh = emptyLedger(clock.wallMs());
    if (options.statePath === '') return fresh;
    let text: string;
    try {
      text = readFileSync(options.statePath, 'utf8');
    } catch {
      return fresh; // first start: no state yet
    }
    try {
      const parsed = JSON.parse(text) as Partial<BudgetLedger>;
      if (typeof parsed.month !== 'string' || typeof parsed.gpuMs !== 'number') throw new Error('missing fields');
      if (typeof parsed.day !== 'string' || typeof parsed.uptimeMs !== 'number') throw new Error('missing fields');
      // Accruing nothing up to now drops a month or day that has passed.
      return accrue(parsed as BudgetLedger, { fromWallMs: clock.wallMs(), toWallMs: clock.wallMs(), gpusHeld: 0 });
    } catch (err) {
      log.warn({ path: options.statePath, err }, 'budget state unreadable: counting from zero');
      return fresh;
    }
  }

  function save(): void {
    if (options.statePath === '') return;
    try {
      const tmp = `${options.statePath}.tmp`;
      writeFileSync(tmp, `${JSON.stringify(ledger)}\n`);
      renameSync(tmp, options.statePath);
    } catch (err) {
      log.error({ path: options.statePath, err }, 'budget state not saved');
    }
  }

  function exportMetrics(): void {
    metrics.budgetGpuHours.set(gpuHoursOf(ledger));
    metrics.budgetSpend.set(spendUsd(ledger, options));
    metrics.budgetUptimeHours.set(uptimeHoursOf(ledger));
  }

  function webhookBody(alert: BudgetAlert): BudgetWebhookBody {
    return {
      event: 'budget_threshold',
      guard: alert.guard,
      percent: alert.percent,
      usedPercent: Math.round(alert.usedPercent * 100) / 100,
      period: alert.period,
      gpuHours: gpuHoursOf(ledger),
      spendUsd: spendUsd(ledger, options),
      uptimeHours: uptimeHoursOf(ledger),
      monthlyBudgetUsd: options.monthlyBudgetUsd,
      dailyUptimeLimitHours: options.dailyUptimeLimitHours,
      hardStop: options.hardStop,
    };
  }

  /**
   * The ledger with the time since the last check added (the larger GPU count seen at either end
   * held throughout), as the next check would find it: a new day or month starts from zero.
   */
  function ledgerNow(): { ledger: BudgetLedger; wallMs: number; gpus: number } {
    const wallMs = clock.wallMs();
    const gpus = deps.gpusHeld();
    return { ledger: accrue(ledger, { fromWallMs: lastWallMs, toWallMs: wallMs, gpusHeld: Math.max(gpus, lastGpus) }), wallMs, gpus };
  }

  /** Accrues up to now, exports the figures and saves the ledger. */
  function record(): void {
    const now = ledgerNow();
    ledger = now.ledger;
    lastWallMs = now.wallMs;
    lastGpus = now.gpus;
    exportMetrics();
    save();
  }

  async function check(): Promise<void> {
    record();
    const posts: Promise<void>[] = [];
    for (const alert of decideAlerts(ledger, options)) {
      const key = alertKey(alert);
      if (fired.has(key)) continue;
      fired.add(key);
      metrics.budgetAlerts.inc({ guard: alert.guard, percent: String(alert.percent) });
      const body = webhookBody(alert);
      log.warn({ ...body }, 'budget threshold reached');
      if (options.webhookUrl === '') continue;
      posts.push(
        deps
          .postJson(options.webhookUrl, body)
          .catch((err: unknown) => log.error({ guard: alert.guard, percent: alert.percent, err }, 'budget webhook failed')),
      );
    }
    await Promise.all(posts);
  }

  function arm(): void {
    if (isClosed) return;
    timer = clock.setTimeout(() => {
      void check();
      arm();
    }, options.checkIntervalMs);
  }

  /** Milliseconds until the exhausted guard's period ends (the next UTC day or month). */
  function untilPeriodEndMs(guard: BudgetGuardName): number {
    const now = new Date(clock.wallMs());
    const end =
      guard === 'monthly_spend'
        ? Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)
        : Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
    return Math.max(1000, end - now.getTime());
  }

  return {
    start() {
      isStarted = true;
      lastWallMs = clock.wallMs();
      lastGpus = deps.gpusHeld();
      void check();
      arm();
    },
    check,
    wakeRefusal(model) {
      if (!options.hardStop) return undefined;
      // Judged on the ledger as of now, not as of the last check: a wake just after midnight (UTC) or
      // the first of the month belongs to a new period, and the time since the check counts too.
      const guard = exhaustedGuard(ledgerNow().ledger, options);
      if (guard === undefined) return undefined;
      return errors.gpuBudgetExhausted({ model, guard: GUARD_NAMES[guard], retryAfterMs: untilPeriodEndMs(guard) });
    },
    snapshot() {
      const now = ledgerNow().ledger;
      return {
        ...now,
        gpuHours: gpuHoursOf(now),
        uptimeHours: uptimeHoursOf(now),
        spendUsd: spendUsd(now, options),
        usedPercent: usedPercents(now, options),
        exhausted: exhaustedGuard(now, options),
      };
    },
    close() {
      if (isClosed) return;
      isClosed = true;
      timer?.cancel();
      // The time since the last check is made up by no later check: it is accrued (and saved) now.
      if (isStarted) record();
    },
  };
}
