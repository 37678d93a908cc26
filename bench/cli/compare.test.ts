import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isBenchError } from './bench-error.js';
import { compareResults, formatRatio, loadResults, toComparedRuns } from './compare.js';
import type { BenchResults, StepResult } from './report.js';
import { findXmlError } from '../../test/support/xml-check.js';

function step(level: number, rps: number, p95: number): StepResult {
  return {
    step: level,
    mode: 'closed',
    concurrency: level,
    level,
    requests: 10,
    ok: 10,
    errors: 0,
    errorRate: 0,
    errorsByCode: {},
    requestsPerSecond: rps,
    requestsPerSecondMin: rps,
    requestsPerSecondMax: rps,
    latencyMs: { count: 10, mean: p95, p50: p95, p90: p95, p95, p99: p95, max: p95 },
    droppedArrivals: 0,
    lateRequests: 0,
    clientCpuPercentMax: 5,
    clientEventLoopDelayP99MsMax: 0,
    reps: [],
  };
}

function results(label: string, steps: StepResult[]): BenchResults {
  const best = steps.reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
  return {
    schema: 'voxmux.bench.results/v1',
    label,
    mode: 'closed',
    workload: {
      kind: 'transcribe',
      endpoint: 'http://h/v1/audio/transcriptions',
      model: 'm',
      isStreaming: false,
      inputCount: 1,
      settings: {},
    },
    command: ['voxmux', 'bench', 'transcribe'],
    gitCommit: '0123456789abcdef0123456789abcdef01234567',
    machine: { platform: 'linux', release: '6', arch: 'x64', cpuModel: 'cpu', cpuCores: 2, memoryBytes: 1, nodeVersion: 'v20' },
    startedAt: '2026-01-01T00:00:00.000Z',
    endedAt: '2026-01-01T00:01:00.000Z',
    options: {
      levels: steps.map((s) => s.level),
      reps: 1,
      durationMs: 1000,
      warmupMs: 0,
      timeoutMs: 1000,
      maxRequestsPerStep: 10,
      gpus: 1,
    },
    serverMetrics: { state: 'off' },
    gpuMetrics: { state: 'off' },
    steps,
    peak: { basis: 'peak', step: best.step, level: best.level, requestsPerSecond: best.requestsPerSecond, gpus: 1 },
    notes: [],
  };
}

describe('compareResults', () => {
  const a = results('baseline', [step(1, 10, 100), step(2, 20, 100), step(4, 20, 200)]);
  const b = results('baseline', [step(2, 40, 50), step(4, 40, 100), step(8, 41, 190)]);

  it('lines up levels, shows each run and the ratio of each run to the first', () => {
    const output = compareResults(
      toComparedRuns([
        { source: 'a.json', results: a },
        { source: 'b.json', results: b },
      ]),
    );
    const lines = output.text.split('\n');
    assert.match(lines[0]!, /^A = baseline \(a\.json, 2026-01-01T00:00:00\.000Z, commit 0123456789ab\)$/);
    assert.match(lines[1]!, /^B = baseline \(2\) \(b\.json/);
    const header = lines.find((line) => line.startsWith('conc'))!;
    assert.deepEqual(header.split(/\s{2,}/), ['conc', 'A req/s', 'A p95 ms', 'B req/s', 'B p95 ms', 'B/A req/s', 'B/A p95']);
    const row = (level: number): string[] =>
      lines
        .find((line) => line.startsWith(`${level} `))!
        .trim()
        .split(/\s+/);
    assert.deepEqual(row(1), ['1', '10.00', '100', '-', '-', '-', '-']);
    assert.deepEqual(row(2), ['2', '20.00', '100', '40.00', '50', '2.00x', '0.50x']);
    assert.deepEqual(row(4), ['4', '20.00', '200', '40.00', '100', '2.00x', '0.50x']);
    assert.deepEqual(row(8), ['8', '-', '-', '41.00', '190', '-', '-']);
    assert.match(output.text, /B: peak 41\.00 req\/s at level 8 \(2\.05x of A\)/);
    assert.match(output.markdown, /\| 2 \| 20\.00 \| 100 \| 40\.00 \| 50 \| 2\.00x \| 0\.50x \|/);
    assert.equal(findXmlError(output.svg), undefined);
    assert.equal((output.svg.match(/<polyline /g) ?? []).length, 4);
  });

  it('needs two runs', () => {
    assert.throws(
      () => compareResults(toComparedRuns([{ source: 'a.json', results: a }])),
      (err: unknown) => isBenchError(err) && err.code === 'usage',
    );
  });
});

describe('formatRatio', () => {
  it('divides by the base, with a dash when either is missing or the base is zero', () => {
    assert.equal(formatRatio(3, 2), '1.50x');
    assert.equal(formatRatio(undefined, 2), '-');
    assert.equal(formatRatio(3, 0), '-');
  });
});

describe('loadResults', () => {
  it('reads a results file and rejects anything else with a usage error', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voxmux-compare-'));
    try {
      await writeFile(join(dir, 'ok.json'), JSON.stringify(results('x', [step(1, 1, 1)])));
      await writeFile(join(dir, 'other.json'), JSON.stringify({ hello: 1 }));
      await writeFile(join(dir, 'bad.json'), '{');
      assert.equal((await loadResults(join(dir, 'ok.json'))).label, 'x');
      for (const [name, pattern] of [
        ['other.json', /schema voxmux\.bench\.results\/v1/],
        ['bad.json', /is not JSON/],
        ['missing.json', /cannot be read/],
      ] as const) {
        await assert.rejects(loadResults(join(dir, name)), (err: unknown) => isBenchError(err) && pattern.test(err.message));
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('compareResults for speech runs', () => {
  const speechStep = (level: number, audioPerS: number, ttfbP95: number, stallShare: number, diskPerCall: number): StepResult => ({
    ...step(level, audioPerS / 4, 2000),
    audioSecondsPerSecond: audioPerS,
    ttfbMs: { count: 10, mean: ttfbP95, p50: ttfbP95 / 2, p90: ttfbP95, p95: ttfbP95, p99: ttfbP95, max: ttfbP95 },
    playback: {
      calls: 10,
      callsWithStall: stallShare * 10,
      stallShare,
      stalls: stallShare * 10,
      stalledSeconds: 1,
      stalledPerAudioSecond: 0.1,
    },
    resourceLoadsPerCall: { fromDisk: diskPerCall, fromHost: 0 },
  });
  const speech = (label: string, steps: StepResult[], capacityLevel: number | undefined): BenchResults => {
    const base = results(label, steps);
    const slo = ['ttfb_p95<=250ms', 'stalls<=0%', 'errors<=1%'];
    const at = steps.find((s) => s.level === capacityLevel);
    return {
      ...base,
      workload: { ...base.workload, kind: 'speech', endpoint: 'http://h/v1/audio/speech', isStreaming: true },
      options: { ...base.options, slo },
      capacity:
        at === undefined
          ? { basis: 'slo', rankedBy: 'level', slo, gpus: 1 }
          : {
              basis: 'slo',
              rankedBy: 'level',
              slo,
              step: at.step,
              level: at.level,
              requestsPerSecond: at.requestsPerSecond,
              audioSecondsPerSecond: at.audioSecondsPerSecond!,
              ttfbP95Ms: at.ttfbMs!.p95,
              gpus: 1,
            },
    };
  };

  it('lines up audio, first byte, stalls and disk loads, and the most streams each run served within its SLO', () => {
    const a = speech('global lock', [speechStep(1, 5, 200, 0, 1), speechStep(2, 6, 900, 0.5, 1)], 1);
    const b = speech('residency', [speechStep(1, 5, 60, 0, 0), speechStep(2, 10, 70, 0, 0), speechStep(8, 40, 200, 0, 0)], 8);
    const output = compareResults(
      toComparedRuns([
        { source: 'a.json', results: a },
        { source: 'b.json', results: b },
      ]),
    );
    const lines = output.text.split('\n');
    const header = lines.find((line) => line.startsWith('streams'))!.split(/\s{2,}/);
    assert.deepEqual(header.slice(0, 7), ['streams', 'A audio s/s', 'A ttfb p50', 'A ttfb p95', 'A stalled', 'A disk/call', 'A errors']);
    assert.deepEqual(header.slice(-2), ['B/A audio s/s', 'B/A ttfb p95']);
    const row2 = lines
      .find((line) => line.startsWith('2 '))!
      .trim()
      .split(/\s+/);
    assert.deepEqual(row2, ['2', '6.0', '450', '900', '50.0%', '1.00', '0', '10.0', '35', '70', '0.0%', '0.00', '0', '1.67x', '0.08x']);
    assert.match(output.text, /A: 1 stream within ttfb_p95<=250ms, stalls<=0%, errors<=1% \(first byte p95 200 ms, 5\.0 audio s\/s\)/);
    assert.match(output.text, /B: 8 streams within .* \(8\.00x of A\)/);
    assert.match(output.svg, /First byte p95/);
    assert.match(output.svg, /SLO 250 ms/);
    assert.equal(findXmlError(output.svg), undefined);
  });

  it('counts a run whose every level missed the SLO as zero streams', () => {
    const a = speech('global lock', [speechStep(1, 5, 900, 0, 1)], undefined);
    const b = speech('residency', [speechStep(1, 5, 60, 0, 0)], 1);
    const output = compareResults(
      toComparedRuns([
        { source: 'a.json', results: a },
        { source: 'b.json', results: b },
      ]),
    );
    assert.match(output.text, /A: 0 streams within/);
    assert.match(output.text, /B: 1 stream within .* \(- of A\)/);
  });
});
