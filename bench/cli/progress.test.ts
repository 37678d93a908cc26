import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../test/support/fake-clock.js';
import type { StepProgress } from './load-driver.js';
import { createProgressReporter } from './progress.js';
import type { RepResult } from './report.js';

const step = { index: 1, levelIndex: 1, level: 8, rep: 1 };
const rep = {
  rep: 1,
  windowMs: 1000,
  requests: 20,
  ok: 19,
  errors: 1,
  requestsPerSecond: 19,
  latencyMs: { count: 19, mean: 100, p50: 99, p90: 120, p95: 130, p99: 140, max: 150 },
  errorsByCode: { '429 queue_full': 1 },
  warmup: { requests: 0, ok: 0, errorsByCode: {} },
  late: { requests: 0, ok: 0, errorsByCode: {} },
  droppedArrivals: 0,
  client: { cpuPercent: 1, eventLoopDelayP99Ms: 0 },
} satisfies RepResult;

function live(clock: FakeClock) {
  const state: StepProgress = { elapsedMs: 0, issued: 0, completed: 0, ok: 0, errors: 0, inFlight: 8, droppedArrivals: 0 };
  const read = (): StepProgress => ({ ...state, elapsedMs: clock.nowMs() });
  return { state, read };
}

describe('createProgressReporter', () => {
  it('redraws one line in place on a terminal, with the current rate, and clears it at the step end', () => {
    const clock = new FakeClock();
    let out = '';
    const progress = createProgressReporter(
      { isTTY: true, mode: 'closed', totalSteps: 4, reps: 1, stepMs: 2000 },
      { out: { write: (s: string) => (out += s) }, clock },
    );
    const { state, read } = live(clock);
    progress.stepStarted(step, read);
    for (let i = 1; i <= 8; i += 1) {
      state.completed = i * 5;
      state.ok = i * 5;
      clock.advance(250);
    }
    const frames = out.split('\r\x1b[2K').filter((frame) => frame !== '');
    assert.equal(frames.length, 9);
    assert.equal(frames.at(-1), 'step 2/4 concurrency 8 | 2.0/2.0 s | 20.0 req/s | ok 40 err 0 | in flight 8');
    assert.ok(!out.includes('\n'));
    progress.stepFinished(step, rep);
    assert.ok(out.endsWith('\r\x1b[2Kstep 2/4 concurrency 8: 19.00 req/s, p50 99 ms, p95 130 ms, 1 errors (429 queue_full)\n'));
    const before = out.length;
    clock.advance(5000);
    assert.equal(out.length, before, 'no redraw after the step');
  });

  it('prints plain lines when not a terminal: one per step, and one per interval during long steps', () => {
    const clock = new FakeClock();
    const lines: string[] = [];
    const progress = createProgressReporter(
      { isTTY: false, mode: 'open', totalSteps: 6, reps: 2, stepMs: 30_000, plainIntervalMs: 10_000 },
      { out: { write: (s: string) => lines.push(s) }, clock },
    );
    const { read } = live(clock);
    progress.stepStarted(step, read);
    clock.advance(9_999);
    assert.equal(lines.length, 0);
    clock.advance(1);
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /^step 2\/6 rate 8\/s rep 1\/2 \| 10\.0\/30\.0 s \| .*\n$/);
    progress.message('Interrupted');
    progress.stepFinished(step, rep);
    assert.equal(lines[1], 'Interrupted\n');
    assert.match(lines[2]!, /^step 2\/6 rate 8\/s rep 1\/2: 19\.00 req\/s/);
    assert.ok(lines.every((line) => !line.includes('\x1b')));
    progress.close();
  });

  it('adds the first-byte p95 and the stalled calls for played answers (speech)', () => {
    const clock = new FakeClock();
    const lines: string[] = [];
    const progress = createProgressReporter(
      { isTTY: false, mode: 'closed', totalSteps: 1, reps: 1, stepMs: 1000 },
      { out: { write: (s: string) => lines.push(s) }, clock },
    );
    const speech: RepResult = {
      ...rep,
      ttfbMs: { count: 19, mean: 80, p50: 70, p90: 90, p95: 95, p99: 99, max: 99 },
      playback: { calls: 19, callsWithStall: 2, stallShare: 0.1053, stalls: 3, stalledSeconds: 0.4, stalledPerAudioSecond: 0.01 },
    };
    progress.stepFinished(step, speech);
    assert.match(lines[0]!, /p95 130 ms, first byte p95 95 ms, 2 of 19 calls stalled, 1 errors/);
    progress.close();
  });
});
