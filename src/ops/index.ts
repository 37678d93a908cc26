/** Operations policies: pure decisions from snapshots of the running components (capacity hints, budget guards). */
export { estimateCapacity } from './capacity.js';
export type { CapacityPolicy, LoadSample, ModelCapacity, ModelLoadSample } from './capacity.js';
export { createBudgetGuard } from './budget-guard.js';
export type { BudgetGuardDeps, BudgetGuardOptions, BudgetGuard, BudgetSnapshot, BudgetWebhookBody } from './budget-guard.js';
export { accrue, decideAlerts, emptyLedger, gpuHoursOf, spendUsd, uptimeHoursOf, ALERT_PERCENTS, BUDGET_GUARDS } from './budget.js';
export type { BudgetAlert, BudgetGuardName, BudgetLedger, BudgetPolicy } from './budget.js';
