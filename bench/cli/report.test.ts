import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCsv } from '../../test/support/csv.js';
import type { StepSamples } from './load-driver.js';
import { parseSlo } from './ramp-plan.js';
import {
  CSV_COLUMNS,
  aggregateStep,
  capacityLines,
  checkSlo,
  collectNotes,
  computeCost,
  decideCapacity,
  findPeak,
  formatStepTable,
  gpusForTarget,
  percentile,
  summarizeRep,
  toCsv,
  toLatencyStats,
  toMarkdownSummary,
  toPlaybackStats,
  type BenchResults,
  type StepResult,
} from './report.js';
import type { RequestOutcome } from './workload.js';

const client = { cpuPercent: 10, eventLoopDelayP99Ms: 0.5 };

function samples(outcomes: RequestOutcome[], window: { startMs: number; endMs: number } = { startMs: 0, endMs: 1000 }): StepSamples {
  return {
    startMs: 0,
    windowStartMs: window.startMs,
    windowEndMs: window.endMs,
    endMs: Math.max(window.endMs, ...outcomes.map((o) => o.endMs)),
    outcomes,
    issued: outcomes.length,
    droppedArrivals: 0,
    isInterrupted: false,
  };
}

function ok(startMs: number, endMs: number, extra: Partial<RequestOutcome> = {}): RequestOutcome {
  return { startMs, endMs, status: 200, audioSeconds: 2, ...extra };
}

describe('percentile', () => {
  it('uses the nearest rank', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(values, 0.5), 50);
    assert.equal(percentile(values, 0.95), 95);
    assert.equal(percentile(values, 0.99), 99);
    assert.equal(percentile(values, 1), 100);
    assert.equal(percentile([7], 0.99), 7);
    assert.ok(Number.isNaN(percentile([], 0.5)));
  });

  it('summarizes unsorted values with two-decimal milliseconds', () => {
    assert.deepEqual(toLatencyStats([30, 10, 20.123]), { count: 3, mean: 20.04, p50: 20.12, p90: 30, p95: 30, p99: 30, max: 30 });
    assert.equal(toLatencyStats([]), undefined);
  });
});

describe('summarizeRep', () => {
  it('measures requests finishing in the half-open window (start, end] and counts the rest apart', () => {
    const rep = summarizeRep(
      samples(
        [
          ok(0, 100), // warmup: ends at the window start
          ok(100, 300),
          ok(200, 600, { ttfbMs: 50 }),
          { startMs: 300, endMs: 700, status: 500, errorCode: 'internal_error' },
          { startMs: 300, endMs: 800, status: 502, errorCode: 'http_502' },
          { startMs: 900, endMs: 1000, errorCode: 'ECONNRESET' },
          ok(900, 1100), // late
          { startMs: 950, endMs: 1200, errorCode: 'timeout' }, // late
        ],
        { startMs: 100, endMs: 1100 },
      ),
      { rep: 1, client },
    ).result;
    assert.equal(rep.windowMs, 1000);
    assert.equal(rep.requests, 6);
    assert.equal(rep.ok, 3);
    assert.equal(rep.errors, 3);
    assert.equal(rep.requestsPerSecond, 3);
    assert.equal(rep.audioSecondsPerSecond, 6);
    assert.deepEqual(rep.errorsByCode, { '500 internal_error': 1, ECONNRESET: 1, http_502: 1 });
    assert.deepEqual(rep.warmup, { requests: 1, ok: 1, errorsByCode: {} });
    assert.deepEqual(rep.late, { requests: 1, ok: 0, errorsByCode: { timeout: 1 } });
    assert.deepEqual(rep.latencyMs, { count: 3, mean: 266.67, p50: 200, p90: 400, p95: 400, p99: 400, max: 400 });
    assert.equal(rep.ttfbMs?.p50, 50);
  });

  it('leaves audio seconds per second out when any request has an unknown duration', () => {
    const rep = summarizeRep(samples([ok(0, 100), ok(100, 200, { audioSeconds: undefined })]), { rep: 1, client }).result;
    assert.equal(rep.audioSecondsPerSecond, undefined);
    assert.equal(rep.requestsPerSecond, 2);
  });
});

describe('aggregateStep', () => {
  const slo = parseSlo('p95<=300ms');
  const cost = { gpuHourUsd: 3.6, gpus: 1 };

  it('pools reps: counts add up, rates are over the total window, percentiles over all requests', () => {
    const a = summarizeRep(samples([ok(0, 100), ok(0, 200)]), { rep: 1, client });
    const b = summarizeRep(samples([ok(0, 300), ok(0, 400), ok(0, 500), ok(0, 600)]), {
      rep: 2,
      client: { cpuPercent: 90, eventLoopDelayP99Ms: 3 },
    });
    const step = aggregateStep([a, b], { step: 1, mode: 'closed', level: 4, slo, cost });
    assert.equal(step.concurrency, 4);
    assert.equal(step.rateRps, undefined);
    assert.equal(step.requests, 6);
    assert.equal(step.requestsPerSecond, 3);
    assert.equal(step.requestsPerSecondMin, 2);
    assert.equal(step.requestsPerSecondMax, 4);
    assert.equal(step.audioSecondsPerSecond, 6);
    assert.equal(step.latencyMs?.p50, 300);
    assert.equal(step.latencyMs?.max, 600);
    assert.equal(step.clientCpuPercentMax, 90);
    assert.equal(step.meetsSlo, false);
    assert.deepEqual(step.sloFailures, ['p95<=300ms: got 600ms']);
    // $0.001 per second over 3 req/s and 6 audio s/s.
    assert.deepEqual(step.cost, { perRequestUsd: 0.000333333, perAudioHourUsd: 0.6, perCallMinuteUsd: 0.01 });
    assert.equal(step.reps.length, 2);
  });

  it('pools audio seconds per second over every rep, a rep without successes adding none', () => {
    const a = summarizeRep(samples([ok(0, 100), ok(0, 200)]), { rep: 1, client });
    const b = summarizeRep(samples([{ startMs: 0, endMs: 300, status: 500, errorCode: 'internal_error' }]), { rep: 2, client });
    const step = aggregateStep([a, b], { step: 1, mode: 'closed', level: 2, cost });
    // 2 requests of 2 s audio over two 1 s windows, as requestsPerSecond pools them.
    assert.equal(step.requestsPerSecond, 1);
    assert.equal(step.audioSecondsPerSecond, 2);
    assert.deepEqual(step.cost, { perRequestUsd: 0.001, perAudioHourUsd: 1.8, perCallMinuteUsd: 0.03 });
  });

  it('marks a step without any request as failing everything', () => {
    const step = aggregateStep([summarizeRep(samples([]), { rep: 1, client })], { step: 1, mode: 'open', level: 5, slo, cost });
    assert.equal(step.rateRps, 5);
    assert.equal(step.errorRate, 1);
    assert.equal(step.meetsSlo, false);
    assert.deepEqual(step.sloFailures, ['p95<=300ms: no measurement', 'errors<=1%: got 100%']);
  });
});

describe('checkSlo', () => {
  it('applies <= and < as written and reads ttfb and error rate', () => {
    const step = { latencyMs: { count: 1, mean: 1, p50: 100, p90: 100, p95: 100, p99: 100, max: 100 }, errorRate: 0.02 };
    assert.deepEqual(checkSlo(parseSlo('p95<=100ms,errors<=5%'), step), []);
    assert.deepEqual(checkSlo(parseSlo('p95<100ms'), step), ['p95<100ms: got 100ms', 'errors<=1%: got 2%']);
    assert.deepEqual(checkSlo(parseSlo('ttfb_p95<=50ms,errors<=3%'), step), ['ttfb_p95<=50ms: no measurement']);
  });

  it('judges error and stall shares on their counts, not on the rounded shares', () => {
    // 1 in 20,001 rounds to a share of 0 at four decimals, but it is not "no errors" / "no stalls".
    const outcomes = Array.from({ length: 20_000 }, () => ok(0, 100));
    outcomes.push({ startMs: 0, endMs: 100, status: 500, errorCode: 'internal_error' });
    const step = aggregateStep([summarizeRep(samples(outcomes), { rep: 1, client })], {
      step: 1,
      mode: 'closed',
      level: 1,
      slo: parseSlo('p95<=1000ms,errors<=0%'),
      cost: { gpus: 1 },
    });
    assert.equal(step.errorRate, 0);
    assert.equal(step.meetsSlo, false);
    assert.deepEqual(step.sloFailures, ['errors<=0%: got 0.005%']);
    const playback = toPlaybackStats([
      { stalls: 1, stalledMs: 10, audioSeconds: 1 },
      ...Array.from({ length: 20_000 }, () => ({ stalls: 0, stalledMs: 0, audioSeconds: 1 })),
    ]);
    assert.equal(playback?.stallShare, 0);
    assert.deepEqual(checkSlo(parseSlo('stalls<=0%'), { errorRate: 0, playback }), ['stalls<=0%: got 0.005%']);
  });
});

describe('cost and capacity', () => {
  it('spreads the GPU price over requests, audio hours and call minutes', () => {
    // 2 GPUs at $3.60/h cost $0.002 per second.
    assert.deepEqual(computeCost({ gpuHourUsd: 3.6, gpus: 2 }, { requestsPerSecond: 4, audioSecondsPerSecond: 10 }), {
      perRequestUsd: 0.0005,
      perAudioHourUsd: 0.72,
      perCallMinuteUsd: 0.012,
    });
    assert.deepEqual(computeCost({ gpuHourUsd: 3.6, gpus: 1 }, { requestsPerSecond: 0 }), {});
    assert.equal(computeCost({ gpus: 1 }, { requestsPerSecond: 4, audioSecondsPerSecond: 10 }), undefined);
  });

  it('rounds GPUs needed up, without float error on exact multiples', () => {
    assert.equal(gpusForTarget({ targetRps: 100, capacityRps: 25, gpus: 1 }), 4);
    assert.equal(gpusForTarget({ targetRps: 100, capacityRps: 33.3, gpus: 1 }), 4);
    assert.equal(gpusForTarget({ targetRps: 100, capacityRps: 50, gpus: 2 }), 4);
    assert.equal(gpusForTarget({ targetRps: 0.3, capacityRps: 0.1, gpus: 1 }), 3);
    assert.equal(gpusForTarget({ targetRps: 1, capacityRps: 1000, gpus: 1 }), 1);
    assert.equal(gpusForTarget({ targetRps: 1, capacityRps: 0, gpus: 1 }), undefined);
  });

  function step(level: number, rps: number, meetsSlo: boolean, errorRate = 0): StepResult {
    return {
      step: level,
      mode: 'closed',
      concurrency: level,
      level,
      requests: 100,
      ok: Math.round(100 * (1 - errorRate)),
      errors: Math.round(100 * errorRate),
      errorRate,
      errorsByCode: {},
      requestsPerSecond: rps,
      requestsPerSecondMin: rps,
      requestsPerSecondMax: rps,
      latencyMs: { count: 100, mean: level, p50: level, p90: level, p95: level * 10, p99: level, max: level },
      droppedArrivals: 0,
      lateRequests: 0,
      clientCpuPercentMax: 10,
      clientEventLoopDelayP99MsMax: 0,
      meetsSlo,
      reps: [],
    };
  }

  it('takes the level meeting the SLO with the most throughput as capacity, with cost and GPUs for a target', () => {
    const steps = [
      step(1, 10, true),
      step(2, 19, true),
      step(4, 30, false),
      step(8, 31, true, 0.005),
      step(16, 29, false, 0.2),
      step(32, 12, true),
    ];
    const capacity = decideCapacity(steps, { slo: parseSlo('p95<=100ms'), cost: { gpuHourUsd: 2, gpus: 1 }, targetRps: 100 });
    assert.equal(capacity?.level, 8);
    assert.equal(capacity?.requestsPerSecond, 31);
    assert.equal(capacity?.latencyP95Ms, 80);
    assert.equal(capacity?.gpusNeeded, 4);
    assert.deepEqual(capacity?.slo, ['p95<=100ms', 'errors<=1%']);
    assert.equal(capacity?.cost?.perRequestUsd, Number((2 / 3600 / 31).toPrecision(6)));
  });

  it('reports no capacity step when no level meets the SLO, and none without an SLO', () => {
    const steps = [step(1, 10, false)];
    const capacity = decideCapacity(steps, { slo: parseSlo('p95<=1ms'), cost: { gpus: 1 } });
    assert.equal(capacity?.step, undefined);
    assert.equal(capacity?.basis, 'slo');
    assert.equal(decideCapacity(steps, { cost: { gpus: 1 } }), undefined);
  });

  it('finds the peak among steps within the error bound', () => {
    const steps = [step(1, 10, true), step(2, 19, true), step(4, 40, false, 0.3)];
    assert.equal(findPeak(steps, { cost: { gpus: 1 } })?.level, 2);
    assert.equal(findPeak([step(4, 40, false, 0.3)], { cost: { gpus: 1 } })?.level, 4);
    assert.equal(findPeak([], { cost: { gpus: 1 } }), undefined);
  });

  it('bounds the peak by the errors over the requests, not by the rounded error rate', () => {
    // 201 errors in 20,001 requests is 1.005 %, over the 1 % bound, though its rate rounds to 0.01.
    const over = { ...step(4, 40, false), requests: 20_001, ok: 19_800, errors: 201, errorRate: 0.01 };
    assert.equal(findPeak([step(1, 10, true), over], { cost: { gpus: 1 } })?.level, 1);
  });
});

describe('CSV and summaries', () => {
  const measured = summarizeRep(
    samples([ok(0, 100), { startMs: 0, endMs: 200, status: 429, errorCode: 'queue_full' }, { startMs: 0, endMs: 300, errorCode: 'a,"b"' }]),
    { rep: 1, client: { cpuPercent: 97, eventLoopDelayP99Ms: 12 } },
  );
  const stepResult = aggregateStep([measured], { step: 1, mode: 'closed', level: 3, cost: { gpus: 1, gpuHourUsd: 1 } });
  const results = {
    schema: 'voxmux.bench.results/v1',
    label: 'unit',
    mode: 'closed',
    workload: {
      kind: 'transcribe',
      endpoint: 'http://x/v1/audio/transcriptions',
      model: 'm',
      isStreaming: false,
      inputCount: 1,
      settings: {},
    },
    command: ['voxmux', 'bench', 'transcribe'],
    machine: { platform: 'linux', release: '6', arch: 'x64', cpuModel: 'cpu', cpuCores: 2, memoryBytes: 2 ** 31, nodeVersion: 'v20' },
    startedAt: '2026-01-01T00:00:00.000Z',
    endedAt: '2026-01-01T00:01:00.000Z',
    options: { levels: [3], reps: 1, durationMs: 1000, warmupMs: 0, timeoutMs: 1000, maxRequestsPerStep: 10, gpus: 1, gpuHourUsd: 1 },
    serverMetrics: { state: 'off' },
    gpuMetrics: { state: 'off' },
    steps: [stepResult],
    notes: collectNotes([stepResult]),
  } satisfies BenchResults;

  it('writes one row per step with the JSON values, quoting cells that need it', () => {
    const rows = parseCsv(toCsv(results));
    assert.deepEqual(rows[0], [...CSV_COLUMNS]);
    assert.equal(rows.length, 2);
    const row = rows[1]!;
    const cell = (column: (typeof CSV_COLUMNS)[number]): string => row[CSV_COLUMNS.indexOf(column)]!;
    assert.equal(cell('requests'), '3');
    assert.equal(cell('requests_per_second'), '1');
    assert.equal(cell('error_rate'), String(stepResult.errorRate));
    assert.equal(cell('errors_by_code'), '429 queue_full=1;a,"b"=1');
    assert.equal(cell('rate_rps'), '');
    assert.equal(cell('cost_per_request_usd'), String(stepResult.cost?.perRequestUsd));
  });

  it("shows the server's event loop and CPU when its metrics gave them, averaged over the reps", () => {
    const server = (loopBusyPercent: number, cpuPercent: number) => ({
      scrapes: 3,
      queuedMean: 1,
      loopBusyPercent,
      cpuPercent,
      batchSendMsMean: 12,
    });
    const reps = [
      summarizeRep(samples([ok(0, 100)]), { rep: 1, client, server: server(90, 130) }),
      summarizeRep(samples([ok(0, 100)]), { rep: 2, client, server: server(100, 150) }),
    ];
    const step = aggregateStep(reps, { step: 1, mode: 'closed', level: 3, cost: { gpus: 1, gpuHourUsd: 1 } });
    assert.equal(step.server?.loopBusyPercent, 95);
    assert.equal(step.server?.cpuPercent, 140);
    const withServer = { ...results, steps: [step] };
    const [header, , row] = formatStepTable(withServer).split('\n');
    assert.match(header ?? '', /batch +srv loop % +send ms +client cpu %/);
    assert.match(row ?? '', / 95 +12\.0 +10$/);
    const cells = parseCsv(toCsv(withServer))[1]!;
    assert.equal(cells[CSV_COLUMNS.indexOf('server_loop_busy_percent')], '95');
    assert.equal(cells[CSV_COLUMNS.indexOf('server_cpu_percent')], '140');
    assert.equal(cells[CSV_COLUMNS.indexOf('server_batch_send_ms_mean')], '12');
    assert.doesNotMatch(formatStepTable(results), /srv loop/);
  });

  it("pools the server's load times over all the reps' loads, not rep by rep", () => {
    const server = (loads: number, loadMs: number) => ({
      scrapes: 3,
      resourceLoadsFromDisk: loads,
      resourceDiskLoadMsMean: loadMs,
      resourceLoadsFromHost: loads,
      resourceHostLoadMsMean: loadMs / 10,
    });
    const reps = [
      summarizeRep(samples([ok(0, 100)]), { rep: 1, client, server: server(1, 100) }),
      summarizeRep(samples([ok(0, 100)]), { rep: 2, client, server: server(9, 10) }),
    ];
    const step = aggregateStep(reps, { step: 1, mode: 'closed', level: 3, cost: { gpus: 1 } });
    // (1 x 100 ms + 9 x 10 ms) over 10 loads.
    assert.equal(step.server?.resourceLoadsFromDisk, 10);
    assert.equal(step.server?.resourceDiskLoadMsMean, 19);
    assert.equal(step.server?.resourceHostLoadMsMean, 1.9);
  });

  it('notes a saturated client, and the markdown summary carries the table and the errors', () => {
    assert.match(results.notes[0] ?? '', /client used 97% of a CPU core at level 3/);
    const markdown = toMarkdownSummary(results);
    assert.match(markdown, /^# Bench: unit/);
    assert.match(markdown, /\| 3 \| 1\.00 \|/);
    assert.match(markdown, /level 3: 429 queue_full x1/);
    assert.match(markdown, /## Notes/);
  });
});

describe('speech figures', () => {
  // 2 s of audio a call; playback as the speech workload reports it.
  const call = (endMs: number, stalls: number, stalledMs: number, ttfbMs = 50): RequestOutcome =>
    ok(0, endMs, { ttfbMs, audioSeconds: 2, playback: { stalls, stalledMs } });
  const cost = { gpus: 1 };

  it('pools real-time factors and stalls over the successful measured calls', () => {
    const rep = summarizeRep(
      samples([
        call(500, 0, 0),
        call(1000, 2, 300),
        call(100, 0, 0), // 0.05 real-time factor
        { startMs: 0, endMs: 900, status: 200, errorCode: 'ECONNRESET', ttfbMs: 20 }, // an error: not a stall
      ]),
      { rep: 1, client },
    );
    assert.deepEqual(rep.result.playback, {
      calls: 3,
      callsWithStall: 1,
      stallShare: 0.3333,
      stalls: 2,
      stalledSeconds: 0.3,
      stalledPerAudioSecond: 0.05,
    });
    assert.deepEqual(rep.result.rtf, { count: 3, mean: 0.2667, p50: 0.25, p90: 0.5, p95: 0.5, p99: 0.5, max: 0.5 });
    const step = aggregateStep([rep, summarizeRep(samples([call(200, 0, 0)]), { rep: 2, client })], {
      step: 1,
      mode: 'closed',
      level: 4,
      cost,
    });
    assert.equal(step.playback?.calls, 4);
    assert.equal(step.playback?.stallShare, 0.25);
    assert.equal(step.rtf?.count, 4);
  });

  it('checks stalls in an SLO as the share of calls with a stall', () => {
    const clauses = parseSlo('ttfb_p95<=250ms,stalls<=0');
    assert.deepEqual(
      clauses.map((clause) => clause.text),
      ['ttfb_p95<=250ms', 'stalls<=0%', 'errors<=1%'],
    );
    const playback = { calls: 4, callsWithStall: 1, stallShare: 0.25, stalls: 1, stalledSeconds: 0.1, stalledPerAudioSecond: 0.01 };
    assert.deepEqual(checkSlo(clauses, { errorRate: 0, ttfbMs: toLatencyStats([100, 300]), playback }), [
      'ttfb_p95<=250ms: got 300ms',
      'stalls<=0%: got 25%',
    ]);
    assert.deepEqual(checkSlo(clauses, { errorRate: 0, ttfbMs: toLatencyStats([100]) }), ['stalls<=0%: no measurement']);
  });

  it('takes the most concurrent streams meeting the SLO as capacity when ranked by level', () => {
    const slo = parseSlo('ttfb_p95<=250ms,stalls<=0%');
    const level = (n: number, endMs: number, stalls: number, ttfbMs: number, calls = 1): StepResult =>
      aggregateStep(
        [summarizeRep(samples(Array.from({ length: calls }, () => call(endMs, stalls, stalls * 10, ttfbMs))), { rep: 1, client })],
        {
          step: n,
          mode: 'closed',
          level: n,
          slo,
          cost,
        },
      );
    // Level 8 is the highest to pass, though level 4 had more throughput; 16 stalls, 32 answers late.
    const steps = [level(1, 900, 0, 40), level(4, 200, 0, 60, 3), level(8, 400, 0, 240), level(16, 300, 1, 100), level(32, 300, 0, 900)];
    const capacity = decideCapacity(steps, { slo, cost, rankedBy: 'level' });
    assert.equal(capacity?.level, 8);
    assert.equal(capacity?.rankedBy, 'level');
    assert.equal(capacity?.ttfbP95Ms, 240);
    assert.equal(capacity?.stallShare, 0);
    assert.equal(decideCapacity(steps, { slo, cost })?.level, 4);
    const none = decideCapacity([level(16, 300, 1, 100)], { slo, cost, rankedBy: 'level' });
    assert.equal(none?.step, undefined);
    assert.equal(none?.rankedBy, 'level');
  });

  it('divides the server resource loads over the measured calls and shows the speech columns', () => {
    const server = { scrapes: 2, resourceLoadsFromDisk: 3, resourceLoadsFromHost: 1, resourceEvictions: 2, resourceResidentBytesMax: 10 };
    const measurement = summarizeRep(samples([call(500, 0, 0), call(500, 1, 100)]), { rep: 1, client, server });
    const step = aggregateStep([measurement], { step: 1, mode: 'closed', level: 2, cost, slo: parseSlo('stalls<=0') });
    assert.deepEqual(step.resourceLoadsPerCall, { fromDisk: 1.5, fromHost: 0.5 });
    assert.equal(step.server?.resourceEvictions, 2);
    const results: BenchResults = {
      schema: 'voxmux.bench.results/v1',
      label: 'speech',
      mode: 'closed',
      workload: { kind: 'speech', endpoint: 'http://x/v1/audio/speech', model: 'm', isStreaming: true, inputCount: 24, settings: {} },
      command: ['voxmux', 'bench', 'speech'],
      machine: { platform: 'linux', release: '6', arch: 'x64', cpuModel: 'cpu', cpuCores: 2, memoryBytes: 2 ** 31, nodeVersion: 'v20' },
      startedAt: '2026-01-01T00:00:00.000Z',
      endedAt: '2026-01-01T00:01:00.000Z',
      options: { levels: [2], reps: 1, durationMs: 1000, warmupMs: 0, timeoutMs: 1000, maxRequestsPerStep: 10, gpus: 1 },
      serverMetrics: { state: 'ok' },
      gpuMetrics: { state: 'off' },
      steps: [step],
      capacity: decideCapacity([step], { slo: parseSlo('stalls<=0'), cost, rankedBy: 'level' })!,
      notes: [],
    };
    const table = formatStepTable(results).split('\n');
    const header = table[0]!.split(/\s{2,}/);
    for (const column of [
      'audio s/s',
      'ttfb p99',
      'RTF p50',
      'calls',
      'stalled calls',
      'stalled s',
      'disk/call',
      'host/call',
      'evictions',
    ]) {
      assert.ok(header.includes(column), column);
    }
    assert.match(table[2]!, /1 \(50\.0%\)/);
    const row = parseCsv(toCsv(results))[1]!;
    const cell = (column: (typeof CSV_COLUMNS)[number]): string => row[CSV_COLUMNS.indexOf(column)]!;
    assert.equal(cell('stall_share'), '0.5');
    assert.equal(cell('disk_loads_per_call'), '1.5');
    assert.equal(cell('rtf_p50'), '0.25');
    assert.match(toMarkdownSummary(results), /Capacity: no step met the SLO stalls<=0%, errors<=1%/);
  });

  it('prices the capacity of streams ranked by level, as it prices every other capacity', () => {
    const priced = { gpuHourUsd: 3.6, gpus: 1 };
    const slo = parseSlo('stalls<=0');
    const step = aggregateStep([summarizeRep(samples([call(500, 0, 0), call(500, 0, 0)]), { rep: 1, client })], {
      step: 1,
      mode: 'closed',
      level: 2,
      cost: priced,
      slo,
    });
    const capacity = decideCapacity([step], { slo, cost: priced, rankedBy: 'level', targetRps: 4 })!;
    assert.equal(capacity.rankedBy, 'level');
    assert.ok(capacity.cost?.perCallMinuteUsd !== undefined);
    const lines = capacityLines({
      schema: 'voxmux.bench.results/v1',
      label: 'speech',
      mode: 'closed',
      workload: { kind: 'speech', endpoint: 'http://x/v1/audio/speech', model: 'm', isStreaming: true, inputCount: 1, settings: {} },
      command: ['voxmux', 'bench', 'speech'],
      machine: { platform: 'linux', release: '6', arch: 'x64', cpuModel: 'cpu', cpuCores: 2, memoryBytes: 2 ** 31, nodeVersion: 'v20' },
      startedAt: '2026-01-01T00:00:00.000Z',
      endedAt: '2026-01-01T00:01:00.000Z',
      options: { levels: [2], reps: 1, durationMs: 1000, warmupMs: 0, timeoutMs: 1000, maxRequestsPerStep: 10, gpus: 1, gpuHourUsd: 3.6 },
      serverMetrics: { state: 'ok' },
      gpuMetrics: { state: 'off' },
      steps: [step],
      capacity,
      notes: [],
    });
    assert.match(lines[0] ?? '', /^Capacity: 2 concurrent streams meeting stalls<=0%, errors<=1%/);
    assert.match(lines[1] ?? '', /^ {2}cost at \$3\.6\/GPU-hour: .* per call minute$/);
    assert.match(lines[2] ?? '', /^ {2}GPUs for 4 req\/s: /);
  });
});
