import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { batchMs, EMPTY_SERVICE_TIME, observeBatch, serviceTimeModel, type ServiceTimeEstimate } from './service-time.js';

const PRIOR = { perBatchMs: 1000, perAudioSecondMs: 500 };

function observeAll(batches: { audioS: number; durationMs: number }[], start: ServiceTimeEstimate = EMPTY_SERVICE_TIME) {
  return batches.reduce((e, b) => observeBatch(e, b), start);
}

const close = (actual: number, expected: number, tolerance = 1e-6) =>
  assert.ok(Math.abs(actual - expected) <= tolerance, `${actual} is not ${expected}`);

describe('service time estimate', () => {
  it('is the prior before any batch completed', () => {
    assert.deepEqual(serviceTimeModel(EMPTY_SERVICE_TIME, PRIOR), PRIOR);
  });

  it('scales the prior to the measured mean while the audio lengths do not spread', () => {
    const model = serviceTimeModel(observeAll([{ audioS: 2, durationMs: 400 }]), PRIOR);
    close(batchMs(model, 2), 400);
    close(model.perBatchMs / model.perAudioSecondMs, PRIOR.perBatchMs / PRIOR.perAudioSecondMs);
    const same = serviceTimeModel(observeAll(Array.from({ length: 10 }, () => ({ audioS: 2, durationMs: 400 }))), PRIOR);
    close(batchMs(same, 2), 400);
  });

  it('fits the per-batch and per-audio-second parts once the lengths spread', () => {
    const batches = Array.from({ length: 12 }, (_, i) => {
      const audioS = 1 + (i % 4);
      return { audioS, durationMs: 300 + 100 * audioS };
    });
    const model = serviceTimeModel(observeAll(batches), PRIOR);
    close(model.perBatchMs, 300, 1e-6);
    close(model.perAudioSecondMs, 100, 1e-6);
  });

  it('follows a slower instance within a few dozen batches, recent batches weighing most', () => {
    const fast = observeAll(Array.from({ length: 50 }, (_, i) => ({ audioS: 1 + (i % 2), durationMs: 100 + 100 * (1 + (i % 2)) })));
    const slow = observeAll(
      Array.from({ length: 40 }, (_, i) => ({ audioS: 1 + (i % 2), durationMs: 2 * (100 + 100 * (1 + (i % 2))) })),
      fast,
    );
    const model = serviceTimeModel(slow, PRIOR);
    close(batchMs(model, 1.5), 500, 15);
  });

  it('never predicts a negative part: a negative slope or intercept is dropped', () => {
    const falling = serviceTimeModel(
      observeAll([
        { audioS: 1, durationMs: 500 },
        { audioS: 2, durationMs: 400 },
        { audioS: 3, durationMs: 300 },
      ]),
      PRIOR,
    );
    assert.equal(falling.perAudioSecondMs, 0);
    assert.ok(falling.perBatchMs > 0);
    const steep = serviceTimeModel(
      observeAll([
        { audioS: 1, durationMs: 10 },
        { audioS: 2, durationMs: 400 },
        { audioS: 3, durationMs: 800 },
      ]),
      PRIOR,
    );
    assert.equal(steep.perBatchMs, 0);
    assert.ok(steep.perAudioSecondMs > 0);
  });
});
