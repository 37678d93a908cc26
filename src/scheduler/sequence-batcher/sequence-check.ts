/**
 * What to do with a submitted sequence number (pure). Items finish in order, so a session's
 * numbers split into: finished (up to `lastFinished`), pending (queued or running) and
 * `nextSeq` onward.
 *
 * - unknown session: seq 0 creates it; any other number is session_not_found (or expired);
 * - the last finished number: its outcome again, without running (a client's retry);
 * - a pending number: the same promise;
 * - `nextSeq`: accepted (unless the session is ending);
 * - beyond `nextSeq`: sequence_gap naming the missing number;
 * - older than the last finished: sequence_out_of_order.
 */
import type { ItemOutcome, SequenceEntry, Session } from './session-table.js';

export type SequenceCheck =
  | { kind: 'create' }
  | { kind: 'unknown' }
  | { kind: 'accept' }
  | { kind: 'ending' }
  | { kind: 'pending'; entry: SequenceEntry }
  | { kind: 'cached'; outcome: ItemOutcome }
  | { kind: 'gap'; expectedSeq: number }
  | { kind: 'out_of_order'; lastCompletedSeq: number };

export function checkSequenceNumber(session: Session | undefined, seq: number): SequenceCheck {
  if (session === undefined) return seq === 0 ? { kind: 'create' } : { kind: 'unknown' };
  if (session.lastFinished?.seq === seq) return { kind: 'cached', outcome: session.lastFinished.outcome };
  const pending = session.running?.item.seq === seq ? session.running : session.queued.find((e) => e.item.seq === seq);
  if (pending !== undefined && pending.state !== 'done') return { kind: 'pending', entry: pending };
  if (seq === session.nextSeq) return session.isEnding ? { kind: 'ending' } : { kind: 'accept' };
  if (seq > session.nextSeq) return { kind: 'gap', expectedSeq: session.nextSeq };
  return { kind: 'out_of_order', lastCompletedSeq: session.lastFinished?.seq ?? -1 };
}
