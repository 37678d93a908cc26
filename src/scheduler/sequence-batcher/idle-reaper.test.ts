import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isExpired, nextExpiryMs } from './idle-reaper.js';

describe('idle reaper', () => {
  it('expires an idle session idleTimeoutMs after its last activity, never a busy one', () => {
    assert.equal(isExpired({ lastActivityMs: 100, isIdle: true }, 1099, 1000), false);
    assert.equal(isExpired({ lastActivityMs: 100, isIdle: true }, 1100, 1000), true);
    assert.equal(isExpired({ lastActivityMs: 100, isIdle: false }, 9999, 1000), false);
  });

  it('finds the earliest expiry among idle sessions', () => {
    const sessions = [
      { lastActivityMs: 50, isIdle: false },
      { lastActivityMs: 300, isIdle: true },
      { lastActivityMs: 200, isIdle: true },
    ];
    assert.equal(nextExpiryMs(sessions, 1000), 1200);
    assert.equal(nextExpiryMs([{ lastActivityMs: 0, isIdle: false }], 1000), undefined);
  });
});
