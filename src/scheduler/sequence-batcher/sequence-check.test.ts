import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkSequenceNumber } from './sequence-check.js';
import type { SequenceEntry, Session } from './session-table.js';

const entry = (seq: number, state: SequenceEntry['state'] = 'queued') => ({ item: { seq }, state }) as SequenceEntry;
const session = (p: Partial<Session>): Session => ({
  sessionId: 's',
  model: 'm',
  nextSeq: 0,
  lastFinished: undefined,
  checkpoint: undefined,
  instanceId: undefined,
  queued: [],
  running: undefined,
  lastActivityMs: 0,
  isEnding: false,
  endWaiters: [],
  ...p,
});

describe('checkSequenceNumber', () => {
  it('creates a session only from seq 0', () => {
    assert.equal(checkSequenceNumber(undefined, 0).kind, 'create');
    assert.equal(checkSequenceNumber(undefined, 3).kind, 'unknown');
  });

  it('classifies each number against finished, pending and next', () => {
    const outcome = { ok: true as const, result: { sessionId: 's', seq: 2, output: {} } };
    const s = session({ nextSeq: 5, lastFinished: { seq: 2, outcome }, running: entry(3, 'running'), queued: [entry(4)] });
    assert.deepEqual(checkSequenceNumber(s, 2), { kind: 'cached', outcome });
    assert.equal(checkSequenceNumber(s, 3).kind, 'pending');
    assert.equal(checkSequenceNumber(s, 4).kind, 'pending');
    assert.equal(checkSequenceNumber(s, 5).kind, 'accept');
    assert.deepEqual(checkSequenceNumber(s, 7), { kind: 'gap', expectedSeq: 5 });
    assert.deepEqual(checkSequenceNumber(s, 1), { kind: 'out_of_order', lastCompletedSeq: 2 });
    assert.equal(checkSequenceNumber({ ...s, isEnding: true }, 5).kind, 'ending');
  });
});
