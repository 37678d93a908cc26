/**
 * What decides whether a turn may call the LLM: the block switch (config, and the admin endpoint
 * at runtime) and the daily budget, spent from each turn's priced token usage. A UTC day starts a
 * fresh budget. The remaining budget is read as a number of turns, at the average cost of the
 * turns priced so far.
 */
import type { Clock } from '../../core/clock.js';
import type { ChatUsage } from './chat-responder.js';

export interface LlmGateOptions {
  isBlocked: boolean;
  /** Daily LLM spend limit, in US dollars; 0: no limit. */
  dailyBudgetUsd: number;
  /** Price of input (prompt) tokens, in US dollars per million. */
  inputUsdPerMillionTokens: number;
  /** Price of output (completion) tokens, in US dollars per million. */
  outputUsdPerMillionTokens: number;
}

export type LlmAdmission = 'allowed' | 'blocked' | 'budget_exhausted';

export interface LlmGateSnapshot {
  isBlocked: boolean;
  dailyBudgetUsd: number;
  spentTodayUsd: number;
  turnsToday: number;
  /** Turns the rest of today's budget pays for at the average cost per turn; null with no limit or no priced turn yet. */
  turnsRemaining: number | null;
  /** Time until the next UTC day starts a fresh budget, in milliseconds. */
  resetInMs: number;
}

export interface LlmGate {
  admit(): LlmAdmission;
  setBlocked(isBlocked: boolean): void;
  /** Prices one turn's usage, adds it to today's spend, and returns its cost in US dollars. */
  record(usage: ChatUsage): number;
  snapshot(): LlmGateSnapshot;
}

const DAY_MS = 86_400_000;

export function priceUsage(
  usage: ChatUsage,
  options: Pick<LlmGateOptions, 'inputUsdPerMillionTokens' | 'outputUsdPerMillionTokens'>,
): number {
  return (usage.inputTokens * options.inputUsdPerMillionTokens + usage.outputTokens * options.outputUsdPerMillionTokens) / 1e6;
}

export function createLlmGate(options: LlmGateOptions, deps: { clock: Clock }): LlmGate {
  let isBlocked = options.isBlocked;
  let day = Math.floor(deps.clock.wallMs() / DAY_MS);
  let spentTodayUsd = 0;
  let turnsToday = 0;
  let spentAllUsd = 0;
  let turnsAll = 0;
  const roll = () => {
    const today = Math.floor(deps.clock.wallMs() / DAY_MS);
    if (today === day) return;
    day = today;
    spentTodayUsd = 0;
    turnsToday = 0;
  };
  const snapshot = (): LlmGateSnapshot => {
    roll();
    const averageUsd = turnsAll === 0 ? 0 : spentAllUsd / turnsAll;
    const leftUsd = Math.max(0, options.dailyBudgetUsd - spentTodayUsd);
    const turnsRemaining = options.dailyBudgetUsd === 0 || averageUsd === 0 ? null : Math.floor(leftUsd / averageUsd);
    const resetInMs = DAY_MS - (deps.clock.wallMs() % DAY_MS);
    return { isBlocked, dailyBudgetUsd: options.dailyBudgetUsd, spentTodayUsd, turnsToday, turnsRemaining, resetInMs };
  };
  return {
    admit() {
      roll();
      if (isBlocked) return 'blocked';
      if (options.dailyBudgetUsd > 0 && spentTodayUsd >= options.dailyBudgetUsd) return 'budget_exhausted';
      return 'allowed';
    },
    setBlocked(value) {
      isBlocked = value;
    },
    record(usage) {
      roll();
      const costUsd = priceUsage(usage, options);
      spentTodayUsd += costUsd;
      spentAllUsd += costUsd;
      turnsToday += 1;
      turnsAll += 1;
      return costUsd;
    },
    snapshot,
  };
}
