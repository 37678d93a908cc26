import assert from 'node:assert/strict';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { RequestLogLine } from '../../src/api/request-log.js';
import { runBenchCli } from './cli.js';
import type { CostResults } from './cost-report.js';

function capture() {
  let out = '';
  let err = '';
  return {
    io: { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) }, isTTY: false },
    deps: { shouldHandleSignals: false },
    out: () => out,
    err: () => err,
  };
}

function line(time: string, kind: RequestLogLine['kind'], seconds: number): RequestLogLine {
  return {
    time,
    durationMs: 100,
    model: kind === 'speech' ? 'voice' : 'parakeet',
    kind,
    audioInSeconds: kind === 'transcription' ? seconds : 0,
    audioOutSeconds: kind === 'speech' ? seconds : 0,
    queueMs: 1,
    serviceMs: 90,
    status: 200,
    code: null,
    instanceId: 'parakeet-0',
    gpu: 0,
    gpuSeconds: 0.09,
  };
}

/** Two days (a rotated file and the live one): two calls on the first, one on the second, and a torn last line. */
async function writeLogs(dir: string): Promise<string[]> {
  const older = join(dir, 'requests.jsonl.1');
  const live = join(dir, 'requests.jsonl');
  await writeFile(
    older,
    [line('2026-12-01T09:00:00.000Z', 'transcription', 1800), line('2026-12-01T09:10:00.000Z', 'speech', 120)]
      .map((l) => JSON.stringify(l))
      .join('\n') + '\n',
  );
  await writeFile(live, `${JSON.stringify(line('2026-12-02T15:00:00.000Z', 'speech', 60))}\n{"time":"2026-12-02T15:`);
  return [live, older];
}

describe('voxmux bench cost (#20)', () => {
  it('prints the modes as markdown and writes results.json, summary.md and cost.svg with --out', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voxmux-cost-'));
    const files = await writeLogs(dir);
    const out = join(dir, 'out');
    const c = capture();
    const code = await runBenchCli(
      ['cost', ...files, '--gpu-hour-usd', '3', '--idle-stop-min', '10,30', '--cold-start-s', '45', '--out', out],
      c.io,
      c.deps,
    );
    assert.equal(code, 0, c.err());
    assert.match(c.out(), /\| always on \| 24\.00 \| \$2160\.00 \|/);
    assert.match(c.out(), /\| 16 h a day from 06:00 \| 16\.00 \| \$1440\.00 \|/);
    assert.match(c.err(), /Skipped 1 lines/);
    const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as CostResults;
    assert.equal(results.trace.calls, 3);
    assert.equal(results.trace.spanDays, 2);
    assert.equal(results.skippedLines, 1);
    assert.equal(results.trace.firstCall, '2026-12-01T09:00:00.000Z');
    assert.deepEqual(
      results.modes.map((m) => m.label),
      ['always on', '16 h a day from 06:00', 'on demand, idle stop 10 min', 'on demand, idle stop 30 min'],
    );
    // Idle stop 10: up 09:00 to 09:20 (09:10 + the call's 0.1 s + 10 min) and 15:00 to 15:10:45
    // (ready after 45 s, then the call's 0.1 s and 10 min).
    const upMin = 20 + 10.75 + (2 * 0.1) / 60;
    const monthly = (upMin / 60) * (30 / 2) * 3;
    assert.ok(Math.abs(results.modes[2]!.monthlyCostUsd - monthly) < 1e-9, `${results.modes[2]!.monthlyCostUsd} vs ${monthly}`);
    assert.equal(results.modes[2]!.waitedCalls, 2);
    // Per call minute: the speech calls' 3 minutes over the 2 days, scaled to 30.
    assert.ok(Math.abs(results.modes[2]!.costPerCallMinuteUsd! - monthly / (3 * 15)) < 1e-9);
    assert.equal(await readFile(join(out, 'summary.md'), 'utf8'), c.out());
    const svg = await readFile(join(out, 'cost.svg'), 'utf8');
    assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    assert.equal((svg.match(/<rect x=/g) ?? []).length, 4);
  });

  it('exits 2 with a clear message for missing or malformed flags, no file, an unreadable file or no log lines', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voxmux-cost-'));
    const [live] = await writeLogs(dir);
    const empty = join(dir, 'empty.jsonl');
    await writeFile(empty, '{"msg":"call completed"}\n');
    const cases: [string[], RegExp][] = [
      [[live!], /Expected --gpu-hour-usd/],
      [['--gpu-hour-usd', '2'], /Expected at least one request log file/],
      [[live!, '--gpu-hour-usd', 'cheap'], /Expected --gpu-hour-usd to be a number/],
      [[live!, '--gpu-hour-usd', '2', '--day-start', '25:00'], /Expected --day-start to be a time HH:MM/],
      [[live!, '--gpu-hour-usd', '2', '--idle-stop-min', '30,0'], /Expected --idle-stop-min/],
      [[live!, '--gpu-hour-usd', '2', '--gpus', '1.5'], /Expected --gpus to be an integer/],
      [[live!, '--gpu-hour-usd', '2', '--hours-per-day', '25'], /Expected --hours-per-day/],
      [[join(dir, 'nope.jsonl'), '--gpu-hour-usd', '2'], /Expected a readable request log file/],
      [[empty, '--gpu-hour-usd', '2'], /found none/],
      [[live!, '--gpu-hour-usd', '2', '--bogus'], /Unknown option '--bogus'/],
    ];
    for (const [args, message] of cases) {
      const c = capture();
      assert.equal(await runBenchCli(['cost', ...args], c.io, c.deps), 2, args.join(' '));
      assert.match(c.err(), message, args.join(' '));
      assert.match(c.err(), /Run voxmux cost --help for usage/);
      assert.equal(c.out(), '');
    }
  });

  it('answers --help with its usage and exit 0', async () => {
    const c = capture();
    assert.equal(await runBenchCli(['cost', '--help'], c.io, c.deps), 0);
    assert.match(c.out(), /voxmux cost LOG \[LOG \.\.\.\] --gpu-hour-usd USD/);
  });
});
