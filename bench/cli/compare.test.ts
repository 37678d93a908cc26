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
