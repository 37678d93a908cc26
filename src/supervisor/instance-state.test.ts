import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { INSTANCE_STATES, canTransition, type InstanceState } from './instance-state.js';

/** The lifecycle the supervisor documents, written out pair by pair. */
const LEGAL: readonly [InstanceState, InstanceState][] = [
  ['spawning', 'handshaking'],
  ['handshaking', 'loading'],
  ['loading', 'warming'],
  ['warming', 'ready'],
  ['ready', 'draining'],
  ['draining', 'ready'],
  ['draining', 'closed'],
  ['ready', 'closed'],
  // An instance may be closed before it is ready (a close during startup).
  ['spawning', 'closed'],
  ['handshaking', 'closed'],
  ['loading', 'closed'],
  ['warming', 'closed'],
  // Any live state may crash.
  ['spawning', 'crashed'],
  ['handshaking', 'crashed'],
  ['loading', 'crashed'],
  ['warming', 'crashed'],
  ['ready', 'crashed'],
  ['draining', 'crashed'],
];

const isLegal = (from: InstanceState, to: InstanceState) => LEGAL.some(([f, t]) => f === from && t === to);

describe('canTransition', () => {
  it('allows the documented transitions', () => {
    for (const [from, to] of LEGAL) assert.equal(canTransition(from, to), true, `${from} → ${to}`);
  });

  it('refuses every other pair of states, self-transitions included', () => {
    let refused = 0;
    for (const from of INSTANCE_STATES) {
      for (const to of INSTANCE_STATES) {
        if (isLegal(from, to)) continue;
        assert.equal(canTransition(from, to), false, `${from} → ${to}`);
        refused += 1;
      }
    }
    assert.equal(refused, INSTANCE_STATES.length ** 2 - LEGAL.length);
  });

  it('never skips a startup step on the way to ready', () => {
    for (const from of ['spawning', 'handshaking', 'loading'] as const) assert.equal(canTransition(from, 'ready'), false, from);
    assert.equal(canTransition('spawning', 'loading'), false);
  });

  it('treats closed and crashed as final', () => {
    for (const to of INSTANCE_STATES) {
      assert.equal(canTransition('closed', to), false, `closed → ${to}`);
      assert.equal(canTransition('crashed', to), false, `crashed → ${to}`);
    }
  });
});
