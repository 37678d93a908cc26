/**
 * The bench against a real HTTP server on loopback: an OpenAI-compatible transcription endpoint
 * whose engine is a test double with N instances, each taking one request at a time and sleeping
 * a fixed service time S. Its capacity is known (N/S), so the bench's measurements can be checked
 * against Little's law. Every run is short and bounded.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBenchCli } from '../../bench/cli/cli.js';
import { CSV_COLUMNS, type BenchResults } from '../../bench/cli/report.js';
import { floatWav, noise } from '../support/audio.js';
import { parseCsv } from '../support/csv.js';
import { findXmlError } from '../support/xml-check.js';

const MODEL = 'test-model';

interface EngineOptions {
  instances: number;
  serviceMs: number;
  /** Every transcription answers 500 with an error envelope. */
  isFailing?: boolean;
}

interface TestServer {
  url: string;
  calls: () => number;
  close: () => Promise<void>;
}

/** An OpenAI-compatible server whose engine is N instances sleeping S ms per request. */
async function startServer(options: EngineOptions): Promise<TestServer> {
  const queue: Array<() => void> = [];
  let busy = 0;
  let calls = 0;
  let batches = 0;
  let running = 0;
  const acquire = (): Promise<void> =>
    new Promise((resolve) => {
      const start = (): void => {
        busy += 1;
        running += 1;
        batches += 1;
        resolve();
      };
      if (busy < options.instances) start();
      else queue.push(start);
    });
  const release = (): void => {
    busy -= 1;
    running -= 1;
    queue.shift()?.();
  };
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks).toString('latin1');
        if (req.method === 'GET' && req.url === '/v1/models') {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model' }] }));
          return;
        }
        if (req.method === 'GET' && req.url === '/metrics') {
          res.setHeader('content-type', 'text/plain; version=0.0.4');
          res.end(
            [
              '# TYPE voxmux_scheduler_requests_queued gauge',
              `voxmux_scheduler_requests_queued{model="${MODEL}"} ${queue.length}`,
              `voxmux_scheduler_requests_running{model="${MODEL}"} ${running}`,
              '# TYPE voxmux_scheduler_batch_size histogram',
              `voxmux_scheduler_batch_size_bucket{model="${MODEL}",le="1"} ${batches}`,
              `voxmux_scheduler_batch_size_bucket{model="${MODEL}",le="+Inf"} ${batches}`,
              `voxmux_scheduler_batch_size_sum{model="${MODEL}"} ${batches}`,
              `voxmux_scheduler_batch_size_count{model="${MODEL}"} ${batches}`,
              '',
            ].join('\n'),
          );
          return;
        }
        if (req.method !== 'POST' || req.url !== '/v1/audio/transcriptions') {
          res.statusCode = 404;
          res.end();
          return;
        }
        calls += 1;
        if (options.isFailing === true) {
          res.statusCode = 500;
          res.setHeader('content-type', 'application/json');
          res.end(
            JSON.stringify({ error: { message: 'Internal server error', type: 'server_error', param: null, code: 'internal_error' } }),
          );
          return;
        }
        if (!body.includes('name="file"') || !body.includes(`\r\n\r\n${MODEL}\r\n`)) {
          res.statusCode = 400;
          res.setHeader('content-type', 'application/json');
          res.end(
            JSON.stringify({
              error: { message: 'Missing file or model', type: 'invalid_request_error', param: 'file', code: 'missing_parameter' },
            }),
          );
          return;
        }
        const isStream = /name="stream"\r\n\r\ntrue\r\n/.test(body);
        await acquire();
        try {
          if (isStream) {
            res.setHeader('content-type', 'text/event-stream');
            await sleep(options.serviceMs / 2);
            res.write(`data: ${JSON.stringify({ type: 'transcript.text.delta', delta: 'hello' })}\n\n`);
            await sleep(options.serviceMs / 2);
            res.end(`data: ${JSON.stringify({ type: 'transcript.text.done', text: 'hello world' })}\n\n`);
          } else {
            await sleep(options.serviceMs);
            res.setHeader('content-type', 'application/json');
            res.end(JSON.stringify({ text: 'hello world' }));
          }
        } finally {
          release();
        }
      })();
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function capture(): {
  io: { stdout: { write(s: string): boolean }; stderr: { write(s: string): boolean }; isTTY: boolean };
  out: () => string;
  err: () => string;
} {
  let out = '';
  let err = '';
  return {
    io: {
      stdout: { write: (s: string) => ((out += s), true) },
      stderr: { write: (s: string) => ((err += s), true) },
      isTTY: false,
    },
    out: () => out,
    err: () => err,
  };
}

function within(actual: number, expected: number, tolerance: number): boolean {
  return Math.abs(actual - expected) / expected <= tolerance;
}

describe('voxmux bench against a local server with known capacity', () => {
  const N = 2;
  const serviceMs = 100;
  let dir: string;
  let audioPath: string;
  let serverA: TestServer;
  let serverB: TestServer;
  let resultsA: BenchResults;
  let outA: string;
  let outB: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'voxmux-bench-'));
    audioPath = join(dir, 'quarter-second.wav');
    await writeFile(audioPath, floatWav(noise(4000, 1)));
    serverA = await startServer({ instances: N, serviceMs });
    serverB = await startServer({ instances: 2 * N, serviceMs });
    outA = join(dir, 'run-a');
    outB = join(dir, 'run-b');
  });

  after(async () => {
    await serverA.close();
    await serverB.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("measures throughput min(c, N)/S within 10 % and finds capacity under an SLO (Little's law)", async () => {
    const { io, out, err } = capture();
    const code = await runBenchCli(
      [
        'transcribe',
        '--url',
        serverA.url,
        '--model',
        MODEL,
        '--audio',
        audioPath,
        '--concurrency',
        '1,2,4,8',
        '--reps',
        '1',
        '--duration-s',
        '2',
        '--warmup-s',
        '0.3',
        '--timeout-s',
        '10',
        '--slo',
        'p90<=160ms',
        '--gpu-hour-usd',
        '3.6',
        '--target-rps',
        '100',
        '--scrape-interval-s',
        '0.2',
        '--label',
        'two instances',
        '--out',
        outA,
      ],
      io,
      { shouldHandleSignals: false },
    );
    assert.equal(code, 0, err());
    resultsA = JSON.parse(await readFile(join(outA, 'results.json'), 'utf8')) as BenchResults;
    assert.deepEqual(
      resultsA.steps.map((s) => s.concurrency),
      [1, 2, 4, 8],
    );
    for (const step of resultsA.steps) {
      const c = step.concurrency!;
      const expectedRps = Math.min(c, N) / (serviceMs / 1000);
      assert.equal(step.errors, 0, JSON.stringify(step.errorsByCode));
      assert.ok(within(step.requestsPerSecond, expectedRps, 0.1), `c=${c}: ${step.requestsPerSecond} req/s, expected ${expectedRps}`);
      // Little's law on the client side: L = lambda x W.
      const inSystem = (step.requestsPerSecond * step.latencyMs!.mean) / 1000;
      assert.ok(within(inSystem, c, 0.1), `c=${c}: lambda x W = ${inSystem}`);
      // Each request carried a quarter second of audio.
      assert.ok(within(step.audioSecondsPerSecond!, step.requestsPerSecond / 4, 0.001));
    }
    // Queueing shows in latency and in the server's queue depth above N.
    const [c1, , , c8] = resultsA.steps;
    assert.ok(c8!.latencyMs!.p50 > 3 * c1!.latencyMs!.p50, `p50 ${c1!.latencyMs!.p50} -> ${c8!.latencyMs!.p50}`);
    assert.ok((c8!.server?.queuedMean ?? 0) > 3, `queued ${c8!.server?.queuedMean}`);
    assert.equal(c8!.server?.batchSizeMean, 1);
    assert.equal(resultsA.serverMetrics.state, 'ok');

    // Capacity: p90 <= 160 ms holds up to c = N (100 ms) and fails at 2N (200 ms). p90 rather than
    // p95 keeps one scheduling hiccup on a busy test machine from failing a step.
    const capacity = resultsA.capacity!;
    assert.equal(capacity.basis, 'slo');
    assert.equal(capacity.level, N);
    assert.ok(within(capacity.requestsPerSecond!, N / (serviceMs / 1000), 0.1));
    assert.deepEqual(
      resultsA.steps.map((s) => s.meetsSlo),
      [true, true, false, false],
      JSON.stringify(resultsA.steps.map((s) => s.latencyMs)),
    );
    const usdPerSecond = 3.6 / 3600;
    assert.ok(within(capacity.cost!.perRequestUsd!, usdPerSecond / capacity.requestsPerSecond!, 0.001));
    assert.ok(within(capacity.cost!.perAudioHourUsd!, (usdPerSecond * 3600) / capacity.audioSecondsPerSecond!, 0.001));
    assert.ok(within(capacity.cost!.perCallMinuteUsd!, capacity.cost!.perAudioHourUsd! / 60, 0.001));
    assert.equal(capacity.gpusNeeded, Math.ceil(100 / capacity.requestsPerSecond!));

    // The record says what ran, where and when.
    assert.equal(resultsA.command.slice(0, 3).join(' '), 'voxmux bench transcribe');
    assert.ok(resultsA.machine.cpuCores > 0);
    assert.ok(Date.parse(resultsA.endedAt) > Date.parse(resultsA.startedAt));
    assert.match(out(), /Capacity: .* req\/s/);
    assert.match(out(), /step 4\/4 concurrency 8: /);
  });

  it('abandons requests still queued after a step with --abandon-after-s instead of waiting for them', async () => {
    // One instance at 400 ms per request and 6 clients: at the window's end 5 requests are queued
    // behind the one running, about 2 s of work that the next step would otherwise wait for.
    const slow = await startServer({ instances: 1, serviceMs: 400 });
    try {
      const { io, err } = capture();
      const out = join(dir, 'run-abandon');
      const started = Date.now();
      const code = await runBenchCli(
        [
          'transcribe',
          ...['--url', slow.url, '--model', MODEL, '--audio', audioPath, '--concurrency', '6'],
          ...['--duration-s', '0.5', '--warmup-s', '0', '--timeout-s', '30', '--abandon-after-s', '0.1'],
          ...['--gpu', 'off', '--label', 'abandon', '--out', out, '--commit', 'abc1234'],
        ],
        io,
        { shouldHandleSignals: false },
      );
      assert.equal(code, 0, err());
      const elapsedMs = Date.now() - started;
      const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as BenchResults;
      assert.equal(results.options.abandonAfterMs, 100);
      // --commit: recorded as given, for a tree whose git metadata names another commit.
      assert.equal(results.gitCommit, 'abc1234');
      const [step] = results.steps;
      assert.equal(step!.errors, 0, 'abandoned requests are not errors of the window');
      assert.ok((step!.reps[0]!.late.errorsByCode.abandoned ?? 0) >= 3, JSON.stringify(step!.reps[0]!.late));
      // Waiting for the queue instead would take until about 2.5 s.
      assert.ok(elapsedMs < 2000, `the step ended ${elapsedMs} ms after it began`);
    } finally {
      await slow.close();
    }
  });

  it('writes a CSV that agrees with the JSON, a well-formed SVG plot and a markdown summary', async () => {
    const csv = parseCsv(await readFile(join(outA, 'results.csv'), 'utf8'));
    assert.deepEqual(csv[0], [...CSV_COLUMNS]);
    const rows = csv.slice(1);
    assert.equal(rows.length, resultsA.steps.length);
    const cell = (row: string[], column: (typeof CSV_COLUMNS)[number]): string => row[CSV_COLUMNS.indexOf(column)]!;
    rows.forEach((row, i) => {
      const step = resultsA.steps[i]!;
      assert.equal(Number(cell(row, 'concurrency')), step.concurrency);
      assert.equal(Number(cell(row, 'requests')), step.requests);
      assert.equal(Number(cell(row, 'ok')), step.ok);
      assert.equal(Number(cell(row, 'requests_per_second')), step.requestsPerSecond);
      assert.equal(Number(cell(row, 'audio_seconds_per_second')), step.audioSecondsPerSecond);
      assert.equal(Number(cell(row, 'latency_p50_ms')), step.latencyMs!.p50);
      assert.equal(Number(cell(row, 'latency_p95_ms')), step.latencyMs!.p95);
      assert.equal(Number(cell(row, 'latency_max_ms')), step.latencyMs!.max);
      assert.equal(cell(row, 'meets_slo'), String(step.meetsSlo));
      assert.equal(Number(cell(row, 'cost_per_request_usd')), step.cost!.perRequestUsd);
    });

    const svg = await readFile(join(outA, 'plot.svg'), 'utf8');
    assert.ok(svg.length > 1000);
    assert.equal(findXmlError(svg), undefined);
    assert.match(svg, /<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.equal((svg.match(/<polyline /g) ?? []).length, 2, 'one line per panel');
    assert.match(svg, /two instances/);

    const summary = await readFile(join(outA, 'summary.md'), 'utf8');
    assert.match(summary, /^# Bench: two instances/);
    assert.match(summary, /\| conc \| req\/s \|/);
    assert.match(summary, /Capacity: /);
  });

  it('compare prints each run side by side with ratios to the first and plots them together', async () => {
    const run = capture();
    const code = await runBenchCli(
      [
        'transcribe',
        '--url',
        `${serverB.url}/v1`,
        '--model',
        MODEL,
        '--audio',
        audioPath,
        '--concurrency',
        '2,4',
        '--duration-s',
        '1.5',
        '--warmup-s',
        '0.2',
        '--label',
        'four instances',
        '--out',
        outB,
        '--gpu',
        'off',
      ],
      run.io,
      { shouldHandleSignals: false },
    );
    assert.equal(code, 0, run.err());

    const { io, out } = capture();
    const compareDir = join(dir, 'compare');
    const compareCode = await runBenchCli(['compare', join(outA, 'results.json'), join(outB, 'results.json'), '--out', compareDir], io);
    assert.equal(compareCode, 0);
    const text = out();
    assert.match(text, /A = two instances/);
    assert.match(text, /B = four instances/);
    assert.match(text, /B\/A req\/s/);
    // At c = 4, four instances serve twice what two do; B did not run c = 1, so no ratio there.
    const rowOf = (level: number): string => text.split('\n').find((line) => new RegExp(`^${level}\\s`).test(line)) ?? '';
    const ratios = [...rowOf(4).matchAll(/(\d+\.\d\d)x/g)].map((m) => Number(m[1]));
    assert.ok(ratios.length === 2 && within(ratios[0]!, 2, 0.15), rowOf(4));
    assert.equal([...rowOf(1).matchAll(/\d+\.\d\dx/g)].length, 0, rowOf(1));
    const svg = await readFile(join(compareDir, 'compare.svg'), 'utf8');
    assert.equal(findXmlError(svg), undefined);
    assert.equal((svg.match(/<polyline /g) ?? []).length, 4, 'two runs, two panels');
  });

  it('measures time to first byte of streamed (SSE) responses', async () => {
    const { io, err } = capture();
    const out = join(dir, 'stream');
    const code = await runBenchCli(
      [
        'transcribe',
        '--url',
        serverB.url,
        '--model',
        MODEL,
        '--audio',
        dir,
        '--stream',
        '--concurrency',
        '2',
        '--duration-s',
        '1',
        '--warmup-s',
        '0.1',
        '--out',
        out,
        '--gpu',
        'off',
      ],
      io,
      { shouldHandleSignals: false },
    );
    assert.equal(code, 0, err());
    const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as BenchResults;
    const step = results.steps[0]!;
    assert.equal(results.workload.isStreaming, true);
    assert.ok(step.ttfbMs !== undefined && step.ttfbMs.count === step.ok);
    assert.ok(step.ttfbMs.p50 >= serviceMs * 0.4 && step.ttfbMs.p50 < serviceMs * 0.9, `ttfb p50 ${step.ttfbMs.p50}`);
    assert.ok(step.latencyMs!.p50 >= serviceMs, `latency p50 ${step.latencyMs!.p50}`);
  });

  it('open loop above capacity holds throughput at N/S while latency collapses', async () => {
    const { io, err } = capture();
    const out = join(dir, 'open');
    const capacityRps = N / (serviceMs / 1000);
    const code = await runBenchCli(
      [
        'transcribe',
        '--url',
        serverA.url,
        '--model',
        MODEL,
        '--audio',
        audioPath,
        '--rate',
        '5,40',
        '--duration-s',
        '1.5',
        '--warmup-s',
        '0.2',
        '--max-outstanding',
        '20',
        '--seed',
        '5',
        '--out',
        out,
        '--gpu',
        'off',
      ],
      io,
      { shouldHandleSignals: false },
    );
    assert.equal(code, 0, err());
    const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as BenchResults;
    const [low, high] = results.steps;
    assert.equal(results.mode, 'open');
    assert.ok(low!.requestsPerSecond < capacityRps * 0.7, `low ${low!.requestsPerSecond}`);
    assert.ok(within(high!.requestsPerSecond, capacityRps, 0.1), `high ${high!.requestsPerSecond}`);
    assert.ok(high!.latencyMs!.p95 > 4 * low!.latencyMs!.p95, `p95 ${low!.latencyMs!.p95} -> ${high!.latencyMs!.p95}`);
    // The client never holds more than --max-outstanding requests: the excess is dropped and counted.
    assert.ok(high!.droppedArrivals > 0);
    assert.equal(low!.droppedArrivals, 0);
  });

  it('stops promptly when interrupted, writes the results so far and exits 130', async () => {
    const { io, err } = capture();
    const out = join(dir, 'interrupted');
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), 500);
    const startedMs = performance.now();
    const code = await runBenchCli(
      [
        'transcribe',
        '--url',
        serverA.url,
        '--model',
        MODEL,
        '--audio',
        audioPath,
        '--concurrency',
        '4,8',
        '--duration-s',
        '60',
        '--warmup-s',
        '0',
        '--out',
        out,
        '--gpu',
        'off',
      ],
      io,
      { shouldHandleSignals: false, signal: controller.signal },
    );
    clearTimeout(timer);
    assert.equal(code, 130);
    assert.ok(performance.now() - startedMs < 3000);
    assert.match(err(), /Bench interrupted/);
    const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as BenchResults;
    assert.equal(results.steps.length, 1);
    assert.equal(results.steps[0]!.reps[0]!.isInterrupted, true);
    const rep = results.steps[0]!.reps[0]!;
    assert.ok(rep.late.errorsByCode.interrupted! > 0, JSON.stringify(rep.late));
    assert.equal(rep.errors, 0, 'interrupted requests are not counted as server errors');
    assert.ok(rep.windowMs >= 400 && rep.windowMs < 1000, `window ${rep.windowMs}`);
    assert.ok(within(rep.requestsPerSecond, N / (serviceMs / 1000), 0.25), `${rep.requestsPerSecond} req/s`);
  });
});

describe('voxmux bench failure handling', () => {
  let dir: string;
  let audioPath: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'voxmux-bench-fail-'));
    audioPath = join(dir, 'a.wav');
    await writeFile(audioPath, floatWav(noise(1600, 2)));
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('exits 2 quickly with a clear message when the server cannot be reached', async () => {
    const probe = http.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const { io, err } = capture();
    const startedMs = performance.now();
    const code = await runBenchCli(
      [
        'transcribe',
        '--url',
        `http://127.0.0.1:${port}`,
        '--model',
        MODEL,
        '--audio',
        audioPath,
        '--concurrency',
        '1,2',
        '--duration-s',
        '30',
        '--out',
        join(dir, 'unreachable'),
      ],
      io,
      { shouldHandleSignals: false },
    );
    assert.equal(code, 2);
    assert.ok(performance.now() - startedMs < 5000);
    assert.match(err(), /Cannot reach URL: http:\/\/127\.0\.0\.1:\d+\/v1\/models: ECONNREFUSED/);
  });

  it('exits 1 with the error codes when every request fails, stopping after the first level', async () => {
    const server = await startServer({ instances: 1, serviceMs: 1, isFailing: true });
    try {
      const { io, err } = capture();
      const out = join(dir, 'failing');
      const startedMs = performance.now();
      const code = await runBenchCli(
        [
          'transcribe',
          '--url',
          server.url,
          '--model',
          MODEL,
          '--audio',
          audioPath,
          '--concurrency',
          '1,2,4',
          '--duration-s',
          '0.5',
          '--warmup-s',
          '0',
          '--out',
          out,
          '--gpu',
          'off',
        ],
        io,
        { shouldHandleSignals: false },
      );
      assert.equal(code, 1);
      assert.ok(performance.now() - startedMs < 5000);
      assert.match(err(), /Bench failed: no request succeeded against .*: every request failed at concurrency 1: 500 internal_error x\d+/);
      const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as BenchResults;
      assert.equal(results.steps.length, 1);
      assert.match(results.stoppedEarly ?? '', /500 internal_error/);
    } finally {
      await server.close();
    }
  });

  it('exits 2 on bad arguments without sending anything', async () => {
    const { io, err } = capture();
    assert.equal(
      await runBenchCli(['transcribe', '--url', 'http://127.0.0.1:9', '--model', MODEL, '--audio', audioPath, '--concurrency', '0'], io),
      2,
    );
    assert.match(err(), /Expected each --concurrency value to be an integer from 1 to 10000: got 0/);
    assert.equal(await runBenchCli(['transcribe', '--model', MODEL], capture().io), 2);
    assert.equal(await runBenchCli(['frobnicate'], capture().io), 2);
  });
});
