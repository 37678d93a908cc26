/**
 * Measures in-process WAV decoding (parse, downmix, resample to 16 kHz) on long inputs.
 *
 *   node --import tsx bench/audio-decode.ts [minutes=10] [runs=5]
 *
 * Prints one line per input: best and median wall time, the CPU time of the best run (user +
 * system, which other load on the machine inflates less than wall time), and the speed as a
 * multiple of real time.
 */
import { tmpdir } from 'node:os';
import { createAudioDecoder } from '../src/gateway/audio/index.js';
import { createFirKernel } from '../src/gateway/audio/fir-kernel.js';
import { resampleArray } from '../src/gateway/audio/resampler.js';
import { encodeWav, type WavBuildOptions } from '../src/gateway/audio/wav-builder.js';

const minutes = Number(process.argv[2] ?? 10);
const runs = Number(process.argv[3] ?? 5);
const seconds = minutes * 60;

function speechLikeSignal(rateHz: number, phaseOffset: number): Float32Array {
  const out = new Float32Array(rateHz * seconds);
  for (let i = 0; i < out.length; i += 1) {
    const t = i / rateHz;
    out[i] = 0.3 * Math.sin(2 * Math.PI * 220 * t + phaseOffset) + 0.1 * Math.sin(2 * Math.PI * 3100 * t) * Math.sin(2 * Math.PI * 3 * t);
  }
  return out;
}

const inputs: { name: string; options: Omit<WavBuildOptions, 'channelData'>; channels: number }[] = [
  { name: '48 kHz stereo 16-bit', options: { sampleRateHz: 48000, encoding: 's16' }, channels: 2 },
  { name: '44.1 kHz stereo 16-bit', options: { sampleRateHz: 44100, encoding: 's16' }, channels: 2 },
  { name: '48 kHz stereo float32', options: { sampleRateHz: 48000, encoding: 'f32' }, channels: 2 },
  { name: '16 kHz mono 16-bit', options: { sampleRateHz: 16000, encoding: 's16' }, channels: 1 },
  { name: '8 kHz mono 16-bit', options: { sampleRateHz: 8000, encoding: 's16' }, channels: 1 },
];

const decoder = createAudioDecoder({
  maxDurationMs: (seconds + 1) * 1000,
  ffmpegPath: 'ffmpeg',
  tmpDir: tmpdir(),
  ffmpegTimeoutMs: 60_000,
});

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

process.stdout.write(`WAV decode of ${minutes} min of audio, ${runs} runs each (kernel: ${createFirKernel().name})\n`);
for (const input of inputs) {
  const channelData = Array.from({ length: input.channels }, (_, c) => speechLikeSignal(input.options.sampleRateHz, c));
  const bytes = encodeWav({ ...input.options, channelData });
  const timesMs: number[] = [];
  const cpuMs: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    await decoder.decode(bytes);
    const cpu = process.cpuUsage(cpuStarted);
    timesMs.push(performance.now() - started);
    cpuMs.push((cpu.user + cpu.system) / 1000);
  }
  const best = Math.min(...timesMs);
  const ms = (value: number): string => `${value.toFixed(0).padStart(5)} ms`;
  const fields = [
    input.name.padEnd(24),
    `${(bytes.length / 2 ** 20).toFixed(0).padStart(4)} MiB`,
    `wall best ${ms(best)}, median ${ms(median(timesMs))}`,
    `cpu best ${ms(Math.min(...cpuMs))}`,
    `${((seconds * 1000) / best).toFixed(0)}x real time`,
  ];
  process.stdout.write(`${fields.join('  ')}\n`);
}

// The same resampling with the plain JavaScript kernel, for comparison (one minute, one run).
const minute = speechLikeSignal(48000, 0).subarray(0, 48000 * 60);
for (const implementation of ['wasm-simd', 'js'] as const) {
  const kernel = createFirKernel({ implementation });
  resampleArray(minute.subarray(0, 48000), { fromRateHz: 48000, toRateHz: 16000, kernel }); // warm up
  const started = performance.now();
  resampleArray(minute, { fromRateHz: 48000, toRateHz: 16000, kernel });
  process.stdout.write(`resample 1 min 48 kHz mono, ${implementation} kernel: ${(performance.now() - started).toFixed(0)} ms\n`);
}
