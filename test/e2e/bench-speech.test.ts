/**
 * `voxmux bench speech` against a real HTTP server on loopback: a test double of the speech route
 * that streams scripted 24 kHz PCM in chunks, faster than real time, except for one voice whose
 * stream pauses longer than the audio already sent lasts (a stall on the listener's side), and that
 * keeps two voices resident so that other voices count as loads from disk in its /metrics. Every
 * run is short and bounded.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBenchCli } from '../../bench/cli/cli.js';
import { CSV_COLUMNS, type BenchResults } from '../../bench/cli/report.js';
import { parseCsv } from '../support/csv.js';
import { findXmlError } from '../support/xml-check.js';

const MODEL = 'tts-test';
/** Half a second of 24 kHz 16-bit mono PCM: a false stall would need a 500 ms hiccup on the machine. */
const CHUNK_BYTES = 24_000;
const CHUNKS = 3;
const CHUNK_GAP_MS = 10;
/** The stalling voice pauses this long after its first two chunks (one second of audio): a 400 ms stall. */
const STALL_PAUSE_MS = 1400;
const STALLING_VOICE = 'v3';

interface SpeechServer {
  url: string;
  bodies: Array<Record<string, unknown>>;
  close: () => Promise<void>;
}

async function startSpeechServer(): Promise<SpeechServer> {
  const bodies: Array<Record<string, unknown>> = [];
  const resident: string[] = [];
  const loads = { disk: 0, host: 0 };
  let hits = 0;
  let evictions = 0;
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
  const useVoice = (voice: string): void => {
    const at = resident.indexOf(voice);
    if (at !== -1) {
      hits += 1;
      resident.splice(at, 1);
    } else {
      loads.disk += 1;
      if (resident.length >= 2) {
        resident.shift();
        evictions += 1;
      }
    }
    resident.push(voice);
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        if (req.method === 'GET' && req.url === '/v1/models') {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model' }] }));
          return;
        }
        if (req.method === 'GET' && req.url === '/metrics') {
          res.setHeader('content-type', 'text/plain; version=0.0.4');
          res.end(
            [
              `voxmux_instance_resource_loads_total{model="${MODEL}",instance_index="0",source="disk"} ${loads.disk}`,
              `voxmux_instance_resource_loads_total{model="${MODEL}",instance_index="0",source="host"} ${loads.host}`,
              `voxmux_instance_resource_hits_total{model="${MODEL}",instance_index="0"} ${hits}`,
              `voxmux_instance_resource_misses_total{model="${MODEL}",instance_index="0"} ${loads.disk + loads.host}`,
              `voxmux_instance_resource_evictions_total{model="${MODEL}",instance_index="0"} ${evictions}`,
              `voxmux_instance_resource_resident_bytes{model="${MODEL}",instance_index="0"} ${resident.length * 1000}`,
              `voxmux_instance_resource_budget_bytes{model="${MODEL}",instance_index="0"} 2000`,
              '',
            ].join('\n'),
          );
          return;
        }
        if (req.method !== 'POST' || req.url !== '/v1/audio/speech') {
          res.statusCode = 404;
          res.end();
          return;
        }
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
        bodies.push(body);
        if (body.voice === 'refused') {
          res.statusCode = 400;
          res.setHeader('content-type', 'application/json');
          res.end(
            JSON.stringify({ error: { message: 'Unknown voice', type: 'invalid_request_error', param: 'voice', code: 'unknown_voice' } }),
          );
          return;
        }
        useVoice(String(body.voice));
        res.setHeader('content-type', 'audio/pcm');
        for (let i = 0; i < CHUNKS; i += 1) {
          if (i === 2 && body.voice === STALLING_VOICE) await sleep(STALL_PAUSE_MS);
          else if (i > 0) await sleep(CHUNK_GAP_MS);
          res.write(Buffer.alloc(CHUNK_BYTES, i));
        }
        res.end();
      })();
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    bodies,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function capture() {
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

const RUN_FLAGS = ['--concurrency', '1,4', '--duration-s', '2.5', '--warmup-s', '0.2', '--timeout-s', '10', '--gpu', 'off'];

describe('voxmux bench speech against a local chunked-PCM speech server', () => {
  let dir: string;
  let server: SpeechServer;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'voxmux-bench-speech-'));
    server = await startSpeechServer();
  });

  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('measures first byte, real-time factor, stalls, audio per second and disk loads per call, and writes every output', async () => {
    const out = join(dir, 'mixed');
    const run = capture();
    const argv = ['speech', '--url', server.url, '--model', MODEL, '--voice-prefix', 'v', '--voice-count', '4', '--mix', 'zipf'];
    const code = await runBenchCli([...argv, '--zipf-s', '0.5', '--label', 'mixed', '--out', out, ...RUN_FLAGS], run.io, {
      shouldHandleSignals: false,
    });
    assert.equal(code, 0, run.err());
    const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as BenchResults;
    assert.equal(results.workload.kind, 'speech');
    assert.equal(results.workload.endpoint, `${server.url}/v1/audio/speech`);
    assert.deepEqual(results.command.slice(0, 3), ['voxmux', 'bench', 'speech']);
    assert.deepEqual(results.options.slo, ['ttfb_p95<=250ms', 'stalls<=0%', 'errors<=1%']);
    // Every call asked for streamed PCM in one of the four voices.
    for (const body of server.bodies) {
      assert.equal(body.model, MODEL);
      assert.equal(body.response_format, 'pcm');
      assert.equal(body.stream_format, 'audio');
      assert.ok(['v0', 'v1', 'v2', 'v3'].includes(String(body.voice)), String(body.voice));
      assert.ok(typeof body.input === 'string' && body.input.length > 0);
    }
    const voices = new Set(server.bodies.map((body) => body.voice));
    assert.ok(voices.has(STALLING_VOICE) && voices.size >= 3, [...voices].join(','));

    let stalled = 0;
    let calls = 0;
    for (const step of results.steps) {
      assert.equal(step.errors, 0, JSON.stringify(step.errorsByCode));
      assert.ok(step.ok > 0);
      // A call is 1.5 s of audio; every answer played from its first byte.
      assert.equal(step.playback?.calls, step.ok);
      assert.ok(step.audioSecondsPerSecond! > 0);
      assert.ok(step.ttfbMs!.p50 < 200, `ttfb ${step.ttfbMs!.p50}`);
      assert.ok(step.rtf!.p50 < 0.5, `rtf ${step.rtf!.p50}`);
      // Only the stalling voice stalls, once a call, by about the pause less the half second it had.
      stalled += step.playback!.callsWithStall;
      calls += step.playback!.calls;
      if (step.playback!.callsWithStall > 0) {
        const perStall = step.playback!.stalledSeconds / step.playback!.stalls;
        assert.ok(perStall > 0.1 && perStall < 1.2, `stalled ${perStall} s per stall`);
      }
      assert.ok(step.resourceLoadsPerCall !== undefined, 'loads per call');
      assert.ok(step.resourceLoadsPerCall.fromDisk > 0, `disk/call ${step.resourceLoadsPerCall.fromDisk}`);
      assert.equal(step.resourceLoadsPerCall.fromHost, 0);
      assert.equal(step.server?.resourceBudgetBytes, 2000);
    }
    assert.ok(stalled > 0 && stalled < calls, `${stalled} of ${calls} calls stalled`);
    assert.equal(results.capacity?.rankedBy, 'level');

    const csv = parseCsv(await readFile(join(out, 'results.csv'), 'utf8'));
    assert.deepEqual(csv[0], [...CSV_COLUMNS]);
    assert.equal(csv.length, 1 + results.steps.length);
    const svg = await readFile(join(out, 'plot.svg'), 'utf8');
    assert.equal(findXmlError(svg), undefined);
    assert.match(svg, /First byte p95/);
    const summary = await readFile(join(out, 'summary.md'), 'utf8');
    assert.match(summary, /speech \(streamed\)/);
    assert.match(summary, /stalled calls/);
    assert.match(run.out(), /Capacity: /);
  });

  it('finds the most streams without stalls, and compares two speech runs side by side', async () => {
    const run = capture();
    const out = join(dir, 'steady');
    const code = await runBenchCli(
      ['speech', '--url', server.url, '--model', MODEL, '--voices', 'v0,v1', '--label', 'steady', '--out', out, ...RUN_FLAGS],
      run.io,
      { shouldHandleSignals: false },
    );
    assert.equal(code, 0, run.err());
    const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as BenchResults;
    for (const step of results.steps) assert.equal(step.playback?.callsWithStall, 0);
    // Two voices fit the server's two resident slots: after the first calls, no disk loads.
    assert.equal(results.steps.at(-1)?.resourceLoadsPerCall?.fromDisk, 0);
    assert.equal(results.capacity?.level, 4);

    const compare = capture();
    const compareOut = join(dir, 'compare');
    const compareCode = await runBenchCli(
      ['compare', join(dir, 'mixed', 'results.json'), join(out, 'results.json'), '--out', compareOut],
      compare.io,
      { shouldHandleSignals: false },
    );
    assert.equal(compareCode, 0, compare.err());
    assert.match(compare.out(), /^streams\s+A audio s\/s/m);
    assert.match(compare.out(), /B: 4 streams within ttfb_p95<=250ms, stalls<=0%, errors<=1%/);
    const markdown = await readFile(join(compareOut, 'compare.md'), 'utf8');
    assert.match(markdown, /B\/A audio s\/s/);
  });

  it('exits 1 naming the error code when every call is refused', async () => {
    const run = capture();
    const code = await runBenchCli(
      ['speech', '--url', server.url, '--model', MODEL, '--voices', 'refused', '--out', join(dir, 'refused'), ...RUN_FLAGS],
      run.io,
      { shouldHandleSignals: false },
    );
    assert.equal(code, 1);
    assert.match(run.err(), /400 unknown_voice x\d+/);
  });
});
