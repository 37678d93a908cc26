/**
 * `voxmux bench diarize`: speaker diarization, in two modes.
 * - accuracy: diarizes every file of a manifest (POST /v1/audio/diarization) and reports the
 *   diarization error rate against RTTM references (0.25 s collar, overlap scored), split into
 *   missed speech, false alarm and speaker confusion, under the optimal speaker mapping;
 * - load: N concurrent sessions each send a recording chunk by chunk (in real time or as fast as
 *   answers come) and it reports per-chunk latency p50/p95/p99, the real-time factor, errors and
 *   expiries.
 *
 * Exit codes: 0 done; 1 nothing succeeded; 2 bad arguments or server unreachable; 130 interrupted.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { exitCodeOf, usageError } from './bench-error.js';
import { spawnBenchProcess } from './bench-processes.js';
import { defineCommand } from './command.js';
import { DEFAULT_COLLAR_S } from './diarization-error-rate.js';
import {
  DIARIZE_SCHEMA,
  diarizeAccuracyCsv,
  diarizeAccuracyLines,
  diarizeLoadCsv,
  diarizeLoadLines,
  diarizeSummaryMarkdown,
  summarizeDiarizeLoad,
} from './diarize-report.js';
import { pooledDer, runDiarizeAccuracy, runDiarizeLoad, splitWav, type DiarizeAccuracyItem, type DiarizeLoadRun } from './diarize-run.js';
import { parseShare, runSpreadDiarizeLoad } from './diarize-spread.js';
import { numberFlag, parseExtraFields, readApiKey, redactArgv } from './flags.js';
import { createHttpFetch } from './http-fetch.js';
import { readRunProvenance } from './machine-info.js';
import { slug, timestampForPath } from './output-dir.js';
import { resolveTargetUrls } from './target.js';

export const DIARIZE_USAGE = `Usage:
  voxmux bench diarize --mode accuracy --url URL --model MODEL --manifest FILE [options]
  voxmux bench diarize --mode load --url URL --model MODEL --audio FILE.wav --sessions N [options]

accuracy: the manifest is JSON Lines, one recording a line: {"audio": "a.wav", "rttm": "a.rttm"}
(paths relative to the manifest; an RTTM naming several files is read for the line's "uri", by
default the audio's base name). Each file is diarized once, whole or with --chunk-s as a session of
chunks (scored on the final timeline), and scored against its RTTM.
load: N concurrent sessions each send the same WAV file in chunks of --chunk-s seconds.

diarize options:
  --mode accuracy|load      what to measure
  --url URL                 server root or API base (.../v1)
  --model MODEL             diarization model name
  --manifest FILE           accuracy: the recordings and their RTTM references
  --collar-s S              accuracy: no-score collar around reference boundaries (default ${DEFAULT_COLLAR_S})
  --concurrency N           accuracy: files at a time (default 2)
  --field KEY=VALUE         accuracy: extra multipart field, e.g. max_speakers=4 (repeatable)
  --audio FILE.wav          load: the recording every session sends
  --sessions N              load: concurrent sessions (default 10)
  --chunk-s S               load: chunk length in seconds (default 15); accuracy: send each file as
                            a session of chunks this long (WAV files) instead of whole
  --pacing realtime|asap    load: a chunk every chunk length, or as soon as the last was answered (default realtime)
  --processes N             load: spread the sessions over N bench processes that start together, for
                            loads one process cannot send on time (default 1); each writes its part
                            under the output directory (process-K/), merged into the run's results
  --share K/N               load: run only sessions K, K+N, K+2N, ... (set by --processes)
  --start-at-ms T           load: start at this wall-clock time, in ms since the epoch (set by --processes)
  --timeout-s S             per-call timeout (default 120)
  --out DIR                 output directory (default bench/out/<time>-diarize-<label>)
  --label TEXT              name of this run
  --api-key-file PATH       file holding the API key (sent as a bearer token)
  --api-key KEY             the API key itself (kept out of the results file)
`;

const DIARIZE_FLAGS = {
  mode: { type: 'string' },
  url: { type: 'string' },
  model: { type: 'string' },
  manifest: { type: 'string' },
  'collar-s': { type: 'string' },
  concurrency: { type: 'string' },
  field: { type: 'string', multiple: true },
  audio: { type: 'string' },
  sessions: { type: 'string' },
  'chunk-s': { type: 'string' },
  pacing: { type: 'string' },
  processes: { type: 'string' },
  share: { type: 'string' },
  'start-at-ms': { type: 'string' },
  'timeout-s': { type: 'string' },
  out: { type: 'string' },
  label: { type: 'string' },
  'api-key-file': { type: 'string' },
  'api-key': { type: 'string' },
} as const;

/** Reads a JSON Lines manifest of {"audio", "rttm", "uri"?}. */
export async function loadDiarizeManifest(path: string): Promise<DiarizeAccuracyItem[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    throw usageError(`Expected --manifest to name a readable file: '${path}' cannot be read`);
  }
  const items: DiarizeAccuracyItem[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      throw usageError(`Manifest line ${i + 1}: expected JSON`);
    }
    const { audio, rttm, uri } = (entry ?? {}) as { audio?: unknown; rttm?: unknown; uri?: unknown };
    if (typeof audio !== 'string' || typeof rttm !== 'string' || (uri !== undefined && typeof uri !== 'string'))
      throw usageError(`Manifest line ${i + 1}: expected {"audio": "...", "rttm": "...", "uri"?: "..."}`);
    items.push({
      audio,
      audioPath: resolve(dirname(path), audio),
      rttmPath: resolve(dirname(path), rttm),
      ...(uri === undefined ? {} : { uri }),
    });
  });
  if (items.length === 0) throw usageError(`Expected --manifest to list at least one recording: '${path}' lists none`);
  return items;
}

export const diarizeCommand = defineCommand({
  name: 'diarize',
  usage: DIARIZE_USAGE,
  flags: DIARIZE_FLAGS,
  run: async ({ values, args, io, deps, cwd, clock, outputDir, interruptibly }) => {
    const fetchFn = deps.fetch ?? createHttpFetch();
    const mode = values.mode;
    if (mode !== 'accuracy' && mode !== 'load') throw usageError(`Expected --mode accuracy or load: got '${mode ?? ''}'`);
    if (values.url === undefined) throw usageError('Missing required flag: --url');
    if (values.model === undefined || values.model === '') throw usageError('Missing required flag: --model');
    const model = values.model;
    const timeoutMs = 1000 * numberFlag(values['timeout-s'], '--timeout-s', 120, { min: 0.01, max: 600 });
    const apiKey = await readApiKey(values, cwd);
    const auth = apiKey === undefined ? {} : { apiKey };
    const urls = resolveTargetUrls(values.url, { metricsUrl: 'off' });
    const diarizationUrl = urls.transcriptions.replace(/\/audio\/transcriptions$/, '/audio/diarization');
    const label = values.label ?? `${model} @ ${new URL(urls.origin).host}`;
    const startedAtMs = clock.wallMs();
    const outDir = await outputDir(values.out, `${timestampForPath(startedAtMs)}-diarize-${mode}-${slug(label)}`);
    const command = ['voxmux', 'bench', ...redactArgv(['diarize', ...args])];
    const onInterrupt = () => io.stdout.write('Interrupted: stopping (results so far will be written)\n');
    let lines: string[];
    let isInterrupted: boolean;
    let succeeded: number;
    let body: Record<string, unknown>;
    let csv: string;
    if (mode === 'accuracy') {
      if (values.manifest === undefined) throw usageError('Missing required flag: --manifest');
      const items = await loadDiarizeManifest(resolve(cwd, values.manifest));
      const collarS = numberFlag(values['collar-s'], '--collar-s', DEFAULT_COLLAR_S, { min: 0, max: 5 });
      const concurrency = numberFlag(values.concurrency, '--concurrency', 2, { min: 1, max: 64, isInteger: true });
      const extraFields = parseExtraFields(values.field ?? [], ['file', 'model', 'response_format']);
      const chunkS = values['chunk-s'] === undefined ? undefined : numberFlag(values['chunk-s'], '--chunk-s', 15, { min: 0.1, max: 600 });
      const how = chunkS === undefined ? 'whole' : `as sessions of ${chunkS} s chunks`;
      io.stdout.write(
        `Diarization accuracy ${label}: ${items.length} file(s) ${how}, ${concurrency} at a time, against ${diarizationUrl}\n`,
      );
      const run = await interruptibly(onInterrupt, (signal) =>
        runDiarizeAccuracy(
          {
            endpoint: diarizationUrl,
            model,
            items,
            concurrency,
            timeoutMs,
            collarS,
            extraFields,
            ...(chunkS === undefined ? {} : { chunkS }),
            ...auth,
          },
          { fetch: fetchFn, clock, signal },
        ),
      );
      const totals = pooledDer(run.items);
      lines = diarizeAccuracyLines(totals, collarS);
      ({ isInterrupted } = run);
      succeeded = totals.files;
      body = {
        options: { collarS, concurrency, timeoutMs, fields: Object.fromEntries(extraFields), ...(chunkS === undefined ? {} : { chunkS }) },
        totals,
        items: run.items,
      };
      csv = diarizeAccuracyCsv(run.items);
    } else {
      if (values.audio === undefined) throw usageError('Missing required flag: --audio');
      const sessions = numberFlag(values.sessions, '--sessions', 10, { min: 1, max: 100_000, isInteger: true });
      const chunkS = numberFlag(values['chunk-s'], '--chunk-s', 15, { min: 0.1, max: 600 });
      const pacing = values.pacing ?? 'realtime';
      if (pacing !== 'realtime' && pacing !== 'asap') throw usageError(`Expected --pacing realtime or asap: got '${pacing}'`);
      let recording;
      try {
        recording = splitWav(new Uint8Array(await readFile(resolve(cwd, values.audio))), chunkS);
      } catch (err) {
        throw usageError(`Expected --audio to name a readable WAV file: ${(err as Error).message}`);
      }
      // No more processes than sessions: a process without one would only start.
      const processes = Math.min(sessions, numberFlag(values.processes, '--processes', 1, { min: 1, max: 64, isInteger: true }));
      const share = parseShare(values.share);
      if (share !== undefined && processes > 1) throw usageError('Expected --share or --processes, not both');
      const startAtMs =
        values['start-at-ms'] === undefined ? undefined : numberFlag(values['start-at-ms'], '--start-at-ms', 0, { min: 0, max: 1e15 });
      const spread = processes > 1 ? ` over ${processes} processes` : share === undefined ? '' : ` (share ${share.index}/${share.of})`;
      io.stdout.write(
        `Diarization load ${label}: ${sessions} session(s) of ${recording.chunks.length} chunk(s), ${pacing}${spread}, against ${diarizationUrl}/sessions\n`,
      );
      let run: DiarizeLoadRun;
      if (processes > 1) {
        const keyArgs =
          values['api-key-file'] !== undefined
            ? ['--api-key-file', resolve(cwd, values['api-key-file'])]
            : apiKey === undefined
              ? []
              : ['--api-key', apiKey];
        const loadArgs = [
          ...['--mode', 'load', '--url', values.url, '--model', model, '--audio', resolve(cwd, values.audio)],
          ...['--sessions', String(sessions), '--chunk-s', String(chunkS), '--pacing', pacing, '--timeout-s', String(timeoutMs / 1000)],
          ...keyArgs,
        ];
        let isSigint = false;
        run = await interruptibly(
          () => {
            isSigint = true;
            onInterrupt();
          },
          (signal) =>
            runSpreadDiarizeLoad(
              { processes, loadArgs, label, outDir },
              { spawn: deps.spawnBench ?? spawnBenchProcess, clock, signal, isSigint: () => isSigint },
            ),
        );
      } else {
        run = await interruptibly(onInterrupt, (signal) =>
          runDiarizeLoad(
            {
              sessionsUrl: `${diarizationUrl}/sessions`,
              model,
              sessions,
              recording,
              pacing,
              timeoutMs,
              ...auth,
              ...(share === undefined ? {} : { share }),
              ...(startAtMs === undefined ? {} : { startInMs: startAtMs - clock.wallMs() }),
            },
            { fetch: fetchFn, clock, signal },
          ),
        );
      }
      const totals = summarizeDiarizeLoad(run, share === undefined ? sessions : Math.ceil((sessions - share.index) / share.of));
      lines = diarizeLoadLines(totals);
      ({ isInterrupted } = run);
      succeeded = totals.ok;
      body = {
        options: {
          sessions,
          chunkS,
          pacing,
          timeoutMs,
          audio: values.audio,
          ...(processes > 1 ? { processes } : {}),
          ...(share === undefined ? {} : { share }),
        },
        totals,
        isInterrupted,
        createErrors: run.createErrors,
        chunks: run.chunks,
      };
      csv = diarizeLoadCsv(run);
    }
    const provenance = await readRunProvenance({ cwd, command, startedAtMs, endedAtMs: clock.wallMs() });
    const results = { schema: DIARIZE_SCHEMA, mode, label, endpoint: diarizationUrl, model, ...provenance, ...body };
    await mkdir(outDir, { recursive: true });
    await writeFile(join(outDir, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
    await writeFile(join(outDir, 'results.csv'), csv);
    await writeFile(join(outDir, 'summary.md'), diarizeSummaryMarkdown({ label, mode, command: command.join(' '), lines }));
    for (const line of lines) io.stdout.write(`${line}\n`);
    io.stdout.write(`Wrote ${join(outDir, 'results.json')}, results.csv, summary.md\n`);
    if (isInterrupted) return exitCodeOf('interrupted');
    if (succeeded === 0) {
      io.stderr.write(`Diarize bench failed: nothing succeeded against ${diarizationUrl}\n`);
      return exitCodeOf('all_failed');
    }
    return 0;
  },
});
