// The two server configurations compared by bench/gpu/run-speech.sh, written as voxmux config files:
// (a) the baseline the issue describes: one engine process that synthesizes one stream at a time (a
//     global lock), with room on the GPU for one voice and no host copies, so every change of voice
//     loads the new voice's weights from disk;
// (b) voxmux: several instances sharing the GPU under MPS, each holding about 16 voices resident (fewer than
//     the catalogue, so voices are evicted), with host-memory copies of every voice it has seen,
//     the catalogue preloaded at start (disk reads happen then, not during the ramp), and
//     voice-affinity routing.
// Usage: node bench/gpu/speech-configs.mjs OUT_DIR HOST_PATH
// SPEECH_BENCH_* variables (see run-speech.sh) change the sizes; SPEECH_BENCH_DEVICE=cpu with a
// small SPEECH_BENCH_VOICES writes configurations for a dry run without a GPU.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [outDir, hostPath] = process.argv.slice(2);
if (outDir === undefined || hostPath === undefined) {
  process.stderr.write('usage: node bench/gpu/speech-configs.mjs OUT_DIR HOST_PATH\n');
  process.exit(2);
}

const env = (name, fallback) => process.env[`SPEECH_BENCH_${name}`] ?? fallback;
const int = (name, fallback) => {
  const value = Number(env(name, String(fallback)));
  if (!Number.isInteger(value) || value < 0) throw new Error(`SPEECH_BENCH_${name} must be a non-negative integer`);
  return value;
};

export const MODEL = 'vits-bench';
const voices = int('VOICES', 64);
const device = env('DEVICE', 'cuda');
// The vits adapter's compute type (fp32, fp16 or bf16: autocast on CUDA); voice weights stay fp32.
const dtype = env('DTYPE', 'fp32');
// A Piper "medium" voice's weights as the vits adapter holds them: 15,772,216 parameters in fp32
// (docs/adapters.md). Budgets are whole voices with half a voice of headroom, so that "one voice"
// never fits two.
const voiceBytes = int('VOICE_BYTES', 63_088_864);
const budgetFor = (count) => Math.round((count + 0.5) * voiceBytes);
const instances = int('INSTANCES', 8);
const residentVoices = int('RESIDENT_VOICES', 16);
const streamsPerInstance = int('STREAMS_PER_INSTANCE', 32);
const phonemizer = env('PHONEMIZER', 'text');
// (b) runs its instances under NVIDIA MPS (one GPU context shared by their processes) unless 0.
const mps = env('MPS', '1') === '1';

function config({ instanceCount, maxStreamsPerInstance, residentBudgetBytes, hostBudgetBytes, preloadVoices, useMps }) {
  return {
    gateway: { requestTimeoutMs: 300_000 },
    scheduler: { maxQueuedRequests: 4096 },
    supervisor: {
      hostPath,
      heartbeatIntervalMs: 2000,
      heartbeatMissLimit: 30,
      loadTimeoutMs: 600_000,
      ...(useMps && device !== 'cpu' ? { mps: { enabled: true } } : {}),
    },
    models: {
      [MODEL]: {
        adapter: 'vits',
        instances: instanceCount,
        // Every instance on the one GPU, however many the machine has.
        ...(device === 'cpu' ? {} : { gpus: [0] }),
        maxStreamsPerInstance,
        options: {
          device,
          dtype,
          randomVoices: voices,
          residentBudgetBytes,
          hostBudgetBytes,
          phonemizer,
          preloadVoices,
        },
      },
    },
  };
}

const catalogue = Array.from({ length: voices }, (_, i) => `vits-${i}`);

export const CONFIGS = {
  'a-global-lock': config({
    instanceCount: 1,
    maxStreamsPerInstance: 1,
    residentBudgetBytes: budgetFor(1),
    hostBudgetBytes: 0,
    preloadVoices: [],
    useMps: false,
  }),
  'b-voxmux-residency': config({
    instanceCount: instances,
    maxStreamsPerInstance: streamsPerInstance,
    residentBudgetBytes: budgetFor(residentVoices),
    hostBudgetBytes: budgetFor(voices),
    preloadVoices: env('PRELOAD', '1') === '1' ? catalogue : [],
    useMps: mps,
  }),
};

mkdirSync(outDir, { recursive: true });
for (const [name, value] of Object.entries(CONFIGS)) writeFileSync(join(outDir, `${name}.json`), `${JSON.stringify(value, null, 2)}\n`);
process.stdout.write(
  `Wrote ${Object.keys(CONFIGS).join(', ')} to ${outDir}: ${voices} voices of ${voiceBytes} bytes (${dtype}), ` +
    `(b) ${instances} instances x ${residentVoices} resident voices${mps ? ' under MPS' : ''}\n`,
);
