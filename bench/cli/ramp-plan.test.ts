import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isBenchError } from './bench-error.js';
import { estimateRunMs, parseLevelList, parseSlo, planSteps } from './ramp-plan.js';

const concurrency = { flag: '--concurrency', isInteger: true, max: 10_000 };
const rate = { flag: '--rate', isInteger: false, max: 100_000 };

function usageMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(isBenchError(err), 'expected a BenchError');
    assert.equal(err.code, 'usage');
    return err.message;
  }
  assert.fail('expected a usage error');
}

describe('parseLevelList', () => {
  it('parses explicit lists, ranges, stepped ranges and geometric ranges', () => {
    assert.deepEqual(parseLevelList('1,2,4,8', concurrency), [1, 2, 4, 8]);
    assert.deepEqual(parseLevelList('1-5', concurrency), [1, 2, 3, 4, 5]);
    assert.deepEqual(parseLevelList('10-40:10', concurrency), [10, 20, 30, 40]);
    assert.deepEqual(parseLevelList('1-64x2', concurrency), [1, 2, 4, 8, 16, 32, 64]);
    assert.deepEqual(parseLevelList('1, 2 ,3-4', concurrency), [1, 2, 3, 4]);
  });

  it('continues a doubling progression after ... and ends on the given value', () => {
    assert.deepEqual(parseLevelList('1,2,4,...,100', concurrency), [1, 2, 4, 8, 16, 32, 64, 100]);
    assert.deepEqual(parseLevelList('1,2,...,64', concurrency), [1, 2, 4, 8, 16, 32, 64]);
  });

  it('continues an arithmetic progression after ... when the values say so', () => {
    assert.deepEqual(parseLevelList('10,20,30,...,60', concurrency), [10, 20, 30, 40, 50, 60]);
    assert.deepEqual(parseLevelList('10,15,...,30', concurrency), [10, 15, 20, 25, 30]);
  });

  it('accepts fractional rates but not fractional concurrency', () => {
    assert.deepEqual(parseLevelList('0.5,1.5,2', rate), [0.5, 1.5, 2]);
    assert.match(
      usageMessage(() => parseLevelList('1.5', concurrency)),
      /Expected each --concurrency value to be an integer from 1 to 10000: got '1.5'/,
    );
  });

  it('rejects zero, values above the limit, duplicates, garbage and empty lists', () => {
    assert.match(
      usageMessage(() => parseLevelList('0,1', concurrency)),
      /got 0/,
    );
    assert.match(
      usageMessage(() => parseLevelList('20000', concurrency)),
      /from 1 to 10000/,
    );
    assert.match(
      usageMessage(() => parseLevelList('1,2,2', concurrency)),
      /2 appears twice/,
    );
    assert.match(
      usageMessage(() => parseLevelList('abc', concurrency)),
      /got 'abc'/,
    );
    assert.match(
      usageMessage(() => parseLevelList(' , ', concurrency)),
      /at least one value/,
    );
    assert.match(
      usageMessage(() => parseLevelList('8-4', concurrency)),
      /increasing/,
    );
    assert.match(
      usageMessage(() => parseLevelList('1,...,8', concurrency)),
      /two values before/,
    );
    assert.match(
      usageMessage(() => parseLevelList('1-100x1', concurrency)),
      /factor/,
    );
  });

  it('refuses lists longer than the safety limit', () => {
    assert.match(
      usageMessage(() => parseLevelList('1-500', concurrency)),
      /at most 200 values/,
    );
  });
});

describe('parseSlo', () => {
  it('parses a latency clause in ms and adds the default error bound', () => {
    assert.deepEqual(parseSlo('p95<=1000ms'), [
      { metric: 'p95', op: '<=', threshold: 1000, text: 'p95<=1000ms' },
      { metric: 'error_rate', op: '<=', threshold: 0.01, text: 'errors<=1%' },
    ]);
  });

  it('parses seconds, strict bounds, ttfb metrics and an explicit error rate', () => {
    const clauses = parseSlo('p99<2s, ttfb_p95<=300, errors<=0.5%');
    assert.deepEqual(
      clauses.map((c) => [c.metric, c.op, c.threshold, c.text]),
      [
        ['p99', '<', 2000, 'p99<2000ms'],
        ['ttfb_p95', '<=', 300, 'ttfb_p95<=300ms'],
        ['error_rate', '<=', 0.005, 'errors<=0.5%'],
      ],
    );
  });

  it('rejects unknown metrics, wrong units and malformed clauses', () => {
    assert.match(
      usageMessage(() => parseSlo('p42<=10ms')),
      /SLO metric/,
    );
    assert.match(
      usageMessage(() => parseSlo('errors<=10ms')),
      /error rate in %/,
    );
    assert.match(
      usageMessage(() => parseSlo('p95<=5%')),
      /latency in ms or s/,
    );
    assert.match(
      usageMessage(() => parseSlo('p95 = 10')),
      /SLO clause such as/,
    );
    assert.match(
      usageMessage(() => parseSlo('errors<=150%')),
      /at most 100 %/,
    );
  });
});

describe('planSteps', () => {
  it('runs each level reps times back to back, in the given order', () => {
    const steps = planSteps({ mode: 'closed', levels: [4, 1], reps: 2, durationMs: 1000, warmupMs: 0 });
    assert.deepEqual(
      steps.map((s) => [s.index, s.levelIndex, s.level, s.rep]),
      [
        [0, 0, 4, 1],
        [1, 0, 4, 2],
        [2, 1, 1, 1],
        [3, 1, 1, 2],
      ],
    );
  });

  it('estimates the run length from levels, reps, window and warmup', () => {
    assert.equal(estimateRunMs({ mode: 'open', levels: [1, 2, 3], reps: 2, durationMs: 1000, warmupMs: 500 }), 9000);
  });
});
