/**
 * The voice-activity port: the gateway asks it where speech is in a recording before cutting
 * the recording into pieces. Silero VAD (silero-vad.ts) implements it; `energyActivity` is the
 * engine-independent fallback, used where onnxruntime cannot be loaded (a bundle without
 * node_modules), and the test double.
 */
import type { VoiceActivity } from './split-policy.js';

export interface VoiceActivityDetector {
  /** `silero` or `energy`, for logs. */
  readonly name: string;
  /** One value per frame, from 0 (silence) to 1 (speech), for 16 kHz mono PCM. */
  detect(audio: Int16Array, signal?: AbortSignal): Promise<VoiceActivity>;
  /** A detector for audio that arrives in pieces (a realtime session), keeping its state between pieces. */
  openStream(): VoiceActivityStream;
}

/** Streaming detection: 16 kHz mono PCM in, one value per completed frame out. */
export interface VoiceActivityStream {
  /** Samples per frame at 16 kHz. */
  readonly frameSamples: number;
  /** The next samples; resolves with the values of every frame they complete (possibly none). */
  push(audio: Int16Array): Promise<Float32Array>;
}

/** Buffers pushed samples into whole frames for `run`, which keeps whatever state it needs. */
export function framedStream(frameSamples: number, run: (frame: Int16Array) => Promise<number> | number): VoiceActivityStream {
  let pending = new Int16Array(0);
  return {
    frameSamples,
    async push(audio) {
      const all = new Int16Array(pending.length + audio.length);
      all.set(pending);
      all.set(audio, pending.length);
      const frames = Math.floor(all.length / frameSamples);
      const values = new Float32Array(frames);
      for (let k = 0; k < frames; k++) values[k] = await run(all.subarray(k * frameSamples, (k + 1) * frameSamples));
      pending = all.slice(frames * frameSamples);
      return values;
    },
  };
}

/** Absolute frame level for streams (no whole recording to take a floor from): -55 dBFS reads 0, -35 dBFS and louder 1. */
function frameLevel(frame: Int16Array): number {
  let sum = 0;
  for (let i = 0; i < frame.length; i++) sum += frame[i]! * frame[i]!;
  const db = 10 * Math.log10(sum / Math.max(1, frame.length) / (32768 * 32768) + 1e-10);
  return Math.max(0, Math.min(1, (db + 55) / 20));
}

/** 30 ms at 16 kHz. */
export const ENERGY_FRAME_SAMPLES = 480;

/**
 * Frame energy (RMS in dBFS) mapped to 0..1 between the recording's quiet floor (its 5th
 * percentile) and 20 dB above it, so pauses read as low values whatever the recording's level.
 */
export function energyActivity(audio: Int16Array, frameSamples = ENERGY_FRAME_SAMPLES): VoiceActivity {
  const frames = Math.floor(audio.length / frameSamples);
  const levelsDb = new Float64Array(frames);
  for (let k = 0; k < frames; k++) {
    let sum = 0;
    for (let i = k * frameSamples; i < (k + 1) * frameSamples; i++) sum += audio[i]! * audio[i]!;
    levelsDb[k] = 10 * Math.log10(sum / frameSamples / (32768 * 32768) + 1e-10);
  }
  const sorted = Float64Array.from(levelsDb).sort();
  const floorDb = frames === 0 ? -100 : sorted[Math.floor(frames * 0.05)]!;
  const values = new Float32Array(frames);
  for (let k = 0; k < frames; k++) values[k] = Math.max(0, Math.min(1, (levelsDb[k]! - floorDb) / 20));
  return { frameSamples, values };
}

export function createEnergyDetector(): VoiceActivityDetector {
  return {
    name: 'energy',
    detect: (audio) => Promise.resolve(energyActivity(audio)),
    openStream: () => framedStream(ENERGY_FRAME_SAMPLES, frameLevel),
  };
}
