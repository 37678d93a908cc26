/**
 * Long-audio latency: a recording synthesized from flite sentences with 1 s pauses, sent with
 * stream=true to the default engine (pocketsphinx, 2 instances, CPU), once whole
 * (gateway.splitAboveMs 0) and once in pieces (splitAboveMs 30 s, pieceTargetMs 15 s): time to the
 * first transcript.text.delta and to transcript.text.done, and the word error rate against the
 * sentences spoken.
 *
 * Usage: npm run build && npx tsx bench/long-audio.ts [--duration-s 600] [--out bench/results]
 * Writes long-audio-<date>.md under --out.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { startVoxmux } from './start-voxmux.js';
import { countWordErrors } from './cli/word-error-rate.js';
import { longRecording, readEvents } from '../test/support/long-recording.js';

const { values } = parseArgs({
  options: { 'duration-s': { type: 'string', default: '600' }, out: { type: 'string', default: 'bench/results' } },
});
const durationS = Number(values['duration-s']);
const outDir = resolve(values.out!);
const work = mkdtempSync(join(tmpdir(), 'voxmux-long-bench-'));
const date = new Date().toISOString().slice(0, 10);
const TEXTS = [
  'we will meet at the station at nine in the morning',
  'the quick brown fox jumped over the lazy dog',
  'please call stella and ask her to bring these things with her from the store',
  'six spoons of fresh snow peas and five thick slabs of blue cheese',
];
const recording = longRecording({ texts: TEXTS, durationS, pauseS: 1, dir: work });
const reference = recording.sentences.map((s) => s.text).join(' ');

interface Run {
  name: string;
  firstDeltaS: number;
  doneS: number;
  deltas: number;
  wer: number;
}

async function run(name: string, gateway: Record<string, unknown>, port: number): Promise<Run> {
  const stop = await startVoxmux({
    // The whole file is one batch of several minutes on this machine: past the default 120 s call
    // deadline and batch timeout, so both are raised for both runs.
    config: {
      gateway: { maxAudioDurationMs: 700_000, requestTimeoutMs: 1_800_000, ...gateway },
      supervisor: { batchTimeoutMs: 1_800_000 },
      models: { asr: { adapter: 'pocketsphinx', instances: 2, maxBatchSize: 1 } },
    },
    port,
    workDir: work,
  });
  try {
    const form = new FormData();
    form.append('model', 'asr');
    form.append('stream', 'true');
    form.append('file', new Blob([recording.wav]), 'long.wav');
    const startMs = performance.now();
    const res = await fetch(`http://127.0.0.1:${port}/v1/audio/transcriptions`, { method: 'POST', body: form });
    const events = await readEvents(res, startMs);
    const deltas = events.filter((e) => e.data.type === 'transcript.text.delta');
    const done = events.at(-1)!;
    if (done.data.type !== 'transcript.text.done') throw new Error(`the stream ended with ${JSON.stringify(done.data)}`);
    const counted = countWordErrors(reference, String(done.data.text));
    return {
      name,
      firstDeltaS: (deltas[0]?.atMs ?? done.atMs) / 1000,
      doneS: done.atMs / 1000,
      deltas: deltas.length,
      wer: (counted.substitutions + counted.deletions + counted.insertions) / counted.referenceWords,
    };
  } finally {
    await stop();
  }
}

const whole = await run('whole file', { splitAboveMs: 0 }, 8231);
const pieces = await run('pieces', { splitAboveMs: 30_000, pieceTargetMs: 15_000 }, 8232);
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD']).toString().trim();
const cpu = cpus()[0]?.model ?? 'unknown';
const fmt = (r: Run) => `| ${r.name} | ${r.firstDeltaS.toFixed(1)} | ${r.doneS.toFixed(1)} | ${r.deltas} | ${(r.wer * 100).toFixed(1)} % |`;
const md = `# Long-audio latency: whole file vs pieces (${date})

- date: ${date}
- machine: ${cpus().length} cores (${cpu}), ${Math.round(totalmem() / 2 ** 30)} GiB, no GPU
- commit: ${commit}
- command: \`npm run build && npx tsx bench/long-audio.ts --duration-s ${durationS}\`
- recording: ${durationS} s, ${recording.sentences.length} flite (slt) sentences with 1 s pauses, 16 kHz PCM16 WAV
- engine: pocketsphinx (default engine), 2 instances, maxBatchSize 1; requestTimeoutMs and supervisor.batchTimeoutMs 1800000 (the whole file is one batch longer than the 120 s defaults); stream=true; pieces: splitAboveMs 30000, pieceTargetMs 15000, Silero VAD

| run | first delta (s) | done (s) | deltas | WER |
| --- | --- | --- | --- | --- |
${fmt(whole)}
${fmt(pieces)}

Time to first delta: ${(pieces.firstDeltaS / whole.firstDeltaS).toFixed(3)} of the whole file's; time to done: ${(pieces.doneS / whole.doneS).toFixed(3)}.
`;
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, `long-audio-${date}.md`), md);
process.stdout.write(md);
