/**
 * Budget accounting (pure). What is accrued:
 * - GPU hours: for each GPU, the hours during which at least one instance of this server held it
 *   (an instance holds its GPU from its spawn until it ends, whatever its state). A server with
 *   instances on two GPUs accrues two GPU hours an hour. Kept per calendar month, UTC.
 * - Spend: the month's GPU hours times the configured GPU-hour price.
 * - Uptime: the hours of the day (UTC) during which at least one GPU was held.
 *
 * Accrual is sampled: between two checks, the larger of the GPU counts seen at either end is
 * taken as held throughout, so a guard errs towards counting too much, never too little.
 */
export const BUDGET_GUARDS = ['monthly_spend', 'daily_uptime'] as const;
export type BudgetGuardName = (typeof BUDGET_GUARDS)[number];
export const ALERT_PERCENTS = [80, 100] as const;

export interface BudgetPolicy {
  gpuHourPriceUsd: number;
  /** 0: the monthly guard is off. */
  monthlyBudgetUsd: number;
  /** 0: the daily guard is off. */
  dailyUptimeLimitHours: number;
}

/** What is accrued, and the periods it belongs to. This is what the state file keeps. */
export interface BudgetLedger {
  /** Calendar month, UTC: YYYY-MM. */
  month: string;
  /** GPU time accrued this month, in milliseconds (whole milliseconds, so that sums are exact). */
  gpuMs: number;
  /** Day, UTC: YYYY-MM-DD. */
  day: string;
  /** Uptime accrued this day, in milliseconds. */
  uptimeMs: number;
}

export interface BudgetAlert {
  guard: BudgetGuardName;
  percent: (typeof ALERT_PERCENTS)[number];
  /** How much of the guard's limit is used, in percent. */
  usedPercent: number;
  /** The period the alert belongs to (the month or the day): it fires once per period. */
  period: string;
}

const HOUR_MS = 3_600_000;

const monthOf = (wallMs: number) => new Date(wallMs).toISOString().slice(0, 7);
const dayOf = (wallMs: number) => new Date(wallMs).toISOString().slice(0, 10);
const monthStartMs = (wallMs: number) => {
  const d = new Date(wallMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
};
const dayStartMs = (wallMs: number) => {
  const d = new Date(wallMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
};

export function emptyLedger(wallMs: number): BudgetLedger {
  return { month: monthOf(wallMs), gpuMs: 0, day: dayOf(wallMs), uptimeMs: 0 };
}

/**
 * Adds the interval [fromWallMs, toWallMs] with `gpusHeld` GPUs held to the ledger. The part of an
 * interval before the start of a new month or day belongs to the old period, which is dropped.
 */
export function accrue(ledger: BudgetLedger, sample: { fromWallMs: number; toWallMs: number; gpusHeld: number }): BudgetLedger {
  const { toWallMs, gpusHeld } = sample;
  const fromWallMs = Math.min(sample.fromWallMs, toWallMs);
  const month = monthOf(toWallMs);
  const day = dayOf(toWallMs);
  const monthMs = toWallMs - Math.max(fromWallMs, monthStartMs(toWallMs));
  const dayMs = toWallMs - Math.max(fromWallMs, dayStartMs(toWallMs));
  return {
    month,
    gpuMs: (ledger.month === month ? ledger.gpuMs : 0) + Math.round(gpusHeld * monthMs),
    day,
    uptimeMs: (ledger.day === day ? ledger.uptimeMs : 0) + (gpusHeld > 0 ? Math.round(dayMs) : 0),
  };
}

export const gpuHoursOf = (ledger: BudgetLedger) => ledger.gpuMs / HOUR_MS;
export const uptimeHoursOf = (ledger: BudgetLedger) => ledger.uptimeMs / HOUR_MS;

export function spendUsd(ledger: BudgetLedger, policy: BudgetPolicy): number {
  return (ledger.gpuMs * policy.gpuHourPriceUsd) / HOUR_MS;
}

/** How much of each enabled guard's limit is used, in percent. */
export function usedPercents(ledger: BudgetLedger, policy: BudgetPolicy): Partial<Record<BudgetGuardName, number>> {
  const out: Partial<Record<BudgetGuardName, number>> = {};
  if (policy.monthlyBudgetUsd > 0) out.monthly_spend = (100 * spendUsd(ledger, policy)) / policy.monthlyBudgetUsd;
  if (policy.dailyUptimeLimitHours > 0) out.daily_uptime = (100 * ledger.uptimeMs) / (policy.dailyUptimeLimitHours * HOUR_MS);
  return out;
}

/** Every threshold the ledger is at or over; the caller fires those it has not fired yet (alertKey). */
export function decideAlerts(ledger: BudgetLedger, policy: BudgetPolicy): BudgetAlert[] {
  const out: BudgetAlert[] = [];
  for (const [guard, usedPercent] of Object.entries(usedPercents(ledger, policy)) as [BudgetGuardName, number][]) {
    for (const percent of ALERT_PERCENTS) {
      if (usedPercent >= percent) out.push({ guard, percent, usedPercent, period: guard === 'monthly_spend' ? ledger.month : ledger.day });
    }
  }
  return out;
}

export const alertKey = (a: BudgetAlert) => `${a.guard}:${a.percent}:${a.period}`;

/** The first guard at or over 100 %, or undefined. */
export function exhaustedGuard(ledger: BudgetLedger, policy: BudgetPolicy): BudgetGuardName | undefined {
  return decideAlerts(ledger, policy).find((a) => a.percent === 100)?.guard;
}
