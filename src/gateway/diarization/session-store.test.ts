import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fake-clock.js';
import { DiarizationSessionStore, type DiarizationSession } from './session-store.js';

function setup() {
  const clock = new FakeClock();
  const expired: string[] = [];
  const store = new DiarizationSessionStore({ clock, onExpired: (s) => expired.push(s.id) });
  const open = (id: string, idleTimeoutMs = 1000) => store.create({ id, model: 'm', bounds: {}, idleTimeoutMs });
  return { clock, expired, store, open };
}

const codeOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return (err as { code: string }).code;
  }
  return undefined;
};

describe('DiarizationSessionStore (#17)', () => {
  it('expires each idle session at its own timeout on the clock, and remembers the id as expired', () => {
    const { clock, expired, store, open } = setup();
    open('a', 1000);
    open('b', 3000);
    clock.advance(999);
    assert.deepEqual(expired, []);
    clock.advance(1);
    assert.deepEqual(expired, ['a']);
    assert.equal(
      codeOf(() => store.get('a')),
      'session_expired',
    );
    assert.equal(store.get('b').id, 'b');
    clock.advance(2000);
    assert.deepEqual(expired, ['a', 'b']);
    assert.equal(
      codeOf(() => store.get('never')),
      'session_not_found',
    );
  });

  it('restarts the idle time on touch, and never expires a session while a chunk runs', () => {
    const { clock, expired, store, open } = setup();
    const session: DiarizationSession = open('a', 1000);
    clock.advance(800);
    store.touch(session);
    clock.advance(800);
    assert.deepEqual(expired, []);
    session.running.set(0, new Promise(() => undefined));
    clock.advance(5000);
    assert.deepEqual(expired, [], 'running');
    session.running.delete(0);
    store.touch(session);
    clock.advance(1000);
    assert.deepEqual(expired, ['a']);
  });

  it('expires exactly the due sessions among many, in the order they went idle, past running and closed ones', () => {
    const { clock, expired, store, open } = setup();
    const sessions = Array.from({ length: 1000 }, (_, i) => open(`s${i}`, i % 2 === 0 ? 1000 : 1500));
    clock.advance(500);
    // Touched later: these go idle 500 ms after the rest.
    for (const i of [0, 1, 998, 999]) store.touch(sessions[i]!);
    // A chunk running on the oldest session keeps it (and only it) past its timeout.
    sessions[2]!.running.set(0, new Promise(() => undefined));
    store.delete(sessions[4]!);
    clock.advance(500);
    const evenDue = sessions.filter((_, i) => i % 2 === 0 && ![0, 2, 4, 998].includes(i)).map((s) => s.id);
    assert.deepEqual(expired, evenDue, 'the 1000 ms sessions not touched, running or deleted');
    clock.advance(500);
    const oddDue = sessions.filter((_, i) => i % 2 === 1 && ![1, 999].includes(i)).map((s) => s.id);
    assert.deepEqual(expired, [...evenDue, 's0', 's998', ...oddDue]);
    assert.equal(store.size, 3, 's1, s999 (1500 ms from their touch) and the running s2');
    sessions[2]!.running.delete(0);
    store.touch(sessions[2]!);
    clock.advance(500);
    assert.deepEqual(expired.slice(-2), ['s1', 's999'], '1500 ms after their touch');
    assert.equal(store.size, 1);
    clock.advance(500);
    assert.deepEqual(expired.slice(-1), ['s2'], '1000 ms after its chunk ended');
    assert.equal(store.size, 0);
  });

  it('refuses a duplicate id, frees an id once deleted, and lets an expired id be opened again', () => {
    const { clock, store, open } = setup();
    const a = open('a');
    assert.equal(
      codeOf(() => open('a')),
      'session_already_exists',
    );
    store.delete(a);
    assert.equal(
      codeOf(() => store.get('a')),
      'session_not_found',
    );
    open('b', 10);
    clock.advance(10);
    assert.equal(
      codeOf(() => store.get('b')),
      'session_expired',
    );
    assert.equal(open('b').id, 'b');
    store.close();
  });
});
