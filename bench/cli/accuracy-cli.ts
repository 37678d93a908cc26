/**
 * `voxmux bench accuracy`: transcribes every file of a manifest once and reports the word error
 * rate against the references, and optionally how far the transcripts moved from a baseline run
 * (another server, model or setting, such as `matmul: fp8` against bf16).
 *
 * Exit codes: 0 done; 1 no file was transcribed; 2 bad arguments or server unreachable;
 * 130 interrupted (results so far are still written).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { loadAccuracyManifest } from './accuracy-manifest.js';
import {
  ACCURACY_SCHEMA,
  accuracyLines,
  baselineTranscripts,
  compareWithBaseline,
  formatWorstTable,
  loadAccuracyResults,
  summarizeAccuracy,
  toAccuracyJson,
  toAccuracyMarkdown,
  type AccuracyResults,
} from './accuracy-report.js';
import { runAccuracy } from './accuracy-run.js';
import { exitCodeOf, usageError } from './bench-error.js';
import { defineCommand } from './command.js';
import { numberFlag, parseExtraFields, readApiKey, redactArgv } from './flags.js';
import { createHttpFetch } from './http-fetch.js';
import { readRunProvenance } from './machine-info.js';
import { slug, timestampForPath } from './output-dir.js';
import { preflight, resolveTargetUrls } from './target.js';

export const ACCURACY_USAGE = `Usage:
  voxmux bench accuracy --url URL --model MODEL --manifest FILE [options]

The manifest is JSON Lines, one file per line: {"audio": "a.wav", "reference": "the text"}
(NeMo's "audio_filepath" and "text" keys work too; paths are relative to the manifest).

accuracy options:
  --url URL                 server root, API base (.../v1) or the transcriptions endpoint
  --model MODEL             model name sent with every request
  --manifest FILE           the files and their reference transcripts
  --concurrency N           requests at a time (default 4)
  --timeout-s S             per-request timeout (default 120)
  --field KEY=VALUE         extra multipart field, e.g. language=en (repeatable)
  --baseline FILE           an earlier accuracy results.json: also report how far the transcripts moved from it
  --out DIR                 output directory (default bench/out/<time>-accuracy-<label>)
  --label TEXT              name of this run
  --api-key-file PATH       file holding the API key (sent as a bearer token)
  --api-key KEY             the API key itself (kept out of the results file)
`;

const MAX_CONCURRENCY = 256;
const MAX_TIMEOUT_S = 300;
/** How many of the worst files the terminal shows; summary.md lists them all. */
const WORST_SHOWN = 10;

const ACCURACY_FLAGS = {
  url: { type: 'string' },
  model: { type: 'string' },
  manifest: { type: 'string' },
  concurrency: { type: 'string' },
  'timeout-s': { type: 'string' },
  field: { type: 'string', multiple: true },
  baseline: { type: 'string' },
  out: { type: 'string' },
  label: { type: 'string' },
  'api-key-file': { type: 'string' },
  'api-key': { type: 'string' },
  'preflight-timeout-s': { type: 'string' },
} as const;

export const accuracyCommand = defineCommand({
  name: 'accuracy',
  usage: ACCURACY_USAGE,
  flags: ACCURACY_FLAGS,
  run: async ({ values, args, io, deps, cwd, clock, outputDir, interruptibly }) => {
    const fetchFn = deps.fetch ?? createHttpFetch();
    if (values.url === undefined) throw usageError('Missing required flag: --url');
    if (values.model === undefined || values.model === '') throw usageError('Missing required flag: --model');
    if (values.manifest === undefined) throw usageError('Missing required flag: --manifest');
    const model = values.model;
    const concurrency = numberFlag(values.concurrency, '--concurrency', 4, { min: 1, max: MAX_CONCURRENCY, isInteger: true });
    const timeoutMs = 1000 * numberFlag(values['timeout-s'], '--timeout-s', 120, { min: 0.01, max: MAX_TIMEOUT_S });
    const preflightTimeoutMs = 1000 * numberFlag(values['preflight-timeout-s'], '--preflight-timeout-s', 3, { min: 0.05, max: 120 });
    const extraFields = parseExtraFields(values.field ?? [], ['file', 'model', 'stream', 'response_format']);
    const apiKey = await readApiKey(values, cwd);
    const urls = resolveTargetUrls(values.url, { metricsUrl: 'off' });
    const manifestPath = resolve(cwd, values.manifest);
    const items = await loadAccuracyManifest(manifestPath);
    const baselinePath = values.baseline === undefined ? undefined : resolve(cwd, values.baseline);
    const baseline = baselinePath === undefined ? undefined : { path: baselinePath, results: await loadAccuracyResults(baselinePath) };
    const label = values.label ?? `${values.model} @ ${new URL(urls.origin).host}`;
    const startedAtMs = clock.wallMs();
    const outDir = await outputDir(values.out, `${timestampForPath(startedAtMs)}-accuracy-${slug(label)}`);

    const found = await preflight(
      { urls, timeoutMs: preflightTimeoutMs, ...(apiKey === undefined ? {} : { apiKey }) },
      { fetch: fetchFn, clock },
    );
    if (found.models !== undefined && !found.models.includes(values.model)) {
      io.stderr.write(
        `Warning: the server does not list model '${values.model}' (it lists: ${found.models.slice(0, 10).join(', ') || 'none'})\n`,
      );
    }
    io.stdout.write(`Accuracy ${label}: ${items.length} file(s), ${concurrency} at a time, against ${urls.transcriptions}\n`);

    const step = Math.max(1, Math.ceil(items.length / 10));
    const run = await interruptibly(
      () => io.stdout.write('Interrupted: stopping (results so far will be written)\n'),
      (signal) =>
        runAccuracy(
          {
            endpoint: urls.transcriptions,
            model,
            items,
            concurrency,
            timeoutMs,
            extraFields,
            ...(apiKey === undefined ? {} : { apiKey }),
            ...(baseline === undefined ? {} : { baseline: baselineTranscripts(baseline.results) }),
          },
          {
            fetch: fetchFn,
            clock,
            signal,
            onItem: (_result, done) => {
              if (done % step === 0 || done === items.length) io.stdout.write(`  ${done}/${items.length} done\n`);
            },
          },
        ),
    );

    const provenance = await readRunProvenance({
      cwd,
      command: ['voxmux', 'bench', ...redactArgv(['accuracy', ...args])],
      startedAtMs,
      endedAtMs: clock.wallMs(),
    });
    const results: AccuracyResults = {
      schema: ACCURACY_SCHEMA,
      label,
      endpoint: urls.transcriptions,
      model: values.model,
      ...provenance,
      options: { concurrency, timeoutMs, fields: Object.fromEntries(extraFields), manifest: manifestPath },
      totals: summarizeAccuracy(run.items),
      ...(baseline === undefined ? {} : { baseline: compareWithBaseline(run.items, baseline) }),
      items: run.items,
      notes: run.isInterrupted ? [`The run was interrupted after ${run.items.length} of ${items.length} file(s).`] : [],
    };
    await mkdir(outDir, { recursive: true });
    await writeFile(join(outDir, 'results.json'), toAccuracyJson(results));
    await writeFile(join(outDir, 'summary.md'), toAccuracyMarkdown(results));
    io.stdout.write(`\n${formatWorstTable(results, WORST_SHOWN)}\n\n`);
    for (const line of accuracyLines(results)) io.stdout.write(`${line}\n`);
    for (const note of results.notes) io.stdout.write(`Note: ${note}\n`);
    io.stdout.write(`Wrote ${join(outDir, 'results.json')}, summary.md\n`);

    if (run.isInterrupted) {
      io.stderr.write('Accuracy bench interrupted\n');
      return exitCodeOf('interrupted');
    }
    if (results.totals.ok === 0) {
      io.stderr.write(`Accuracy bench failed: no file was transcribed by ${urls.transcriptions}\n`);
      return exitCodeOf('all_failed');
    }
    return 0;
  },
});
