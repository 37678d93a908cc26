import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../test/support/fake-clock.js';
import { createIdleRelease } from './idle-release.js';

function setup(serving: number) {
  const clock = new FakeClock();
  const calls: { atMs: number; isServing: boolean }[] = [];
  const state = { serving };
  const onIdle = createIdleRelease(1000, {
    clock,
    serving: () => state.serving,
    release: ({ isServing }) => calls.push({ atMs: clock.nowMs(), isServing }),
  });
  return { clock, calls, state, onIdle };
}

describe('createIdleRelease', () => {
  it('releases everything at once when no call is being answered', () => {
    const { clock, calls, onIdle } = setup(0);
    onIdle();
    assert.deepEqual(calls, [{ atMs: 0, isServing: false }]);
    assert.equal(clock.pendingTimers, 0);
  });

  it('trims at once while calls are answered, and collects once none is, checking every retry period', () => {
    const { clock, calls, state, onIdle } = setup(3);
    onIdle();
    clock.advance(2500);
    assert.deepEqual(calls, [{ atMs: 0, isServing: true }]);
    state.serving = 0;
    clock.advance(500);
    assert.deepEqual(calls, [
      { atMs: 0, isServing: true },
      { atMs: 3000, isServing: false },
    ]);
    clock.advance(5000);
    assert.equal(calls.length, 2, 'once');
    assert.equal(clock.pendingTimers, 0);
  });

  it('lets a new idle release replace a wait in progress', () => {
    const { clock, calls, state, onIdle } = setup(1);
    onIdle();
    clock.advance(1500);
    onIdle(); // the next burst's uploads went idle in turn
    state.serving = 0;
    clock.advance(1000);
    assert.deepEqual(calls, [
      { atMs: 0, isServing: true },
      { atMs: 1500, isServing: true },
      { atMs: 2500, isServing: false },
    ]);
    assert.equal(clock.pendingTimers, 0);
  });
});
