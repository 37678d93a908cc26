/**
 * Where the server's own CPU goes per 45 s upload, without a GPU: the whole server (gateway,
 * scheduler, supervisor, a Python host) with the `test` engine, which answers at once, driven with
 * 45 s 16 kHz WAV uploads (1.44 MB) over HTTP, the server running under `node --cpu-prof`.
 *
 * Reports, per load level: requests/s, the server's event-loop busy share (`srv loop %`, from
 * voxmux_event_loop_busy_seconds_total) and what that makes per request on the one JavaScript
 * thread; then the CPU profile's self time by package (node internals, each dependency, each voxmux
 * component, the garbage collector), per request. The loop share bounds any configuration: a GPU
 * model cannot be served faster than the gateway takes uploads in.
 *
 * Usage: npm run build && npx tsx bench/gateway-cpu.ts [--levels 4,16] [--duration-s 8] [--out bench/results]
 * Writes gateway-cpu-<date>.json and .md under --out; the bench runs' files and the profile go to bench/out/gateway-cpu/.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { runBenchCli } from './cli/cli.js';
import { startVoxmux } from './start-voxmux.js';
import { parsePrometheusText } from './cli/metrics-scraper.js';
import { encodeWav } from '../src/gateway/audio/wav-builder.js';

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '4,16' },
    'duration-s': { type: 'string', default: '8' },
    out: { type: 'string', default: 'bench/results' },
  },
});
const levels = values.levels!;
const durationS = Number(values['duration-s']);
const outDir = resolve(values.out!);
const work = resolve('bench/out/gateway-cpu');
rmSync(work, { recursive: true, force: true });
mkdirSync(join(work, 'profile'), { recursive: true });
const date = new Date().toISOString().slice(0, 10);
const port = 8211;

/** 45 s of 16 kHz mono 16-bit noise (seeded): the test engine does not listen, the gateway does not care. */
function clip45s(): string {
  const samples = new Float32Array(45 * 16_000);
  let state = 12345;
  for (let i = 0; i < samples.length; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    samples[i] = (state / 2 ** 31 - 0.5) * 0.25;
  }
  const path = join(work, 'clip45.wav');
  writeFileSync(path, encodeWav({ sampleRateHz: 16_000, encoding: 's16', channelData: [samples] }));
  return path;
}

interface Step {
  level: number;
  requestsPerSecond: number;
  latencyMs?: { p50: number; p95: number };
  server?: { batchSizeMean?: number; loopBusyPercent?: number; cpuPercent?: number; batchSendMsMean?: number };
}

const config = {
  scheduler: { lengthBucketsMs: [45_000], maxRunningBatchesPerInstance: 3 },
  models: { parakeet: { adapter: 'test', instances: 1, maxBatchSize: 32, maxQueueDelayMs: 5, dispatchWhenIdle: true } },
};
const stopServer = await startVoxmux({
  config,
  port,
  workDir: work,
  nodeArgs: ['--cpu-prof', '--cpu-prof-dir', join(work, 'profile')],
  env: { ...process.env, VOXMUX_SUPERVISOR_PYTHON_PATH: process.env.VOXMUX_SUPERVISOR_PYTHON_PATH ?? '/usr/bin/python3' },
});
const runDir = join(work, 'run');
const code = await runBenchCli(
  [
    'transcribe',
    ...['--url', `http://127.0.0.1:${port}`, '--model', 'parakeet', '--audio', clip45s()],
    ...['--concurrency', levels, '--duration-s', String(durationS), '--warmup-s', '2', '--scrape-interval-s', '0.5'],
    ...['--out', runDir, '--label', 'gateway-cpu', '--gpu', 'off'],
  ],
  { isTTY: false },
);
// Every upload of the run, warmups included, went through the profiled process: count them all.
const exposition = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
const uploads = parsePrometheusText(exposition)
  .filter((m) => m.name === 'voxmux_gateway_calls_total' && m.labels.endpoint === '/v1/audio/transcriptions')
  .reduce((n, m) => n + m.value, 0);
await stopServer();
if (code !== 0) throw new Error(`bench exited ${code}`);
const steps = (JSON.parse(readFileSync(join(runDir, 'results.json'), 'utf8')) as { steps: Step[] }).steps;

// ---- the profile: the main thread's self time by package
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
}
const profileFile = readdirSync(join(work, 'profile')).find((f) => f.endsWith('.cpuprofile'));
if (profileFile === undefined) throw new Error('the server wrote no CPU profile');
const profile = JSON.parse(readFileSync(join(work, 'profile', profileFile), 'utf8')) as {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
};
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
function packageOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (url === '') return functionName.startsWith('(') ? functionName : `(native) ${functionName}`;
  if (url.startsWith('node:')) return url.startsWith('node:internal/') ? `node:internal/${url.split('/')[1]}` : url;
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const parts = url.slice(modules + '/node_modules/'.length).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  const dist = url.indexOf('/dist/');
  // dist/src/<component>/... for the server, dist/bench/cli/... for the bench.
  return dist >= 0
    ? `voxmux ${
        url
          .slice(dist + '/dist/'.length)
          .replace(/^src\//, '')
          .split('/')[0]
      }`
    : url;
}
const byPackage = new Map<string, number>();
for (const node of profile.nodes) {
  const us = selfUs.get(node.id) ?? 0;
  if (us > 0) byPackage.set(packageOf(node.callFrame), (byPackage.get(packageOf(node.callFrame)) ?? 0) + us);
}
byPackage.delete('(idle)');
const busyUs = [...byPackage.values()].reduce((a, b) => a + b, 0);
const top = [...byPackage.entries()].sort((a, b) => b[1] - a[1]);
const shown = top.slice(0, 16);
const restUs = top.slice(16).reduce((n, [, us]) => n + us, 0);
const perUpload = (us: number) => us / 1000 / Math.max(1, uploads);

const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
const command = `npx tsx bench/gateway-cpu.ts --levels ${levels} --duration-s ${durationS}`;
const machine = `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
const loopMsPerRequest = (s: Step) =>
  s.server?.loopBusyPercent === undefined || s.requestsPerSecond === 0 ? undefined : (10 * s.server.loopBusyPercent) / s.requestsPerSecond;
const md = [
  `# Gateway CPU per 45 s upload, ${date}`,
  '',
  `- machine: ${machine}; the bench client and the Python host share it with the server`,
  `- commit: ${commit}`,
  `- command: \`${command}\``,
  '- server: the `test` engine (answers at once), 1 instance, batches of up to 32, 3 in flight;',
  `  45 s 16 kHz 16-bit mono WAV uploads (1.44 MB), closed loop, ${durationS} s measured per level after 2 s warmup`,
  '',
  '## Load',
  '',
  '| clients | requests/s | p50 ms | p95 ms | mean batch | batch send ms | srv loop % | server CPU % of a core | loop ms per request |',
  '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ...steps.map(
    (s) =>
      `| ${s.level} | ${s.requestsPerSecond.toFixed(1)} | ${s.latencyMs?.p50.toFixed(0) ?? '-'} | ${s.latencyMs?.p95.toFixed(0) ?? '-'} | ${s.server?.batchSizeMean?.toFixed(2) ?? '-'} | ${s.server?.batchSendMsMean ?? '-'} | ${s.server?.loopBusyPercent ?? '-'} | ${s.server?.cpuPercent ?? '-'} | ${loopMsPerRequest(s)?.toFixed(2) ?? '-'} |`,
  ),
  '',
  "`loop ms per request` is the loop's busy share over the requests per second: the main thread's",
  "time per upload, so 1000 / it is the most uploads per second this machine's server thread takes.",
  '',
  `## The main thread's CPU profile: ${(busyUs / 1e6).toFixed(2)} s busy over ${uploads} uploads (startup included)`,
  '',
  '| where (self time) | ms per upload | share |',
  '| --- | ---: | ---: |',
  ...shown.map(([key, us]) => `| ${key} | ${perUpload(us).toFixed(3)} | ${((100 * us) / busyUs).toFixed(1)} % |`),
  `| everything else | ${perUpload(restUs).toFixed(3)} | ${((100 * restUs) / busyUs).toFixed(1)} % |`,
  `| **total** | **${perUpload(busyUs).toFixed(3)}** | 100 % |`,
  '',
];
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, `gateway-cpu-${date}.md`), md.join('\n'));
writeFileSync(
  join(outDir, `gateway-cpu-${date}.json`),
  JSON.stringify(
    {
      date,
      machine,
      commit,
      command,
      steps,
      profile: { uploads, busyMs: busyUs / 1000, selfMsByPlace: Object.fromEntries(top.map(([k, us]) => [k, us / 1000])) },
    },
    null,
    2,
  ),
);
process.stdout.write(md.join('\n'));
