import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeCost, isInWindow, simulateOnDemand, summarizeTrace, type CostCall, type CostOptions } from './cost-model.js';

const MINUTE_MS = 60_000;
/** Monday 30 November 2026, 00:00 UTC. */
const MONDAY_MS = Date.UTC(2026, 10, 30);
const at = (day: number, hour: number, minute: number) => MONDAY_MS + ((day * 24 + hour) * 60 + minute) * MINUTE_MS;

/**
 * A business-hours week: Monday to Friday, in each working hour but lunch (9, 10, 11, 13, 14, 15,
 * 16, 17) calls at :00, :05 and :10 (30 s transcriptions) and :20 (60 s of speech); evenings: a
 * speech call on Monday 20:00, Wednesday 22:30 and Sunday 19:00 (so the log spans the weekend).
 */
function businessWeek(): CostCall[] {
  const calls: CostCall[] = [];
  for (let day = 0; day < 5; day += 1) {
    for (const hour of [9, 10, 11, 13, 14, 15, 16, 17]) {
      for (const minute of [0, 5, 10])
        calls.push({ arrivalMs: at(day, hour, minute), durationMs: 0, kind: 'transcription', audioInSeconds: 30, audioOutSeconds: 0 });
      calls.push({ arrivalMs: at(day, hour, 20), durationMs: 0, kind: 'speech', audioInSeconds: 0, audioOutSeconds: 60 });
    }
  }
  for (const [day, hour, minute] of [
    [0, 20, 0],
    [2, 22, 30],
    [6, 19, 0],
  ] as const) {
    calls.push({ arrivalMs: at(day, hour, minute), durationMs: 0, kind: 'speech', audioInSeconds: 0, audioOutSeconds: 60 });
  }
  return calls;
}

const OPTIONS: CostOptions = {
  gpuHourUsd: 2.5,
  gpus: 1,
  coldStartS: 60,
  idleStopMin: [30, 60],
  hoursPerDay: 16,
  dayStartMin: 6 * 60,
  tzOffsetMin: 0,
};

/** Calls at these arrivals that take no time. */
const instant = (arrivalsMs: readonly number[]) => arrivalsMs.map((arrivalMs) => ({ arrivalMs, durationMs: 0 }));
const close = (actual: number | null, expected: number, what: string) =>
  assert.ok(actual !== null && Math.abs(actual - expected) < 1e-9 * Math.max(1, Math.abs(expected)), `${what}: ${actual} vs ${expected}`);

describe('voxmux cost on a business-hours trace (#20)', () => {
  const report = computeCost(businessWeek(), OPTIONS);
  const [alwaysOn, fixed, idle30, idle60] = report.modes;

  // The hand computation. The trace: 5 days x 8 hours x 4 calls + 3 evening calls.
  const calls = 5 * 8 * 4 + 3; // 163
  const spanDays = 7; // Monday to Sunday
  const monthScale = 30 / 7;
  const audioHours = (5 * 8 * 3 * 30 + (5 * 8 + 3) * 60) / 3600; // 120 transcriptions of 30 s, 43 speech calls of 60 s
  const callMinutes = 5 * 8 + 3; // 43 speech calls of one minute

  it('summarizes the trace: 163 calls over 7 whole days, 1.72 audio hours, 43 call minutes', () => {
    assert.deepEqual(
      { ...report.trace, audioHours: undefined },
      { calls, spanDays, spanStartMs: MONDAY_MS, audioHours: undefined, callMinutes },
    );
    close(report.trace.audioHours, audioHours, 'audio hours');
  });

  it('always on: 24 h a day, 720 GPU-hours a month at $2.50', () => {
    close(alwaysOn!.uptimeHoursPerDay, 24, 'uptime');
    close(alwaysOn!.monthlyCostUsd, 30 * 24 * 2.5, 'monthly'); // $1800
    assert.equal(alwaysOn!.waitedCalls, 0);
    close(alwaysOn!.costPerCallUsd, (30 * 24 * 2.5) / (calls * monthScale), 'per call');
  });

  it('16 hours from 06:00: 480 GPU-hours a month; the 22:30 call is off hours', () => {
    close(fixed!.uptimeHoursPerDay, 16, 'uptime');
    close(fixed!.monthlyCostUsd, 30 * 16 * 2.5, 'monthly'); // $1200
    assert.equal(fixed!.waitedCalls, 1);
  });

  it('on demand with a 30-minute idle stop: up 50 minutes of each busy hour and 31 minutes per evening call', () => {
    // Each busy hour: woken at :00, ready at :01, the :20 call keeps it until :50.
    // Each evening call: woken, ready a minute later, stopped 30 minutes after that.
    const uptimeMin = 5 * 8 * 50 + 3 * (1 + 30); // 2000 + 93 = 2093 minutes in the week
    const monthlyUsd = (uptimeMin / 60) * monthScale * 2.5; // 149.5 GPU-hours: $373.75
    close(idle30!.uptimeHoursPerDay, uptimeMin / 60 / 7, 'uptime');
    close(idle30!.monthlyGpuHours, 149.5, 'GPU-hours');
    close(idle30!.monthlyCostUsd, monthlyUsd, 'monthly');
    close(idle30!.monthlyCostUsd, 373.75, 'monthly');
    // The :00 call of every busy hour and each evening call wait the whole cold start.
    assert.equal(idle30!.waitedCalls, 5 * 8 + 3);
    close(idle30!.meanWaitS, 60, 'mean wait');
    close(idle30!.maxWaitS, 60, 'max wait');
    close(idle30!.costPerCallUsd, monthlyUsd / (calls * monthScale), 'per call');
    close(idle30!.costPerAudioHourUsd, monthlyUsd / (audioHours * monthScale), 'per audio hour');
    close(idle30!.costPerCallMinuteUsd, monthlyUsd / (callMinutes * monthScale), 'per call minute');
    // The acceptance bound: at most a quarter of always on (here 0.21).
    assert.ok(idle30!.monthlyCostUsd <= alwaysOn!.monthlyCostUsd / 4, `${idle30!.monthlyCostUsd} vs ${alwaysOn!.monthlyCostUsd}`);
  });

  it('on demand with a 60-minute idle stop: the mornings and afternoons each stay up in one piece', () => {
    // 09:00 to 12:20 (11:20 + 60 min) and 13:00 to 18:20; each evening call 1 + 60 minutes.
    const uptimeMin = 5 * (12 * 60 + 20 - 9 * 60 + (18 * 60 + 20 - 13 * 60)) + 3 * (1 + 60); // 2600 + 183 = 2783
    close(idle60!.monthlyCostUsd, (uptimeMin / 60) * monthScale * 2.5, 'monthly');
    assert.equal(idle60!.waitedCalls, 5 * 2 + 3);
  });

  it('scales with --gpus', () => {
    const two = computeCost(businessWeek(), { ...OPTIONS, gpus: 2 });
    close(two.modes[2]!.monthlyCostUsd, 2 * 373.75, 'two GPUs');
  });
});

describe('simulateOnDemand', () => {
  it('makes every call that arrives during a boot wait until it is ready, and bills the boot', () => {
    const run = simulateOnDemand(instant([0, 10_000, 30_000, 200_000]), { coldStartS: 60, idleStopMin: 1 });
    // Woken at 0, ready at 60 s, up until 120 s; woken again at 200 s, up until 320 s.
    assert.deepEqual(run, { uptimeMs: 120_000 + 120_000, wakes: 2, waitsMs: [60_000, 50_000, 30_000, 60_000] });
  });

  it('treats arrivals in any order the same', () => {
    assert.deepEqual(
      simulateOnDemand(instant([200_000, 0, 30_000, 10_000]), { coldStartS: 60, idleStopMin: 1 }),
      simulateOnDemand(instant([0, 10_000, 30_000, 200_000]), { coldStartS: 60, idleStopMin: 1 }),
    );
  });

  it('keeps the node up while a voice call lasts, and stops it the idle time after the call ends', () => {
    // A 20-minute call at 0 (served from 60 s, the boot), an instant call at 10 minutes.
    const run = simulateOnDemand(
      [
        { arrivalMs: 0, durationMs: 20 * 60_000 },
        { arrivalMs: 10 * 60_000, durationMs: 0 },
      ],
      { coldStartS: 60, idleStopMin: 1 },
    );
    assert.deepEqual(run, { uptimeMs: 60_000 + 20 * 60_000 + 60_000, wakes: 1, waitsMs: [60_000] });
  });
});

describe('isInWindow and summarizeTrace', () => {
  it('places the window in local time, across midnight too', () => {
    const window = { dayStartMin: 22 * 60, hoursPerDay: 4, tzOffsetMin: 0 };
    assert.equal(isInWindow(at(0, 23, 0), window), true);
    assert.equal(isInWindow(at(1, 1, 59), window), true);
    assert.equal(isInWindow(at(1, 2, 0), window), false);
    // 07:30 UTC is 09:30 at UTC+2: inside a 09:00 window there, outside it in UTC.
    assert.equal(isInWindow(at(0, 7, 30), { dayStartMin: 9 * 60, hoursPerDay: 8, tzOffsetMin: 120 }), true);
    assert.equal(isInWindow(at(0, 7, 30), { dayStartMin: 9 * 60, hoursPerDay: 8, tzOffsetMin: 0 }), false);
  });

  it('counts whole local days: a call at 23:30 UTC is the next day at UTC+1', () => {
    const calls: CostCall[] = [{ arrivalMs: at(0, 23, 30), durationMs: 0, kind: 'transcription', audioInSeconds: 1, audioOutSeconds: 0 }];
    assert.equal(summarizeTrace(calls, 0).spanStartMs, MONDAY_MS);
    assert.equal(summarizeTrace(calls, 60).spanStartMs, at(1, 0, 0) - 60 * MINUTE_MS);
    assert.equal(summarizeTrace(calls, 60).spanDays, 1);
  });
});
