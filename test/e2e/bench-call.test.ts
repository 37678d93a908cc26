/**
 * `voxmux bench call` (#19) against the real server on loopback with the CPU engines (pocketsphinx
 * hears, Debian voices speak and also voice the callers) and the bench's own fake LLM: a short ramp
 * of 1 and 2 concurrent calls, each hanging up after two turns. The figures are not judged (this
 * machine is not a benchmark machine); what is checked is that every turn's stages are measured,
 * that the LLM's own time is the fake LLM's delay and is taken out of the ttfb, that callers are
 * understood, and that calls hang up and call again.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBenchCli } from '../../bench/cli/cli.js';
import type { BenchResults } from '../../bench/cli/report.js';
import { buildServer, type Server } from '../../src/app/build-server.js';
import { systemClock } from '../../src/core/clock.js';
import { readProcessEnvironment } from '../../src/config/env.js';
import { loadConfig } from '../../src/config/load.js';
import { spawnInstance } from '../../src/supervisor/index.js';
import { silentLogger } from '../support/test-logger.js';

const FIRST_TOKEN_MS = 120;

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

let server: Server;
let url: string;
let llmPort: number;
/** The callers' speech the first test saved, for the test that reads it back. */
let savedUtterances: string | undefined;

before(async () => {
  llmPort = await freePort();
  const llmUrl = `http://127.0.0.1:${llmPort}/v1`;
  const config = loadConfig({
    file: {
      models: {
        'pocketsphinx-en-us': { adapter: 'pocketsphinx', instances: 1 },
        'voxmux-speech-cpu': { adapter: 'debian-voices', aliases: ['tts-1'], instances: 1 },
      },
      realtime: { partialIntervalMs: 0, gpuHourUsd: 2, llm: { baseUrl: llmUrl, allowedBaseUrls: [llmUrl], model: 'fake-llm' } },
    },
  });
  server = await buildServer(config, { log: silentLogger(), clock: systemClock, spawn: spawnInstance, baseEnv: readProcessEnvironment() });
  await server.startInstances();
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
});

after(() => server?.destroy());

function io() {
  let text = '';
  const write = (chunk: string) => ((text += chunk), true);
  return { io: { stdout: { write }, stderr: { write }, isTTY: false }, output: () => text };
}

/** `voxmux bench call` against the test server and its fake-LLM port, into a fresh folder. */
async function benchCall(args: string[]) {
  const dir = await mkdtemp(join(tmpdir(), 'voxmux-bench-call-'));
  const out = io();
  const code = await runBenchCli(['call', '--url', url, '--fake-llm', String(llmPort), ...args, '--out', dir], out.io);
  return { dir, out, code };
}

describe('voxmux bench call (#19)', () => {
  it('ramps calls through the realtime API and times every turn from the end of the caller’s speech', async () => {
    const saved = join(await mkdtemp(join(tmpdir(), 'voxmux-bench-call-')), 'utterances');
    const { dir, out, code } = await benchCall([
      '--llm-first-token-ms',
      String(FIRST_TOKEN_MS),
      '--llm-reply',
      'Sure. Anything else?',
      '--voices',
      'alloy',
      '--turns-per-call',
      '2',
      '--think-ms',
      '200-400',
      '--concurrency',
      '1,2',
      '--duration-s',
      '10',
      '--warmup-s',
      '1',
      '--gpu-hour-usd',
      '2',
      '--llm-output-usd-per-m',
      '10',
      '--save-utterances',
      saved,
    ]);
    assert.equal(code, 0, out.output());
    savedUtterances = saved;
    const results = JSON.parse(await readFile(join(dir, 'results.json'), 'utf8')) as BenchResults;
    assert.equal(results.workload.kind, 'call');
    assert.deepEqual(
      results.steps.map((s) => s.level),
      [1, 2],
    );
    for (const step of results.steps) {
      assert.equal(step.errors, 0, JSON.stringify(step.errorsByCode));
      assert.ok(step.ok >= 1, `level ${step.level}: no turn finished in the window`);
      const stages = step.stagesMs!;
      for (const name of ['transcript', 'first_audio', 'llm_first_token', 'first_audio_ex_llm']) assert.ok(stages[name], `${name} missing`);
      // The fake LLM's own delay, measured at the fake LLM, is taken out of the ttfb. Its timer may
      // fire up to a millisecond early (libuv's millisecond clock) and late by however busy this
      // machine is; what must not be in it is the transcript (pocketsphinx, >= 500 ms of VAD silence).
      const llm = stages.llm_first_token!.p50;
      assert.ok(llm >= FIRST_TOKEN_MS - 1, `llm_first_token p50 ${llm} ms, the fake LLM waits ${FIRST_TOKEN_MS}`);
      assert.ok(llm < FIRST_TOKEN_MS + stages.transcript!.p50, `llm_first_token p50 ${llm} ms, transcript ${stages.transcript!.p50}`);
      assert.ok(stages.first_audio!.p50 > stages.transcript!.p50);
      assert.equal(step.ttfbMs!.p50, stages.first_audio_ex_llm!.p50);
    }
    const notes = results.notes.join('\n');
    const wer = /WER ([\d.]+) % over (\d+) turns \((\d+) calls opened\)/.exec(notes);
    assert.ok(wer !== null, notes);
    assert.ok(Number(wer[1]) <= 25, `callers misheard: ${notes}`);
    assert.ok(Number(wer[3]) >= 2, 'calls hang up after their turns and call again');
    assert.match(notes, /Calls held at the SLO|Cost of a 5-minute call/);
    const summary = await readFile(join(dir, 'summary.md'), 'utf8');
    assert.match(summary, /## Stages \(ms, p50 \/ p95\)/);
  });

  it('calls with saved utterances instead of synthesizing them', async () => {
    assert.ok(savedUtterances !== undefined, 'the first test saves them');
    const { dir, out, code } = await benchCall([
      '--utterances',
      savedUtterances,
      '--llm-reply',
      'Sure.',
      '--think-ms',
      '200-400',
      '--concurrency',
      '1',
      '--duration-s',
      '10',
      '--warmup-s',
      '0',
    ]);
    assert.equal(code, 0, out.output());
    assert.match(out.output(), /Read \d+ caller utterances from /);
    assert.doesNotMatch(out.output(), /Synthesizing/);
    const results = JSON.parse(await readFile(join(dir, 'results.json'), 'utf8')) as BenchResults;
    assert.equal(results.steps[0]!.errors, 0);
    assert.ok(results.steps[0]!.ok >= 1, 'a turn finished in the window');
  });

  it('stops with a clear error when the fake LLM’s port is taken', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(llmPort, '127.0.0.1', resolve));
    const out = io();
    const code = await runBenchCli(
      ['call', '--url', url, '--fake-llm', String(llmPort), '--voices', 'alloy', '--concurrency', '1'],
      out.io,
    );
    await new Promise<void>((resolve) => taken.close(() => resolve()));
    assert.equal(code, 2, out.output());
    assert.match(out.output(), /Expected --fake-llm 127\.0\.0\.1:\d+ to be free to listen on: EADDRINUSE/);
  });

  it('stops with a clear error when the server cannot voice the callers', async () => {
    const out = io();
    const code = await runBenchCli(
      ['call', '--url', url, '--speech-model', 'no-such-model', '--concurrency', '1', '--duration-s', '1'],
      out.io,
    );
    assert.equal(code, 2, out.output());
    assert.match(out.output(), /synthesize .* 404 model_not_found/);
  });
});
