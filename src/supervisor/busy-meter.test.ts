import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../test/support/fake-clock.js';
import { createBusyMeter } from './busy-meter.js';

describe('BusyMeter', () => {
  it('counts the time a key had work running, the open interval included', () => {
    const clock = new FakeClock();
    const meter = createBusyMeter(clock);
    assert.equal(meter.busyMs('a'), 0);
    meter.begin('a');
    clock.advance(100);
    assert.equal(meter.busyMs('a'), 100);
    meter.end('a');
    clock.advance(50);
    assert.equal(meter.busyMs('a'), 100);
  });

  it('counts overlapping work on one key once, and keys apart', () => {
    const clock = new FakeClock();
    const meter = createBusyMeter(clock);
    meter.begin('gpu');
    meter.begin('x');
    clock.advance(10);
    meter.begin('gpu');
    clock.advance(30);
    meter.end('gpu');
    clock.advance(20);
    meter.end('gpu');
    meter.end('x');
    assert.equal(meter.busyMs('gpu'), 60);
    assert.equal(meter.busyMs('x'), 60);
    assert.equal(meter.busyMs('y'), 0);
  });

  it('ignores an end without a begin', () => {
    const clock = new FakeClock();
    const meter = createBusyMeter(clock);
    meter.end('a');
    meter.begin('a');
    clock.advance(5);
    meter.end('a');
    assert.equal(meter.busyMs('a'), 5);
  });
});
