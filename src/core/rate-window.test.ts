import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RateWindow } from './rate-window.js';

describe('RateWindow', () => {
  it('gives the rate over the last window of readings, none before time has passed', () => {
    const rate = new RateWindow(1000);
    assert.equal(rate.add(0, 0), undefined);
    assert.equal(rate.add(500, 50), 100);
    assert.equal(rate.add(1000, 100), 100);
    // The readings at 0 and 500 ms fall out of the window: the rate is over 1000 → 2000 ms.
    assert.equal(rate.add(2000, 400), 300);
    rate.reset();
    assert.equal(rate.add(3000, 500), undefined);
  });
});
