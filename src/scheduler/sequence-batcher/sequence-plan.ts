/**
 * The sequence batching decision (pure): which sessions' next items run now, and where.
 *
 * Only a session's head item is eligible, and only while none of its items runs, so items of a
 * session never overtake each other and never share a batch. A head goes to the instance that
 * holds its session's state when that instance is ready (affinity); otherwise, like a new
 * session, to the instance with the fewest bound sessions, then the fewest running items. Each
 * instance's heads then form batches by the model's BatchPolicy (decideBatch), as long as the
 * instance has room for another running batch.
 */
import { decideBatch, type BatchPolicy, type QueuedItem } from '../dynamic-batcher.js';

export interface SequenceHead extends QueuedItem {
  /** The ready-or-not instance that holds the session's state, if any. */
  boundInstanceId: string | undefined;
}

export interface SequenceCandidate {
  instanceId: string;
  boundSessions: number;
  runningBatches: number;
  runningRequests: number;
}

export interface SequencePlan<T> {
  dispatches: { instanceId: string; items: T[] }[];
  /** When to decide again if nothing else happens first. */
  wakeAtMs: number | undefined;
}

/** `heads` must be ordered by priority (0 first), then by arrival. */
export function planSequenceDispatch<T extends SequenceHead>(
  heads: readonly T[],
  candidates: readonly SequenceCandidate[],
  options: { policy: BatchPolicy; nowMs: number; maxRunningBatchesPerInstance: number },
): SequencePlan<T> {
  const plan: SequencePlan<T> = { dispatches: [], wakeAtMs: undefined };
  if (heads.length === 0 || candidates.length === 0) return plan;
  const loads = new Map(candidates.map((c) => [c.instanceId, { ...c }]));
  const groups = new Map<string, T[]>();
  for (const head of heads) {
    let target = head.boundInstanceId === undefined ? undefined : loads.get(head.boundInstanceId);
    if (target === undefined) {
      target = leastLoaded(loads.values());
      target.boundSessions += 1; // the session will be bound there; spread the next ones
    }
    const group = groups.get(target.instanceId) ?? [];
    group.push(head);
    groups.set(target.instanceId, group);
  }
  for (const [instanceId, group] of groups) {
    const load = loads.get(instanceId)!;
    let rest = group;
    while (rest.length > 0 && load.runningBatches < options.maxRunningBatchesPerInstance) {
      const decision = decideBatch(rest, options.policy, options.nowMs, load.runningBatches === 0);
      if (decision.kind === 'idle') break;
      if (decision.kind === 'wait') {
        plan.wakeAtMs = Math.min(plan.wakeAtMs ?? Infinity, decision.untilMs);
        break;
      }
      plan.dispatches.push({ instanceId, items: decision.items });
      load.runningBatches += 1;
      load.runningRequests += decision.items.length;
      const taken = new Set(decision.items);
      rest = rest.filter((h) => !taken.has(h));
    }
  }
  return plan;
}

function leastLoaded(candidates: Iterable<SequenceCandidate>): SequenceCandidate {
  let best: SequenceCandidate | undefined;
  for (const c of candidates) {
    if (
      best === undefined ||
      c.boundSessions < best.boundSessions ||
      (c.boundSessions === best.boundSessions && c.runningRequests < best.runningRequests)
    ) {
      best = c;
    }
  }
  return best!;
}
