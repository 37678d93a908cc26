/**
 * Audio at a realtime session's edges: client audio (pcm16 at 24 kHz, G.711 at 8 kHz, base64) in
 * to 16 kHz PCM for the VAD and the recogniser; synthesized audio (any rate) out to the session's
 * output format. Both resample as a stream, so pieces of any size join without clicks.
 */
import { REALTIME_FORMAT_RATE_HZ, REALTIME_FORMAT_SAMPLE_BYTES, type RealtimeAudioFormat } from '../../api/realtime.js';
import { errors } from '../../core/error-catalog.js';
import type { FirKernel } from '../audio/fir-kernel.js';
import { floatToPcm16, pcm16LittleEndian } from '../audio/pcm16.js';
import { createStreamResampler, type StreamResampler } from '../audio/resampler.js';
import { decodeALaw, decodeMuLaw, encodeALaw, encodeMuLaw } from './g711.js';

/** The rate the recogniser and the VAD take. */
export const INPUT_RATE_HZ = 16_000;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The bytes of an append's base64 audio, checked against the format and the size limit.
 * @throws append_too_large, invalid_audio_data
 */
export function decodeAppend(audio: unknown, context: { format: RealtimeAudioFormat; maxAppendBytes: number }): Uint8Array {
  if (typeof audio !== 'string') throw errors.invalidAudioData({ reason: 'expected audio to be a base64 string' });
  // Checked before decoding, so an oversized append costs no memory.
  const bytes = Math.floor((audio.length * 3) / 4);
  if (bytes > context.maxAppendBytes + 2) throw errors.appendTooLarge({ bytes, maxAppendBytes: context.maxAppendBytes });
  if (audio.length % 4 !== 0 || !BASE64.test(audio)) throw errors.invalidAudioData({ reason: 'expected base64' });
  const decoded = Buffer.from(audio, 'base64');
  if (decoded.length > context.maxAppendBytes)
    throw errors.appendTooLarge({ bytes: decoded.length, maxAppendBytes: context.maxAppendBytes });
  if (decoded.length % REALTIME_FORMAT_SAMPLE_BYTES[context.format] !== 0) {
    throw errors.invalidAudioData({ reason: `expected whole 16-bit samples for ${context.format}: got ${decoded.length} bytes` });
  }
  return new Uint8Array(decoded.buffer, decoded.byteOffset, decoded.length);
}

function toFloat(samples: Int16Array): Float32Array {
  const out = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = samples[i]! / 32768;
  return out;
}

function toPcm16(bytes: Uint8Array, format: RealtimeAudioFormat): Int16Array {
  if (format === 'g711_ulaw') return decodeMuLaw(bytes);
  if (format === 'g711_alaw') return decodeALaw(bytes);
  return pcm16LittleEndian(bytes, 0, bytes.length >> 1).slice();
}

function fromPcm16(samples: Int16Array, format: RealtimeAudioFormat): Uint8Array {
  if (format === 'g711_ulaw') return encodeMuLaw(samples);
  if (format === 'g711_alaw') return encodeALaw(samples);
  return new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
}

/** Client audio in one format to 16 kHz PCM. */
export interface InputConverter {
  readonly format: RealtimeAudioFormat;
  /** Audio pushed that the resampler still holds (its filter waits for what follows), in 16 kHz samples. */
  readonly heldSamples: number;
  push(bytes: Uint8Array): Int16Array;
}

export function createInputConverter(format: RealtimeAudioFormat, kernel: FirKernel): InputConverter {
  const fromRateHz = REALTIME_FORMAT_RATE_HZ[format];
  const resampler = createStreamResampler({ fromRateHz, toRateHz: INPUT_RATE_HZ, kernel });
  let framesIn = 0;
  let samplesOut = 0;
  return {
    format,
    get heldSamples() {
      return Math.max(0, (framesIn * INPUT_RATE_HZ) / fromRateHz - samplesOut);
    },
    push(bytes) {
      const samples = toPcm16(bytes, format);
      framesIn += samples.length;
      const out = floatToPcm16(resampler.push(toFloat(samples)));
      samplesOut += out.length;
      return out;
    },
  };
}

/** Synthesized 16-bit PCM at the engine's rate to the output format; `samples` counts what it produced, at the output rate. */
export interface OutputConverter {
  push(samples: Int16Array, rateHz: number): Uint8Array;
  flush(): Uint8Array;
}

export function createOutputConverter(format: RealtimeAudioFormat, kernel: FirKernel): OutputConverter {
  const toRateHz = REALTIME_FORMAT_RATE_HZ[format];
  let resampler: StreamResampler | undefined;
  let fromRateHz = 0;
  const encode = (samples: Float32Array) => fromPcm16(floatToPcm16(samples), format);
  return {
    push(samples, rateHz) {
      let head: Uint8Array = new Uint8Array(0);
      if (rateHz !== fromRateHz) {
        if (resampler !== undefined) head = encode(resampler.flush());
        resampler = createStreamResampler({ fromRateHz: rateHz, toRateHz, kernel });
        fromRateHz = rateHz;
      }
      const body = encode(resampler!.push(toFloat(samples)));
      if (head.length === 0) return body;
      const both = new Uint8Array(head.length + body.length);
      both.set(head);
      both.set(body, head.length);
      return both;
    },
    flush() {
      const out = resampler === undefined ? new Uint8Array(0) : encode(resampler.flush());
      resampler = undefined;
      fromRateHz = 0;
      return out;
    },
  };
}

/** Milliseconds of `bytes` of audio in `format`. */
export function audioMs(bytes: number, format: RealtimeAudioFormat): number {
  return (bytes / REALTIME_FORMAT_SAMPLE_BYTES[format] / REALTIME_FORMAT_RATE_HZ[format]) * 1000;
}
