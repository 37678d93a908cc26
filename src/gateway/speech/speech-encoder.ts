/**
 * Encodes a speech call's audio (24 kHz 16-bit mono PCM, in pieces) into its response_format as
 * it arrives: pcm as is; wav with a streaming header; mp3, opus (Ogg), aac (ADTS) and flac through
 * one ffmpeg per call (audio/ffmpeg.ts).
 *
 * NOTE: the WAV header is written before the length is known, so its RIFF and data sizes are
 * 0xFFFFFFFF (read "to the end of the file", as ffmpeg, sox and browsers do), in every case: a
 * call's audio leaves as it is synthesized, and the SSE deltas of a call concatenate to the same
 * bytes as its plain response.
 */
import { SPEECH_SAMPLE_RATE_HZ, type SpeechResponseFormat } from '../../api/speech.js';
import { startFfmpegEncoder, type FfmpegEncodedFormat } from '../audio/ffmpeg.js';

/** The Content-Type of each response format. */
export const SPEECH_CONTENT_TYPES: Readonly<Record<SpeechResponseFormat, string>> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

export interface SpeechEncoder {
  /**
   * Encodes the next samples (24 kHz); encoded bytes reach onData in order, possibly later.
   * Resolves when the encoder can take more.
   * @throws internal_error when the encoder failed
   */
  write(samples: Int16Array): Promise<void>;
  /**
   * Ends the audio; resolves once every encoded byte reached onData.
   * @throws internal_error when the encoder failed
   */
  end(): Promise<void>;
  /** Stops now; nothing more reaches onData. */
  destroy(): void;
}

export interface SpeechEncoderOptions {
  format: SpeechResponseFormat;
  ffmpegPath: string;
  onData: (bytes: Uint8Array) => void;
}

/** The size written into a streamed WAV header's RIFF and data size fields: unknown, read to the end. */
export const WAV_STREAMING_SIZE = 0xffffffff;

/** A 44-byte PCM WAV header for 16-bit mono audio at `sampleRateHz` whose length is not known yet. */
export function streamingWavHeader(sampleRateHz: number): Uint8Array {
  const header = new Uint8Array(44);
  const view = new DataView(header.buffer);
  const ascii = (at: number, text: string) => {
    for (let i = 0; i < 4; i += 1) header[at + i] = text.charCodeAt(i);
  };
  ascii(0, 'RIFF');
  view.setUint32(4, WAV_STREAMING_SIZE, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, sampleRateHz, true);
  view.setUint32(28, sampleRateHz * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  ascii(36, 'data');
  view.setUint32(40, WAV_STREAMING_SIZE, true);
  return header;
}

function toBytes(samples: Int16Array): Uint8Array {
  // Little-endian hosts only (x86-64, arm64), as everywhere PCM crosses the wire.
  return new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength).slice();
}

export function createSpeechEncoder(options: SpeechEncoderOptions): SpeechEncoder {
  const { format, onData } = options;
  switch (format) {
    case 'pcm':
    case 'wav': {
      let isStarted = false;
      let isDestroyed = false;
      const start = () => {
        if (isStarted) return;
        isStarted = true;
        if (format === 'wav') onData(streamingWavHeader(SPEECH_SAMPLE_RATE_HZ));
      };
      return {
        write(samples) {
          if (isDestroyed || samples.length === 0) return Promise.resolve();
          start();
          onData(toBytes(samples));
          return Promise.resolve();
        },
        end() {
          if (!isDestroyed) start();
          return Promise.resolve();
        },
        destroy() {
          isDestroyed = true;
        },
      };
    }
    case 'mp3':
    case 'opus':
    case 'aac':
    case 'flac':
      return startFfmpegEncoder({
        format: format satisfies FfmpegEncodedFormat,
        ffmpegPath: options.ffmpegPath,
        sampleRateHz: SPEECH_SAMPLE_RATE_HZ,
        onData,
      });
    default: {
      const unknown: never = format;
      throw new Error(`Unknown speech format ${String(unknown)}`);
    }
  }
}
