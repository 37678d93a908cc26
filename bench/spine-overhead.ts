/**
 * Serving-spine benchmark, run on the developer/CI-class machine (no GPU):
 *
 *  1. Gateway + scheduler overhead: 10 s WAV uploads to the test engine answering at once (2
 *     instances), at 1 and 64 concurrent clients, side by side with a baseline server that only
 *     receives the same multipart upload and answers (fastify + @fastify/multipart, nothing else).
 *     The difference is what voxmux adds: decoding, queueing, batching, the instance round trip.
 *  2. The CPU default engine (pocketsphinx, 2 instances): audio seconds transcribed per wall second.
 *
 * Usage: npx tsx bench/spine-overhead.ts [--duration-s 10] [--out bench/results]
 * Writes spine-overhead-<date>.json and .md under --out; each bench run's files go to bench/out/spine/.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import multipart from '@fastify/multipart';
import Fastify from 'fastify';
import { runBenchCli } from './cli/cli.js';
import { startVoxmux } from './start-voxmux.js';

const { values } = parseArgs({
  options: { 'duration-s': { type: 'string', default: '10' }, out: { type: 'string', default: 'bench/results' } },
});
const durationS = Number(values['duration-s']);
const outDir = resolve(values.out!);
const runsDir = resolve('bench/out/spine');
mkdirSync(runsDir, { recursive: true });
const work = mkdtempSync(join(tmpdir(), 'voxmux-bench-'));
const date = new Date().toISOString().slice(0, 10);

function wav10s(): string {
  // 10 s of 16 kHz 16-bit mono speech-like audio: flite speech repeated to 10 s.
  const speech = join(work, 'speech.wav');
  execFileSync('flite', ['-voice', 'slt', '-t', 'the quick brown fox jumped over the lazy dog while the band played on', '-o', speech]);
  const path = join(work, 'clip10s.wav');
  execFileSync('ffmpeg', [
    '-loglevel',
    'error',
    '-y',
    '-stream_loop',
    '-1',
    '-i',
    speech,
    '-t',
    '10',
    '-ar',
    '16000',
    '-ac',
    '1',
    '-c:a',
    'pcm_s16le',
    path,
  ]);
  return path;
}

async function startBaseline(port: number): Promise<() => Promise<void>> {
  const app = Fastify({ bodyLimit: 30 * 1024 * 1024 });
  await app.register(multipart, { limits: { fileSize: 25 * 1024 * 1024 } });
  app.post('/v1/audio/transcriptions', async (request) => {
    for await (const part of request.parts()) if (part.type === 'file') await part.toBuffer();
    return { text: 'baseline' };
  });
  app.get('/v1/models', async () => ({ object: 'list', data: [{ id: 'echo', object: 'model' }] }));
  await app.listen({ host: '127.0.0.1', port });
  return () => app.close();
}

interface StepSummary {
  level: number;
  requestsPerSecond: number;
  audioSecondsPerSecond?: number;
  latencyMs?: { p50: number; p99: number; mean: number };
  errorRate: number;
  server?: { batchSizeMean?: number };
  client?: { cpuPercentMax?: number };
}

async function bench(label: string, port: number, model: string, audio: string, levels: string): Promise<StepSummary[]> {
  const out = join(runsDir, `${date}-${label}`);
  const code = await runBenchCli(
    [
      'transcribe',
      '--url',
      `http://127.0.0.1:${port}`,
      '--model',
      model,
      '--audio',
      audio,
      '--concurrency',
      levels,
      '--duration-s',
      String(durationS),
      '--warmup-s',
      '2',
      '--out',
      out,
      '--label',
      label,
      '--gpu',
      'off',
    ],
    { isTTY: false },
  );
  if (code !== 0) throw new Error(`bench ${label} exited ${code}`);
  const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as { steps: StepSummary[] };
  return results.steps;
}

const clip = wav10s();
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
const command = `npx tsx bench/spine-overhead.ts --duration-s ${durationS}`;

const stopBaseline = await startBaseline(8201);
const baseline = await bench('baseline-multipart', 8201, 'echo', clip, '1,64');
await stopBaseline();

const stopEcho = await startVoxmux({
  config: { models: { echo: { adapter: 'test', instances: 2, maxBatchSize: 8, maxQueueDelayMs: 0 } } },
  port: 8202,
  workDir: work,
});
const voxmux = await bench('voxmux-test-engine', 8202, 'echo', clip, '1,64');
await stopEcho();

const stopSphinx = await startVoxmux({
  config: { models: { 'pocketsphinx-en-us': { adapter: 'pocketsphinx', instances: 2, maxBatchSize: 4, maxQueueDelayMs: 5 } } },
  port: 8203,
  workDir: work,
});
const sphinx = await bench('voxmux-pocketsphinx-2', 8203, 'pocketsphinx-en-us', clip, '2,4');
await stopSphinx();

const row = (name: string, s: StepSummary) =>
  `| ${name} | ${s.level} | ${s.requestsPerSecond.toFixed(1)} | ${s.latencyMs?.p50.toFixed(2)} | ${s.latencyMs?.p99.toFixed(2)} | ${(s.errorRate * 100).toFixed(1)} % | ${s.server?.batchSizeMean?.toFixed(2) ?? '-'} |`;
const overhead = voxmux.map((v, i) => ({
  concurrency: v.level,
  p50OverheadMs: (v.latencyMs?.p50 ?? NaN) - (baseline[i]?.latencyMs?.p50 ?? NaN),
  p99OverheadMs: (v.latencyMs?.p99 ?? NaN) - (baseline[i]?.latencyMs?.p99 ?? NaN),
}));
const machine = `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
const md = [
  `# Serving-spine benchmark, ${date}`,
  '',
  `- machine: ${machine}`,
  `- commit: ${commit}`,
  `- command: \`${command}\``,
  `- workload: 10 s 16 kHz 16-bit mono WAV uploads (320 KB), closed loop, ${durationS} s measured per step after 2 s warmup; client and server share the machine`,
  '',
  '## Gateway + scheduler overhead (test engine answering at once, 2 instances, maxBatchSize 8, maxQueueDelayMs 0)',
  '',
  '| server | clients | requests/s | p50 ms | p99 ms | errors | mean batch |',
  '| --- | --- | --- | --- | --- | --- | --- |',
  ...baseline.map((s) => row('baseline: multipart upload only', s)),
  ...voxmux.map((s) => row('voxmux, test engine', s)),
  '',
  '| clients | p50 overhead ms | p99 overhead ms |',
  '| --- | --- | --- |',
  ...overhead.map((o) => `| ${o.concurrency} | ${o.p50OverheadMs.toFixed(2)} | ${o.p99OverheadMs.toFixed(2)} |`),
  '',
  'Overhead is voxmux minus the baseline at the same concurrency: WAV decoding, queueing and',
  'batching, the binary frame to the Python instance and back (including its CRC of the audio),',
  'and response formatting.',
  '',
  '## CPU default engine (pocketsphinx, 2 instances, maxBatchSize 4)',
  '',
  '| clients | requests/s | audio s per wall s | p50 ms | p99 ms | errors |',
  '| --- | --- | --- | --- | --- | --- |',
  ...sphinx.map(
    (s) =>
      `| ${s.level} | ${s.requestsPerSecond.toFixed(2)} | ${s.audioSecondsPerSecond?.toFixed(2) ?? '-'} | ${s.latencyMs?.p50.toFixed(0)} | ${s.latencyMs?.p99.toFixed(0)} | ${(s.errorRate * 100).toFixed(1)} % |`,
  ),
  '',
];
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, `spine-overhead-${date}.md`), md.join('\n'));
writeFileSync(
  join(outDir, `spine-overhead-${date}.json`),
  JSON.stringify({ date, machine, commit, command, baseline, voxmux, overhead, pocketsphinx: sphinx }, null, 2),
);
process.stdout.write(md.join('\n'));
