/** Public surface of ops: the budget guard (GPU hours, spend and uptime against configured limits). */
export { createBudgetGuard } from './budget-guard.js';
export type { BudgetGuardDeps, BudgetGuardOptions, BudgetGuard, BudgetSnapshot, BudgetWebhookBody } from './budget-guard.js';
export { accrue, decideAlerts, emptyLedger, gpuHoursOf, spendUsd, uptimeHoursOf, ALERT_PERCENTS, BUDGET_GUARDS } from './budget.js';
export type { BudgetAlert, BudgetGuardName, BudgetLedger, BudgetPolicy } from './budget.js';
