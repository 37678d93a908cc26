/**
 * The overload run of issue 16: the built server with the `test` engine at a fixed service time
 * (one instance, batches of at most --max-batch requests taking --batch-ms plus --item-ms per
 * request), driven open-loop at --factor times its capacity for --duration-s seconds, every call
 * with a --deadline-ms deadline. Runs it twice, one after the other, each on a fresh server:
 * with admission by predicted completion (the default) and with it off
 * (`scheduler.admissionByPrediction: false`: the queue limit alone, 512 requests, as before issue
 * 16). Reports, side by side, what the callers saw (admitted, refused, 504s, admitted latency, the
 * first 429, Retry-After against the observed drain) and the server's prediction error from its
 * metrics.
 *
 * Usage: npm run build && npx tsx bench/overload.ts [--factor 10] [--duration-s 30] [--deadline-ms 2000]
 *   [--batch-ms 300] [--item-ms 100] [--max-batch 2] [--out bench/results]
 * Writes overload-<date>.md under --out.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { readRunProvenance } from './cli/machine-info.js';
import { parsePrometheusText } from './cli/metrics-scraper.js';
import { driveOverload, summarizeOverload, type OverloadSummary } from './overload-driver.js';
import { startVoxmux } from './start-voxmux.js';
import { encodeWav } from '../src/gateway/audio/wav-builder.js';

const { values } = parseArgs({
  options: {
    factor: { type: 'string', default: '10' },
    'duration-s': { type: 'string', default: '30' },
    'deadline-ms': { type: 'string', default: '2000' },
    'batch-ms': { type: 'string', default: '300' },
    'item-ms': { type: 'string', default: '100' },
    'max-batch': { type: 'string', default: '2' },
    port: { type: 'string', default: '8231' },
    out: { type: 'string', default: 'bench/results' },
  },
});
const factor = Number(values.factor);
const durationMs = Number(values['duration-s']) * 1000;
const deadlineMs = Number(values['deadline-ms']);
const batchDelayMs = Number(values['batch-ms']);
const itemDelayMs = Number(values['item-ms']);
const maxBatchSize = Number(values['max-batch']);
const port = Number(values.port);
const outDir = resolve(values.out!);
// Capacity with full batches: maxBatchSize requests per (batch + maxBatchSize × item) milliseconds.
const capacityPerS = (maxBatchSize * 1000) / (batchDelayMs + maxBatchSize * itemDelayMs);
const ratePerS = capacityPerS * factor;
const startedAtMs = Date.now();

interface Run {
  summary: OverloadSummary;
  /** Mean prediction error (actual - predicted) in seconds, and the requests it is over. */
  errorMeanS: number;
  errorCount: number;
  /** Share of admitted requests whose prediction was within ±0.25 s and ±0.5 s. */
  within025: number;
  within05: number;
}

async function runOnce(admissionByPrediction: boolean): Promise<Run> {
  const stop = await startVoxmux({
    config: {
      scheduler: { admissionByPrediction },
      models: {
        echo: { adapter: 'test', instances: 1, maxBatchSize, maxQueueDelayMs: 20, options: { batchDelayMs, itemDelayMs } },
      },
    },
    port,
    workDir: mkdtempSync(join(tmpdir(), 'voxmux-overload-')),
  });
  const url = `http://127.0.0.1:${port}`;
  let metricsText = '';
  let records;
  try {
    // 0.1 s of quiet 16 kHz 16-bit mono noise: the test engine's cost does not depend on it.
    const samples = new Float32Array(1600).map((_, i) => (((i * 7919) % 200) - 100) / 10_000);
    const wav = new Blob([encodeWav({ sampleRateHz: 16_000, encoding: 's16', channelData: [samples] })]);
    records = await driveOverload({
      url,
      ratePerS,
      durationMs,
      headers: { 'voxmux-deadline-ms': String(deadlineMs) },
      body: () => {
        const form = new FormData();
        form.append('model', 'echo');
        form.append('file', wav, 'a.wav');
        return form;
      },
    });
    metricsText = await (await fetch(`${url}/metrics`)).text();
  } finally {
    await stop();
  }
  const samplesOf = (name: string) => parsePrometheusText(metricsText).filter((s) => s.name === name);
  const errorSumS = samplesOf('voxmux_scheduler_admission_prediction_error_seconds_sum')[0]?.value ?? NaN;
  const errorCount = samplesOf('voxmux_scheduler_admission_prediction_error_seconds_count')[0]?.value ?? NaN;
  const errorBuckets = samplesOf('voxmux_scheduler_admission_prediction_error_seconds_bucket');
  const withinS = (boundS: number) => {
    const upper = errorBuckets.find((b) => Number(b.labels.le) === boundS)?.value ?? NaN;
    const lower = errorBuckets.find((b) => Number(b.labels.le) === -boundS - 1e-9 || Number(b.labels.le) === -boundS)?.value ?? NaN;
    return (upper - lower) / errorCount;
  };
  return {
    summary: summarizeOverload(records, durationMs),
    errorMeanS: errorSumS / errorCount,
    errorCount,
    within025: withinS(0.25),
    within05: withinS(0.5),
  };
}

const predicted = await runOnce(true);
const baseline = await runOnce(false);
const provenance = await readRunProvenance({
  cwd: process.cwd(),
  command: ['npx', 'tsx', relative(process.cwd(), process.argv[1] ?? 'bench/overload.ts'), ...process.argv.slice(2)],
  startedAtMs,
  endedAtMs: Date.now(),
});

const date = new Date(startedAtMs).toISOString().slice(0, 10);
const ms = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? '-' : `${Math.round(v)} ms`);
const both = [predicted, baseline];
const row = (figure: string, cell: (run: Run) => string) => `| ${figure} | ${both.map(cell).join(' | ')} |`;
const prediction = (run: Run) =>
  run.errorCount > 0 ? `${(run.errorMeanS * 1000).toFixed(0)} ms over ${run.errorCount} requests` : 'none made';
const lines = [
  `# Overload: ${factor}x capacity for ${durationMs / 1000} s with a ${deadlineMs} ms deadline, admission by prediction on and off`,
  '',
  `- date: ${provenance.startedAt}`,
  `- machine: ${provenance.machine.cpuModel}, ${provenance.machine.cpuCores} cores, ${Math.round(provenance.machine.memoryBytes / 2 ** 30)} GiB, ${provenance.machine.platform} ${provenance.machine.release}, Node ${provenance.machine.nodeVersion}`,
  `- commit: ${provenance.gitCommit ?? 'unknown'}`,
  `- command: \`${provenance.command.join(' ')}\``,
  `- engine: \`test\`, 1 instance, batches of at most ${maxBatchSize}, ${batchDelayMs} ms per batch + ${itemDelayMs} ms per request: capacity ${capacityPerS.toFixed(2)} requests/s; offered ${ratePerS.toFixed(1)} calls/s (open loop)`,
  '- the two configurations ran one after the other in this one command, each on a fresh server: by prediction',
  '  (the default) and the queue limit alone (`scheduler.admissionByPrediction: false`, `maxQueuedRequests` 512,',
  '  the admission before issue 16)',
  '',
  '| figure | by prediction | queue limit only |',
  '| --- | --- | --- |',
  row('calls', (r) => String(r.summary.calls)),
  row('by status', (r) =>
    Object.entries(r.summary.byStatus)
      .map(([status, n]) => `${status}: ${n}`)
      .join(', '),
  ),
  row('admitted', (r) => `${r.summary.admitted} (${r.summary.admittedPerS.toFixed(2)}/s)`),
  row('504 among admitted', (r) => String(r.summary.admittedDeadlineExceeded)),
  row('admitted answered 200', (r) => String(r.summary.byStatus['200'] ?? 0)),
  row(
    'admitted latency p50 / p95 / max',
    (r) => `${ms(r.summary.admittedP50Ms)} / ${ms(r.summary.admittedP95Ms)} / ${ms(r.summary.admittedMaxMs)}`,
  ),
  row('first 429 after overload start', (r) => ms(r.summary.first429Ms)),
  row('last Retry-After / observed drain', (r) => `${r.summary.lastRetryAfterS ?? '-'} s / ${ms(r.summary.observedDrainMs)}`),
  row('prediction error (actual - predicted), mean', prediction),
  row('prediction error within ±0.25 s / ±0.5 s', (r) =>
    r.errorCount > 0 ? `${(r.within025 * 100).toFixed(0)} % / ${(r.within05 * 100).toFixed(0)} %` : '-',
  ),
  '',
  'Admitted: every call not refused with 429 (answered 200, 504 or another error). Observed drain: from the last',
  "429's answer until the last admitted call's answer.",
  '',
];
mkdirSync(outDir, { recursive: true });
const file = join(outDir, `overload-${date}.md`);
writeFileSync(file, lines.join('\n'));
process.stdout.write(`${lines.join('\n')}\nwritten to ${file}\n`);
