/**
 * bench/gpu/run-diarize.sh's helpers: the server configurations it writes (diarize-configs.mjs) load
 * with the real config loader, and its results file (diarize-results.mjs) keeps each phase as it ends.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';

const dir = mkdtempSync(join(tmpdir(), 'voxmux-diarize-gpu-bench-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function node(args: string[], env: Record<string, string> = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('DIARIZE_BENCH_')));
  return spawnSync(process.execPath, args, { encoding: 'utf8', env: { ...clean, ...env } });
}
const readJson = (path: string): unknown => JSON.parse(readFileSync(path, 'utf8'));
/** The value at a path of keys in parsed JSON. */
const at = (value: unknown, ...keys: string[]): unknown =>
  keys.reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], value);

describe('diarize-configs.mjs', () => {
  it('writes the GPU configurations: parakeet at 100 % and 8 sortformer instances at 12 % under MPS', () => {
    const out = join(dir, 'gpu');
    const run = node(['bench/gpu/diarize-configs.mjs', out, '/srv/host']);
    assert.equal(run.status, 0, run.stderr);
    const mixed = loadConfig({ file: readJson(join(out, 'mixed.json')) });
    assert.equal(mixed.supervisor.mps.enabled, true);
    const sortformer = mixed.models.sortformer!;
    assert.equal(sortformer.adapter, 'sortformer');
    assert.equal(sortformer.instances, 8);
    assert.deepEqual(sortformer.mpsActiveThreadPercentages, [12]);
    assert.deepEqual(sortformer.gpus, [0]);
    assert.equal(sortformer.exclusiveWarmup, true);
    assert.deepEqual(sortformer.options, {
      config: 'full',
      device: 'cuda',
      preset: 'chunk-15s',
      dtype: 'bf16',
      cudaGraphs: true,
      maxBatchSize: 64,
    });
    const parakeet = mixed.models.parakeet!;
    assert.deepEqual(parakeet.mpsActiveThreadPercentages, []);
    assert.equal(parakeet.instances, 1);
    assert.equal(parakeet.maxBatchSize, 32);
    assert.equal(parakeet.options.matmul, 'fp8');
    assert.equal(mixed.scheduler.maxRunningBatchesPerInstance, 3);
    assert.equal(sortformer.maxRunningBatchesPerInstance, 3);
    // DIARIZE_BENCH_IN_FLIGHT sets the Sortformer instances' batches in flight, not the ASR instance's.
    const oneOut = join(dir, 'one-in-flight');
    const oneRun = node(['bench/gpu/diarize-configs.mjs', oneOut, '/srv/host'], { DIARIZE_BENCH_IN_FLIGHT: '1' });
    assert.equal(oneRun.status, 0, oneRun.stderr);
    const one = loadConfig({ file: readJson(join(oneOut, 'mixed.json')) });
    assert.equal(one.models.sortformer!.maxRunningBatchesPerInstance, 1);
    assert.equal(one.models.parakeet!.maxRunningBatchesPerInstance, 0);
    assert.equal(one.scheduler.maxRunningBatchesPerInstance, 3);
    const alone = loadConfig({ file: readJson(join(out, 'diarize.json')) });
    assert.deepEqual(Object.keys(alone.models), ['sortformer']);
    // DIARIZE_BENCH_COMPILE=1 compiles the Sortformer encoder, and changes nothing else.
    const compiledOut = join(dir, 'compiled');
    const compiledRun = node(['bench/gpu/diarize-configs.mjs', compiledOut, '/srv/host'], { DIARIZE_BENCH_COMPILE: '1' });
    assert.equal(compiledRun.status, 0, compiledRun.stderr);
    const compiled = readJson(join(compiledOut, 'mixed.json')) as { models: { sortformer: { options: Record<string, unknown> } } };
    const plain = readJson(join(out, 'mixed.json')) as typeof compiled;
    const { compileEncoder, ...rest } = compiled.models.sortformer.options;
    assert.equal(compileEncoder, true);
    assert.deepEqual({ ...compiled, models: { ...compiled.models, sortformer: { ...compiled.models.sortformer, options: rest } } }, plain);
  });

  it('writes tiny CPU configurations without MPS or graphs for a dry run, sized by the environment', () => {
    const out = join(dir, 'cpu');
    const run = node(['bench/gpu/diarize-configs.mjs', out, '/srv/host'], { DIARIZE_BENCH_DEVICE: 'cpu', DIARIZE_BENCH_INSTANCES: '2' });
    assert.equal(run.status, 0, run.stderr);
    const mixed = loadConfig({ file: readJson(join(out, 'mixed.json')) });
    assert.equal(mixed.supervisor.mps.enabled, false);
    assert.equal(mixed.models.sortformer!.instances, 2);
    assert.deepEqual(mixed.models.sortformer!.mpsActiveThreadPercentages, []);
    assert.equal(mixed.models.sortformer!.options.config, 'tiny');
    assert.equal(mixed.models.sortformer!.options.cudaGraphs, false);
    assert.equal(mixed.models.parakeet!.options.config, 'tiny');
  });

  it('rejects bad settings with the variable named, and a missing host path', () => {
    const bad = node(['bench/gpu/diarize-configs.mjs', join(dir, 'bad'), '/srv/host'], { DIARIZE_BENCH_MPS_PERCENT: '0' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /DIARIZE_BENCH_MPS_PERCENT must be an integer in \[1, 100\]/);
    const device = node(['bench/gpu/diarize-configs.mjs', join(dir, 'bad'), '/srv/host'], { DIARIZE_BENCH_DEVICE: 'tpu' });
    assert.equal(device.status, 2);
    assert.match(device.stderr, /DIARIZE_BENCH_DEVICE must be cuda or cpu/);
    const usage = node(['bench/gpu/diarize-configs.mjs', join(dir, 'bad')]);
    assert.equal(usage.status, 2);
    assert.match(usage.stderr, /usage/);
  });
});

describe('diarize-results.mjs', () => {
  const results = join(dir, 'results', 'results.json');
  const bench = (name: string, body: unknown) => {
    const path = join(dir, `${name}.json`);
    writeFileSync(path, JSON.stringify(body));
    return path;
  };
  const ramp = (capacityRps: number | undefined) => ({
    schema: 'voxmux.bench/1',
    label: 'asr',
    steps: [
      {
        concurrency: 64,
        requestsPerSecond: 200,
        ok: 800,
        errorRate: 0,
        latencyMs: { p50: 200, p95: 300, p99: 350 },
        meetsSlo: true,
        clientCpuPercentMax: 12,
      },
    ],
    capacity:
      capacityRps === undefined
        ? { basis: 'peak', requestsPerSecond: 10, level: 256 }
        : { basis: 'slo', requestsPerSecond: capacityRps, level: 192 },
  });

  it('records provenance, each phase as it ends, skipped phases and the ASR comparison', () => {
    spawnSync('mkdir', ['-p', join(dir, 'results')]);
    const init = node(['bench/gpu/diarize-results.mjs', 'init', results, 'commit=abc', 'command=bash x.sh OUT', 'mpsPercent=12']);
    assert.equal(init.status, 0, init.stderr);
    assert.deepEqual(readJson(results), {
      schema: 'voxmux.bench.diarize-gpu/v1',
      commit: 'abc',
      command: 'bash x.sh OUT',
      mpsPercent: 12,
      phases: {},
    });

    const load = bench('load', {
      schema: 'voxmux.bench.diarize/v1',
      label: 'a2-rt-500',
      options: { sessions: 500, pacing: 'realtime' },
      totals: {
        sessions: 500,
        chunks: 1000,
        ok: 1000,
        errors: {},
        expiries: 0,
        latencyMs: { p50: 30, p95: 80, p99: 95 },
        chunksPerSecond: 33.3,
        realTimeFactor: 0.002,
        sessionsFailed: 0,
        sentLate: 2,
        maxLateMs: 120,
      },
      chunks: [{ session: 0, seq: 0, latencyMs: 30 }],
    });
    assert.equal(node(['bench/gpu/diarize-results.mjs', 'phase', results, 'a2-rt-500', load, 'clientCpuPercent=41.5']).status, 0);
    assert.equal(node(['bench/gpu/diarize-results.mjs', 'phase', results, 'b1-asr-alone', bench('b1', ramp(360))]).status, 0);
    assert.equal(node(['bench/gpu/diarize-results.mjs', 'phase', results, 'b2-asr-with-diarization', bench('b2', ramp(300))]).status, 0);
    assert.equal(node(['bench/gpu/diarize-results.mjs', 'phase', results, 'b3-asr-alone-again', bench('b3', ramp(undefined))]).status, 0);
    assert.equal(node(['bench/gpu/diarize-results.mjs', 'skip', results, 'a2-rt-5000', 'needs', '~42', 's']).status, 0);
    assert.equal(node(['bench/gpu/diarize-results.mjs', 'phase', results, 'a1-idle', join(dir, 'absent.json')]).status, 0);

    const r = readJson(results);
    assert.equal(at(r, 'phases', 'a2-rt-500', 'kind'), 'diarize-load');
    assert.equal(at(r, 'phases', 'a2-rt-500', 'totals', 'latencyMs', 'p95'), 80);
    assert.equal(at(r, 'phases', 'a2-rt-500', 'clientCpuPercent'), 41.5);
    assert.equal(at(r, 'phases', 'a2-rt-500', 'chunks'), undefined, 'per-chunk rows stay in the bench results');
    assert.deepEqual(at(r, 'phases', 'b1-asr-alone', 'capacity'), { requestsPerSecond: 360, concurrency: 192 });
    assert.equal(at(r, 'phases', 'b3-asr-alone-again', 'capacity'), undefined, 'a peak is not a capacity within the SLO');
    assert.equal(at(r, 'phases', 'a2-rt-5000', 'skipped'), 'needs ~42 s');
    assert.match(String(at(r, 'phases', 'a1-idle', 'skipped')), /no results/);
    assert.deepEqual(at(r, 'asrComparison'), {
      aloneRunsRps: [360],
      aloneRps: 360,
      withDiarizationRps: 300,
      dropPercent: 16.7,
      meetsTarget: false,
    });

    const summary = readFileSync(join(dir, 'results', 'summary.md'), 'utf8');
    assert.match(summary, /\| a2-rt-500 \| 500 session\(s\), realtime \| chunks 1000 \(ok 1000\), p50 30\.0 ms, p95 80\.0 ms/);
    assert.match(summary, /sessions failed 0, sent late 2 \(at most 120\.0 ms\), bench client CPU 41\.5 %/);
    assert.match(summary, /drop 16\.7 % \(target <= 15 %: not met\)/);
    assert.match(summary, /\| a2-rt-5000 \| skipped \| needs ~42 s \|/);
  });

  it('fails with usage on a bad call', () => {
    const bad = node(['bench/gpu/diarize-results.mjs', 'set', results, 'novalue']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /Expected KEY=VALUE/);
    const verb = node(['bench/gpu/diarize-results.mjs', 'frobnicate', results]);
    assert.equal(verb.status, 2);
  });
});

describe('run-diarize.sh and run-diarize-layouts.sh settings', () => {
  function bash(args: string[], env: Record<string, string> = {}) {
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('DIARIZE_BENCH_')));
    return spawnSync('bash', args, { encoding: 'utf8', env: { ...clean, ...env } });
  }

  it('refuses a diarization-only server for part b, and an unknown server, before starting anything', () => {
    const out = join(dir, 'refused');
    const withB = bash(['bench/gpu/run-diarize.sh', out], { DIARIZE_BENCH_SERVER: 'diarize', DIARIZE_BENCH_PHASES: 'a,b' });
    assert.equal(withB.status, 2);
    assert.match(withB.stderr, /DIARIZE_BENCH_SERVER=diarize has no ASR model: set DIARIZE_BENCH_PHASES=a/);
    const unknown = bash(['bench/gpu/run-diarize.sh', out], { DIARIZE_BENCH_SERVER: 'asr' });
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /DIARIZE_BENCH_SERVER must be mixed or diarize: got 'asr'/);
  });

  it('refuses a layout that is not INSTANCESxPERCENT:IN_FLIGHT, naming it, and a call without layouts', () => {
    const bad = bash(['bench/gpu/run-diarize-layouts.sh', join(dir, 'layouts'), '4x25:1', '2x100']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /Expected a layout INSTANCESxPERCENT:IN_FLIGHT \(4x25:1\): got '2x100'/);
    const none = bash(['bench/gpu/run-diarize-layouts.sh', join(dir, 'layouts')]);
    assert.equal(none.status, 2);
    assert.match(none.stderr, /usage: run-diarize-layouts\.sh OUT_DIR LAYOUT/);
  });
});
