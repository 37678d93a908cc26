/**
 * Writes WAV files in every layout the parser reads. Tests and the benchmark build their inputs
 * with it, and patch the returned bytes (offsets in WAV_FIELD_OFFSETS) to make malformed ones.
 */
import type { WavSampleEncoding } from './wav-parser.js';

export interface WavBuildOptions {
  sampleRateHz: number;
  encoding: WavSampleEncoding;
  /** One array per channel, all the same length, values in [-1, 1]. */
  channelData: readonly Float32Array[];
  /**
   * 'plain': 44-byte header with a WAVEFORMAT(EX) fmt chunk; 'extensible': WAVE_FORMAT_EXTENSIBLE;
   * 'rf64': RF64 with a ds64 chunk and 0xFFFFFFFF placeholders. @default 'plain'
   */
  layout?: 'plain' | 'extensible' | 'rf64';
  /** Chunks written between fmt and data, e.g. a LIST chunk of odd size. */
  extraChunks?: readonly { id: string; body: Uint8Array }[];
}

/** Byte offsets of header fields in a 'plain' file without extra chunks. */
export const WAV_FIELD_OFFSETS = {
  riffSize: 4,
  fmtSize: 16,
  formatTag: 20,
  channels: 22,
  sampleRateHz: 24,
  byteRate: 28,
  blockAlign: 32,
  bitsPerSample: 34,
  dataId: 36,
  dataSize: 40,
  data: 44,
} as const;

const BYTES_PER_SAMPLE: Readonly<Record<WavSampleEncoding, number>> = { u8: 1, s16: 2, s24: 3, s32: 4, f32: 4, f64: 8 };

export function encodeWav(options: WavBuildOptions): Uint8Array {
  const { sampleRateHz, encoding, channelData } = options;
  const layout = options.layout ?? 'plain';
  const channels = channelData.length;
  const frames = channelData[0]?.length ?? 0;
  const bytesPerSample = BYTES_PER_SAMPLE[encoding];
  const blockAlign = channels * bytesPerSample;
  const dataBytes = frames * blockAlign;
  const isFloat = encoding === 'f32' || encoding === 'f64';
  const fmtBytes = layout === 'extensible' ? 40 : isFloat ? 18 : 16;
  const extra = (options.extraChunks ?? []).map((chunk) => ({
    ...chunk,
    padded: chunk.body.length + (chunk.body.length & 1),
  }));
  const ds64Bytes = layout === 'rf64' ? 8 + 28 : 0;
  const headerBytes = 12 + ds64Bytes + 8 + fmtBytes + extra.reduce((sum, chunk) => sum + 8 + chunk.padded, 0) + 8;
  const bytes = new Uint8Array(headerBytes + dataBytes + (dataBytes & 1));
  const view = new DataView(bytes.buffer);
  let at = 0;
  const ascii = (text: string): void => {
    for (let i = 0; i < 4; i += 1) bytes[at + i] = text.charCodeAt(i);
    at += 4;
  };
  const u16 = (value: number): void => {
    view.setUint16(at, value, true);
    at += 2;
  };
  const u32 = (value: number): void => {
    view.setUint32(at, value, true);
    at += 4;
  };
  const riffSize = bytes.length - 8;
  ascii(layout === 'rf64' ? 'RF64' : 'RIFF');
  u32(layout === 'rf64' ? 0xffffffff : riffSize);
  ascii('WAVE');
  if (layout === 'rf64') {
    ascii('ds64');
    u32(28);
    u32(riffSize);
    u32(0);
    u32(dataBytes);
    u32(0);
    u32(frames);
    u32(0);
    u32(0); // table length
  }
  ascii('fmt ');
  u32(fmtBytes);
  const formatTag = isFloat ? 0x0003 : 0x0001;
  u16(layout === 'extensible' ? 0xfffe : formatTag);
  u16(channels);
  u32(sampleRateHz);
  u32(sampleRateHz * blockAlign);
  u16(blockAlign);
  u16(bytesPerSample * 8);
  if (layout === 'extensible') {
    u16(22);
    u16(bytesPerSample * 8);
    u32(channels === 2 ? 0x3 : 0);
    u16(formatTag);
    for (const byte of [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71]) {
      bytes[at++] = byte;
    }
  } else if (isFloat) {
    u16(0);
  }
  for (const chunk of extra) {
    ascii(chunk.id);
    u32(chunk.body.length);
    bytes.set(chunk.body, at);
    at += chunk.padded;
  }
  ascii('data');
  u32(layout === 'rf64' ? 0xffffffff : dataBytes);
  for (let i = 0; i < frames; i += 1) {
    for (const samples of channelData) {
      writeSample(view, at, encoding, samples[i] ?? 0);
      at += bytesPerSample;
    }
  }
  return bytes;
}

function writeSample(view: DataView, at: number, encoding: WavSampleEncoding, sample: number): void {
  const value = Math.max(-1, Math.min(1, sample));
  switch (encoding) {
    case 'u8':
      view.setUint8(at, Math.round(value * 127 + 128));
      return;
    case 's16':
      view.setInt16(at, Math.round(value * 32767), true);
      return;
    case 's24': {
      const scaled = Math.round(value * 8388607);
      view.setUint8(at, scaled & 0xff);
      view.setInt16(at + 1, scaled >> 8, true);
      return;
    }
    case 's32':
      view.setInt32(at, Math.round(value * 2147483647), true);
      return;
    case 'f32':
      view.setFloat32(at, value, true);
      return;
    case 'f64':
      view.setFloat64(at, value, true);
      return;
  }
}
