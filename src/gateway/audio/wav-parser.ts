/**
 * RIFF/WAVE (and RF64/BW64) parsing, in process: the chunk walk, the format checks and a
 * MonoSource that downmixes PCM or float samples without copying the data chunk.
 *
 * Data-size policy. A data chunk whose declared size is 0 or 0xFFFFFFFF (RF64 without a ds64
 * size) has an unknown length: the writer was streaming or did not finish; the data runs to the
 * end of the file, and so does a placeholder of about 2 GiB or more (sox and arecord write one
 * while streaming). Any other declared size larger than the bytes present means the file is
 * truncated: the whole frames present are decoded, as ffmpeg, sox and libsndfile would, and the
 * layout says `isTruncated` (the gateway answers `voxmux-audio-truncated: true`). This holds the
 * same for every layout, however much is missing (issue 16: a fraction threshold made the same
 * cut decode a 16 kHz mono file and reject a 44.1 kHz stereo one). A truncated file without one
 * whole frame is invalid_audio. A partial trailing frame is dropped. The duration limit applies
 * to the samples decoded.
 * No size read from a header is ever used to allocate memory; every allocation is bounded by
 * the bytes actually received.
 */
import { errors } from '../../core/error-catalog.js';
import type { MonoSource } from './resampler.js';

export type WavSampleEncoding = 'u8' | 's16' | 's24' | 's32' | 'f32' | 'f64';

/** Integer PCM or IEEE float samples: decoded in process. */
export interface PcmWavLayout {
  kind: 'pcm';
  encoding: WavSampleEncoding;
  channels: number;
  sampleRateHz: number;
  /** Bytes per frame (all channels of one sample instant). */
  blockAlign: number;
  /** Byte offset of the first sample in the file. */
  dataOffset: number;
  /** Whole frames present (after the data-size policy above). */
  frames: number;
  /** The data chunk holds fewer bytes than its header declares (see the data-size policy). */
  isTruncated: boolean;
}

/** A codec inside WAV (A-law, µ-law, ADPCM, GSM, MPEG) that ffmpeg decodes. */
export interface CompressedWavLayout {
  kind: 'compressed';
  formatTag: number;
  channels: number;
  sampleRateHz: number;
}

export type WavLayout = PcmWavLayout | CompressedWavLayout;

export const MAX_WAV_CHANNELS = 64;
export const MAX_WAV_SAMPLE_RATE_HZ = 384000;

const WAVE_FORMAT_PCM = 0x0001;
const WAVE_FORMAT_IEEE_FLOAT = 0x0003;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;
/** Codecs in WAV that ffmpeg decodes: MS ADPCM, A-law, µ-law, IMA ADPCM, GSM 6.10, MPEG, MP3. */
const FFMPEG_WAV_CODECS = new Set([0x0002, 0x0006, 0x0007, 0x0011, 0x0031, 0x0050, 0x0055]);
/** The KSDATAFORMAT_SUBTYPE GUID after its first two bytes (which hold the format tag). */
const SUBFORMAT_GUID_TAIL = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];
const UNKNOWN_SIZE = 0xffffffff;
/** Streaming writers (sox, arecord) put a placeholder of about 2 GiB or more in the size field. */
const STREAMING_PLACEHOLDER_BYTES = 0x7fff0000;

/**
 * Parses the header and locates the samples; reads nothing but headers.
 *
 * @throws invalid_audio for a truncated or inconsistent header
 * @throws unsupported_audio_format for a codec inside WAV that is not decoded
 */
export function parseWav(bytes: Uint8Array): WavLayout {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 12) throw invalid(`the WAV header is truncated: ${bytes.length} bytes`);
  const riffId = fourcc(bytes, 0);
  const isRf64 = riffId === 'RF64' || riffId === 'BW64';
  if ((riffId !== 'RIFF' && !isRf64) || fourcc(bytes, 8) !== 'WAVE') {
    throw invalid('the RIFF/WAVE signature is missing');
  }

  let format: WavFormat | undefined;
  let ds64DataBytes: number | undefined;
  let position = 12;
  while (position + 8 <= bytes.length) {
    const id = fourcc(bytes, position);
    const size = view.getUint32(position + 4, true);
    const bodyAt = position + 8;
    if (id === 'data') {
      if (format === undefined) throw invalid('the data chunk comes before the fmt chunk');
      return layoutFor(format, { bytes, bodyAt, size, ds64DataBytes });
    }
    if (bodyAt + size > bytes.length) {
      throw invalid(`the '${printable(id)}' chunk declares ${size} bytes but only ${bytes.length - bodyAt} remain`);
    }
    if (id === 'fmt ' && format === undefined) format = parseFmt(view, bodyAt, size);
    if (id === 'ds64' && isRf64) {
      if (size < 24) throw invalid(`the ds64 chunk is ${size} bytes: expected at least 24`);
      ds64DataBytes = view.getUint32(bodyAt + 8, true) + view.getUint32(bodyAt + 12, true) * 2 ** 32;
    }
    // Chunks are word-aligned: an odd-sized chunk is followed by one pad byte.
    position = bodyAt + size + (size & 1);
  }
  throw invalid(format === undefined ? 'the WAV file has no fmt chunk' : 'the WAV file has no data chunk');
}

interface WavFormat {
  formatTag: number;
  channels: number;
  sampleRateHz: number;
  blockAlign: number;
  bitsPerSample: number;
}

function parseFmt(view: DataView, at: number, size: number): WavFormat {
  if (size < 16) throw invalid(`the fmt chunk is ${size} bytes: expected at least 16`);
  let formatTag = view.getUint16(at, true);
  const channels = view.getUint16(at + 2, true);
  const sampleRateHz = view.getUint32(at + 4, true);
  const blockAlign = view.getUint16(at + 12, true);
  const bitsPerSample = view.getUint16(at + 14, true);
  if (formatTag === WAVE_FORMAT_EXTENSIBLE) {
    if (size < 40 || view.getUint16(at + 16, true) < 22) {
      throw invalid(`the WAVE_FORMAT_EXTENSIBLE fmt chunk is ${size} bytes: expected at least 40`);
    }
    const validBits = view.getUint16(at + 18, true);
    if (validBits > bitsPerSample) {
      throw invalid(`expected at most ${bitsPerSample} valid bits per sample: got ${validBits}`);
    }
    for (let i = 0; i < SUBFORMAT_GUID_TAIL.length; i += 1) {
      if (view.getUint8(at + 26 + i) !== SUBFORMAT_GUID_TAIL[i]) {
        throw errors.unsupportedAudioFormat({ detected: 'WAV with an unknown WAVE_FORMAT_EXTENSIBLE sub-format' });
      }
    }
    // Samples sit left-justified in their containers, so fewer valid bits decode unchanged.
    formatTag = view.getUint16(at + 24, true);
  }
  if (channels < 1 || channels > MAX_WAV_CHANNELS) {
    throw invalid(`expected 1 to ${MAX_WAV_CHANNELS} channels: got ${channels}`);
  }
  if (sampleRateHz < 1 || sampleRateHz > MAX_WAV_SAMPLE_RATE_HZ) {
    throw invalid(`expected a sample rate from 1 to ${MAX_WAV_SAMPLE_RATE_HZ} Hz: got ${sampleRateHz}`);
  }
  return { formatTag, channels, sampleRateHz, blockAlign, bitsPerSample };
}

function layoutFor(
  format: WavFormat,
  data: { bytes: Uint8Array; bodyAt: number; size: number; ds64DataBytes: number | undefined },
): WavLayout {
  const { formatTag, channels, sampleRateHz, blockAlign, bitsPerSample } = format;
  if (formatTag !== WAVE_FORMAT_PCM && formatTag !== WAVE_FORMAT_IEEE_FLOAT) {
    if (!FFMPEG_WAV_CODECS.has(formatTag)) {
      const tag = formatTag.toString(16).padStart(4, '0');
      throw errors.unsupportedAudioFormat({ detected: `WAV with codec tag 0x${tag}` });
    }
    if (blockAlign === 0) throw invalid('expected a non-zero block align');
    return { kind: 'compressed', formatTag, channels, sampleRateHz };
  }
  const encoding = sampleEncoding(formatTag, bitsPerSample);
  const expectedBlockAlign = (channels * bitsPerSample) / 8;
  if (blockAlign !== expectedBlockAlign) {
    throw invalid(
      `expected a block align of ${expectedBlockAlign} bytes ` + `for ${channels} channels of ${bitsPerSample} bits: got ${blockAlign}`,
    );
  }
  const available = Math.max(0, data.bytes.length - data.bodyAt);
  let declared: number = data.size;
  if (data.size === UNKNOWN_SIZE && data.ds64DataBytes !== undefined) declared = data.ds64DataBytes;
  const isLengthUnknown = declared === 0 || declared === UNKNOWN_SIZE || declared >= STREAMING_PLACEHOLDER_BYTES;
  const isTruncated = !isLengthUnknown && available < declared;
  const dataBytes = isLengthUnknown ? available : Math.min(declared, available);
  const frames = Math.floor(dataBytes / blockAlign);
  if (isTruncated && frames === 0) {
    throw invalid(`the data chunk declares ${declared} bytes but holds ${available}: the file is truncated before its first frame`);
  }
  return { kind: 'pcm', encoding, channels, sampleRateHz, blockAlign, dataOffset: data.bodyAt, frames, isTruncated };
}

function sampleEncoding(formatTag: number, bitsPerSample: number): WavSampleEncoding {
  if (formatTag === WAVE_FORMAT_IEEE_FLOAT) {
    if (bitsPerSample === 32) return 'f32';
    if (bitsPerSample === 64) return 'f64';
    throw invalid(`expected 32 or 64 bits per float sample: got ${bitsPerSample}`);
  }
  switch (bitsPerSample) {
    case 8:
      return 'u8';
    case 16:
      return 's16';
    case 24:
      return 's24';
    case 32:
      return 's32';
    default:
      throw invalid(`expected 8, 16, 24 or 32 bits per PCM sample: got ${bitsPerSample}`);
  }
}

/** Reads the data chunk as mono: the mean of the channels, in [-1, 1]. */
export function createWavMonoSource(bytes: Uint8Array, layout: PcmWavLayout): MonoSource {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decode = FRAME_DECODERS[layout.encoding];
  return {
    frames: layout.frames,
    read(startFrame, count, dest, destOffset) {
      const first = Math.max(0, startFrame);
      const last = Math.min(layout.frames, startFrame + count);
      if (last <= first) {
        dest.fill(0, destOffset, destOffset + count);
        return;
      }
      dest.fill(0, destOffset, destOffset + (first - startFrame));
      dest.fill(0, destOffset + (last - startFrame), destOffset + count);
      decode({
        view,
        byteAt: layout.dataOffset + first * layout.blockAlign,
        channels: layout.channels,
        count: last - first,
        dest,
        destAt: destOffset + (first - startFrame),
      });
    },
  };
}

interface FrameRun {
  view: DataView;
  byteAt: number;
  channels: number;
  count: number;
  dest: Float32Array;
  destAt: number;
}

// NOTE: one loop per encoding rather than one loop with a per-sample reader callback: the
// callback form is several times slower in V8, and this loop touches every sample of the file.
const FRAME_DECODERS: Readonly<Record<WavSampleEncoding, (run: FrameRun) => void>> = {
  u8({ view, byteAt, channels, count, dest, destAt }) {
    const scale = 1 / (128 * channels);
    let at = byteAt;
    for (let i = 0; i < count; i += 1) {
      let sum = 0;
      for (let c = 0; c < channels; c += 1) sum += view.getUint8(at++) - 128;
      dest[destAt + i] = sum * scale;
    }
  },
  s16({ view, byteAt, channels, count, dest, destAt }) {
    // Mono and stereo are most uploads; their unrolled loops run several times faster.
    if (channels === 1) {
      for (let i = 0, at = byteAt; i < count; i += 1, at += 2) dest[destAt + i] = view.getInt16(at, true) / 32768;
      return;
    }
    if (channels === 2) {
      for (let i = 0, at = byteAt; i < count; i += 1, at += 4) {
        dest[destAt + i] = (view.getInt16(at, true) + view.getInt16(at + 2, true)) / 65536;
      }
      return;
    }
    const scale = 1 / (32768 * channels);
    let at = byteAt;
    for (let i = 0; i < count; i += 1) {
      let sum = 0;
      for (let c = 0; c < channels; c += 1, at += 2) sum += view.getInt16(at, true);
      dest[destAt + i] = sum * scale;
    }
  },
  s24({ view, byteAt, channels, count, dest, destAt }) {
    const scale = 1 / (8388608 * channels);
    let at = byteAt;
    for (let i = 0; i < count; i += 1) {
      let sum = 0;
      for (let c = 0; c < channels; c += 1, at += 3) {
        sum += ((view.getUint8(at) | (view.getUint16(at + 1, true) << 8)) << 8) >> 8;
      }
      dest[destAt + i] = sum * scale;
    }
  },
  s32({ view, byteAt, channels, count, dest, destAt }) {
    const scale = 1 / (2147483648 * channels);
    let at = byteAt;
    for (let i = 0; i < count; i += 1) {
      let sum = 0;
      for (let c = 0; c < channels; c += 1, at += 4) sum += view.getInt32(at, true);
      dest[destAt + i] = sum * scale;
    }
  },
  f32({ view, byteAt, channels, count, dest, destAt }) {
    if (channels === 1) {
      for (let i = 0, at = byteAt; i < count; i += 1, at += 4) dest[destAt + i] = clampFloat(view.getFloat32(at, true));
      return;
    }
    if (channels === 2) {
      for (let i = 0, at = byteAt; i < count; i += 1, at += 8) {
        dest[destAt + i] = (clampFloat(view.getFloat32(at, true)) + clampFloat(view.getFloat32(at + 4, true))) / 2;
      }
      return;
    }
    let at = byteAt;
    for (let i = 0; i < count; i += 1) {
      let sum = 0;
      for (let c = 0; c < channels; c += 1, at += 4) sum += clampFloat(view.getFloat32(at, true));
      dest[destAt + i] = sum / channels;
    }
  },
  f64({ view, byteAt, channels, count, dest, destAt }) {
    let at = byteAt;
    for (let i = 0; i < count; i += 1) {
      let sum = 0;
      for (let c = 0; c < channels; c += 1, at += 8) sum += clampFloat(view.getFloat64(at, true));
      dest[destAt + i] = sum / channels;
    }
  },
};

/** Float samples may hold overs, infinities or NaN; none of them may reach the filter. */
function clampFloat(value: number): number {
  if (value >= -1) return value <= 1 ? value : 1;
  return value < -1 ? -1 : 0; // NaN fails both comparisons
}

function fourcc(bytes: Uint8Array, at: number): string {
  return String.fromCharCode(bytes[at] ?? 0, bytes[at + 1] ?? 0, bytes[at + 2] ?? 0, bytes[at + 3] ?? 0);
}

function printable(id: string): string {
  return id.replace(/[^\x20-\x7e]/g, '?');
}

function invalid(reason: string): Error {
  return errors.invalidAudio({ reason });
}
