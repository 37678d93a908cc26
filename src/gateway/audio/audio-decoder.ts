/**
 * Turns an uploaded file into 16 kHz mono 16-bit PCM: WAV in process (a 16 kHz mono 16-bit WAV
 * without a copy), everything else through ffmpeg. The format is judged by content; the duration limit is checked from the header when
 * the header states it, and always on the decoded samples.
 */
import { systemClock, type Clock } from '../../core/clock.js';
import { errors } from '../../core/error-catalog.js';
import { invariant } from '../../core/invariant.js';
import { DECODED_SAMPLE_RATE_HZ, type AudioFormat } from './audio-format.js';
import { decodeWithFfmpeg } from './ffmpeg.js';
import { createFirKernel, type FirKernel } from './fir-kernel.js';
import { floatToPcm16, pcm16LittleEndian } from './pcm16.js';
import { planResample, resampleMono } from './resampler.js';
import { identifyAudioContent, readFlacStreamInfo } from './sniff-audio-format.js';
import { createWavMonoSource, parseWav, type PcmWavLayout } from './wav-parser.js';

/** Decoded audio, ready for a speech model. */
export interface DecodedAudio {
  /** Mono 16-bit PCM samples at 16 kHz (value / 32768 is the sample in [-1, 1]). */
  samples: Int16Array;
  sampleRateHz: typeof DECODED_SAMPLE_RATE_HZ;
  /** samples.length at 16 kHz, in milliseconds. */
  durationMs: number;
  format: AudioFormat;
  /** The sample rate of the uploaded audio; 0 if ffmpeg did not report it. */
  sourceSampleRateHz: number;
  /** The channel count of the uploaded audio (mixed down to mono); 0 if ffmpeg did not report it. */
  sourceChannels: number;
  /** A WAV held fewer samples than its header declared: what was there was decoded (wav-parser.ts). */
  isTruncated: boolean;
}

export interface AudioDecoderOptions {
  /** Longest audio accepted, in milliseconds. Longer audio fails with audio_too_long. */
  maxDurationMs: number;
  /** The ffmpeg executable, for everything but PCM and float WAV. */
  ffmpegPath: string;
  /** Where uploads are written for ffmpeg to read; each file is removed after its decode. */
  tmpDir: string;
  /** How long one ffmpeg run may take before it is killed, in milliseconds. */
  ffmpegTimeoutMs: number;
}

export interface AudioDecoderDeps {
  /** Drives the ffmpeg timeout. @default systemClock */
  clock: Clock;
}

export interface AudioDecoder {
  /**
   * Decodes one upload. The caller keeps ownership of `bytes`; they are not modified.
   *
   * @throws unsupported_audio_format when the content is not a format listed in AudioFormat
   * @throws invalid_audio when it is one but is truncated, inconsistent or undecodable
   * @throws empty_audio when it holds no samples
   * @throws audio_too_long when it lasts longer than maxDurationMs (for formats ffmpeg decodes, the
   *   duration in the error is a lower bound: decoding stops about a second past the limit)
   * @throws internal_error when ffmpeg cannot be run
   * @throws signal.reason when `signal` aborts; a running ffmpeg is killed first
   */
  decode(bytes: Uint8Array, signal?: AbortSignal): Promise<DecodedAudio>;
}

/**
 * Builds a decoder. It holds no per-call state, so one decoder serves concurrent calls.
 *
 * @example
 * const decoder = createAudioDecoder({
 *   maxDurationMs: 600_000,
 *   ffmpegPath: 'ffmpeg',
 *   tmpDir: os.tmpdir(),
 *   ffmpegTimeoutMs: 30_000,
 * });
 * const audio = await decoder.decode(fileBytes, request.signal);
 * scheduler.submit(model, audio.samples, { deadline });
 */
export function createAudioDecoder(options: AudioDecoderOptions, deps: AudioDecoderDeps = { clock: systemClock }): AudioDecoder {
  invariant(options.maxDurationMs > 0 && Number.isFinite(options.maxDurationMs), 'maxDurationMs must be positive');
  invariant(options.ffmpegTimeoutMs > 0, 'ffmpegTimeoutMs must be positive');
  invariant(options.ffmpegPath.length > 0 && options.tmpDir.length > 0, 'ffmpegPath and tmpDir must not be empty');
  const kernel = createFirKernel();
  const maxSamples = Math.ceil((options.maxDurationMs * DECODED_SAMPLE_RATE_HZ) / 1000);

  const tooLong = (durationMs: number): Error => errors.audioTooLong({ durationMs, maxAudioDurationMs: options.maxDurationMs });

  const finish = (
    samples: Int16Array,
    source: { format: AudioFormat; sourceSampleRateHz: number; sourceChannels: number; isTruncated?: boolean },
  ): DecodedAudio => {
    if (samples.length === 0) throw errors.emptyAudio();
    const durationMs = (samples.length * 1000) / DECODED_SAMPLE_RATE_HZ;
    if (samples.length > maxSamples) throw tooLong(durationMs);
    return { samples, sampleRateHz: DECODED_SAMPLE_RATE_HZ, durationMs, ...source, isTruncated: source.isTruncated ?? false };
  };

  const decodeWithFfmpegAs = async (
    bytes: Uint8Array,
    format: AudioFormat,
    known: { sampleRateHz: number; channels: number },
    signal: AbortSignal | undefined,
  ): Promise<DecodedAudio> => {
    const decoded = await decodeWithFfmpeg(bytes, {
      format,
      ffmpegPath: options.ffmpegPath,
      tmpDir: options.tmpDir,
      timeoutMs: options.ffmpegTimeoutMs,
      maxDurationMs: options.maxDurationMs,
      signal,
      clock: deps.clock,
    });
    return finish(decoded.samples, {
      format,
      sourceSampleRateHz: decoded.sourceSampleRateHz || known.sampleRateHz,
      sourceChannels: decoded.sourceChannels || known.channels,
    });
  };

  return {
    async decode(bytes, signal) {
      signal?.throwIfAborted();
      if (bytes.length === 0) throw errors.emptyAudio();
      const content = identifyAudioContent(bytes);
      if (content.kind === 'unsupported') throw errors.unsupportedAudioFormat({ detected: content.description });
      if (content.kind === 'truncated') {
        throw errors.invalidAudio({ reason: `the ${content.container} data ends inside its header` });
      }
      const { format } = content;
      if (format === 'wav') {
        const layout = parseWav(bytes);
        if (layout.kind === 'pcm') {
          const samples = await decodePcmWav(bytes, layout, { kernel, signal, maxDurationMs: options.maxDurationMs });
          return finish(samples, {
            format,
            sourceSampleRateHz: layout.sampleRateHz,
            sourceChannels: layout.channels,
            isTruncated: layout.isTruncated,
          });
        }
        const known = { sampleRateHz: layout.sampleRateHz, channels: layout.channels };
        return decodeWithFfmpegAs(bytes, format, known, signal);
      }
      const flac = format === 'flac' ? readFlacStreamInfo(bytes) : undefined;
      if (flac !== undefined && flac.totalFrames > 0) {
        const durationMs = (flac.totalFrames * 1000) / flac.sampleRateHz;
        if (durationMs > options.maxDurationMs) throw tooLong(durationMs);
      }
      return decodeWithFfmpegAs(bytes, format, { sampleRateHz: flac?.sampleRateHz ?? 0, channels: flac?.channels ?? 0 }, signal);
    },
  };
}

async function decodePcmWav(
  bytes: Uint8Array,
  layout: PcmWavLayout,
  context: { kernel: FirKernel; signal: AbortSignal | undefined; maxDurationMs: number },
): Promise<Int16Array> {
  if (layout.frames === 0) throw errors.emptyAudio();
  // Checked before any sample is read: the frame count comes from the bytes present.
  const durationMs = (layout.frames * 1000) / layout.sampleRateHz;
  if (durationMs > context.maxDurationMs) {
    throw errors.audioTooLong({ durationMs, maxAudioDurationMs: context.maxDurationMs });
  }
  if (layout.encoding === 's16' && layout.channels === 1 && layout.sampleRateHz === DECODED_SAMPLE_RATE_HZ) {
    return pcm16LittleEndian(bytes, layout.dataOffset, layout.frames);
  }
  const samples = await resampleMono(createWavMonoSource(bytes, layout), {
    plan: planResample(layout.sampleRateHz, DECODED_SAMPLE_RATE_HZ),
    kernel: context.kernel,
    signal: context.signal,
  });
  return floatToPcm16(samples);
}
