/**
 * The limits a rate_limits.updated event reports, which OpenAI sends after each response.done.
 * The one limit a voxmux response spends is the LLM's daily budget (realtime.llm.dailyBudgetUsd,
 * server-wide, as OpenAI's limits are the organisation's): it is reported as `requests`, the LLM
 * turns the day's budget pays for at the average cost per turn so far (the turns made today plus
 * those left, the number GET /admin/llm gives), resetting at the next UTC midnight. voxmux has no
 * token limit, so no `tokens` entry is reported; without a budget, or before any LLM turn was
 * priced, no limit is known and the list is empty.
 */
import type { RealtimeRateLimit } from '../../api/realtime.js';
import type { LlmGateSnapshot } from './llm-gate.js';

export function toRateLimits(snapshot: LlmGateSnapshot): RealtimeRateLimit[] {
  if (snapshot.turnsRemaining === null) return [];
  return [
    {
      name: 'requests',
      limit: snapshot.turnsToday + snapshot.turnsRemaining,
      remaining: snapshot.turnsRemaining,
      reset_seconds: Math.round(snapshot.resetInMs) / 1000,
    },
  ];
}
