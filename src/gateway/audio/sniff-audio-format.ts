/**
 * Recognises audio by its first bytes (magic numbers and header structure), never by file name
 * or declared content type. Every read is bounds-checked against the bytes actually present.
 */
import type { AudioFormat } from './audio-format.js';

/** What the first bytes of an upload say it is. */
export type AudioContent =
  /** A format we decode. */
  | { kind: 'audio'; format: AudioFormat }
  /** A container we decode, cut off before the bytes that say which codec it holds. */
  | { kind: 'truncated'; container: string }
  /** Anything else; `description` names it for the error message ('PNG image', 'Ogg Speex'). */
  | { kind: 'unsupported'; description: string };

/**
 * The audio format of `bytes`, judged by content alone, or undefined when it is not one we decode.
 *
 * @example
 * sniffAudioFormat(await readFile('speech.bin')); // 'ogg-opus'
 */
export function sniffAudioFormat(bytes: Uint8Array): AudioFormat | undefined {
  const content = identifyAudioContent(bytes);
  return content.kind === 'audio' ? content.format : undefined;
}

/** Like sniffAudioFormat, but says what unsupported or truncated content looks like. */
export function identifyAudioContent(bytes: Uint8Array): AudioContent {
  return identifyAt(bytes, 0, 0);
}

const MAX_NESTED_ID3_TAGS = 8;

function identifyAt(bytes: Uint8Array, offset: number, id3Depth: number): AudioContent {
  const at = (text: string, position = 0): boolean => hasAscii(bytes, offset + position, text);
  const remaining = bytes.length - offset;

  if (at('RIFF') || at('RF64') || at('BW64')) {
    if (remaining < 12) return { kind: 'truncated', container: 'WAV' };
    if (at('WAVE', 8)) return audio('wav');
    return unsupported(`RIFF ${printableTag(bytes, offset + 8)} data`);
  }
  if (at('RIFX')) return unsupported('big-endian WAV (RIFX)');
  if (at('fLaC')) return remaining < 42 ? { kind: 'truncated', container: 'FLAC' } : audio('flac');
  if (at('OggS')) return identifyOgg(bytes, offset);
  if (at('\x1a\x45\xdf\xa3')) return identifyEbml(bytes, offset);
  if (remaining >= 8 && isIsoBmffBox(bytes, offset)) return identifyIsoBmff(bytes, offset);
  if (at('ID3')) {
    if (remaining < 10) return { kind: 'truncated', container: 'MP3 (ID3 tag)' };
    const tagBytes = id3TagBytes(bytes, offset);
    if (tagBytes !== undefined) {
      const next = offset + tagBytes;
      if (next + 4 > bytes.length) return { kind: 'truncated', container: 'MP3 (ID3 tag without audio)' };
      if (id3Depth >= MAX_NESTED_ID3_TAGS) return audio('mp3');
      const inner = identifyAt(bytes, next, id3Depth + 1);
      // An ID3 tag almost always fronts MPEG audio; the mp3 demuxer resyncs past junk after it.
      return inner.kind === 'audio' ? inner : audio('mp3');
    }
  }
  if (remaining >= 4 && bytes[offset] === 0xff) {
    if (isAdtsStream(bytes, offset)) return audio('aac');
    if (isMpegAudioStream(bytes, offset)) return audio('mp3');
  }
  return unsupported(describeOther(bytes, offset));
}

function audio(format: AudioFormat): AudioContent {
  return { kind: 'audio', format };
}

function unsupported(description: string): AudioContent {
  return { kind: 'unsupported', description };
}

// --- Ogg -------------------------------------------------------------------------------------

function identifyOgg(bytes: Uint8Array, offset: number): AudioContent {
  // Page header: 27 bytes, then one lacing byte per segment; the first packet follows.
  const segmentCountAt = offset + 26;
  if (segmentCountAt >= bytes.length) return { kind: 'truncated', container: 'Ogg' };
  const packetAt = segmentCountAt + 1 + (bytes[segmentCountAt] ?? 0);
  if (packetAt + 8 > bytes.length) return { kind: 'truncated', container: 'Ogg' };
  if (hasAscii(bytes, packetAt, 'OpusHead')) return audio('ogg-opus');
  if (hasAscii(bytes, packetAt, '\x01vorbis')) return audio('ogg-vorbis');
  if (hasAscii(bytes, packetAt, '\x7fFLAC')) return audio('ogg-flac');
  if (hasAscii(bytes, packetAt, 'Speex   ')) return unsupported('Ogg Speex');
  if (hasAscii(bytes, packetAt, '\x80theora')) return unsupported('Ogg Theora video');
  return unsupported('Ogg stream of an unknown codec');
}

// --- EBML (Matroska, WebM) --------------------------------------------------------------------

const EBML_DOC_TYPE_ID = 0x4282;
const MAX_EBML_HEADER_BYTES = 4096;

function identifyEbml(bytes: Uint8Array, offset: number): AudioContent {
  const truncated: AudioContent = { kind: 'truncated', container: 'WebM/Matroska' };
  const size = readEbmlVint(bytes, offset + 4, false);
  if (size === undefined) return truncated;
  const bodyStart = offset + 4 + size.length;
  // An unknown-size or huge EBML header is not something a real muxer writes.
  if (size.value === undefined || size.value > MAX_EBML_HEADER_BYTES) return unsupported('malformed EBML header');
  const bodyEnd = bodyStart + size.value;
  let position = bodyStart;
  while (position < bodyEnd) {
    const id = readEbmlVint(bytes, position, true);
    if (id === undefined) return truncated;
    const length = readEbmlVint(bytes, position + id.length, false);
    if (length === undefined) return truncated;
    const valueAt = position + id.length + length.length;
    if (length.value === undefined || valueAt + length.value > bodyEnd) return unsupported('malformed EBML header');
    if (id.value === EBML_DOC_TYPE_ID) {
      if (valueAt + length.value > bytes.length) return truncated;
      const docType = String.fromCharCode(...bytes.subarray(valueAt, valueAt + length.value)).replace(/\0+$/, '');
      if (docType === 'webm') return audio('webm');
      if (docType === 'matroska') return audio('matroska');
      return unsupported(`EBML document of type '${sanitize(docType)}'`);
    }
    position = valueAt + length.value;
  }
  if (bodyEnd > bytes.length) return truncated;
  // The EBML specification makes 'matroska' the DocType when the element is absent.
  return audio('matroska');
}

/**
 * Reads an EBML variable-length integer: the count of leading zero bits in the first byte gives
 * the length. IDs keep their marker bit; sizes drop it, and all-ones means "unknown" (undefined).
 */
function readEbmlVint(bytes: Uint8Array, position: number, keepMarker: boolean): { value: number | undefined; length: number } | undefined {
  const first = bytes[position];
  if (first === undefined || first === 0) return undefined;
  const length = Math.clz32(first) - 23; // clz32 of a byte value counts 24 leading zeros already
  if (position + length > bytes.length) return undefined;
  let value = keepMarker ? first : first & (0xff >> length);
  let isAllOnes = value === 0xff >> length;
  for (let i = 1; i < length; i += 1) {
    const byte = bytes[position + i] ?? 0;
    value = value * 256 + byte;
    isAllOnes &&= byte === 0xff;
  }
  return { value: !keepMarker && isAllOnes ? undefined : value, length };
}

// --- ISO BMFF (MP4, M4A, MOV, 3GP) -----------------------------------------------------------

const QUICKTIME_TOP_BOXES = new Set(['moov', 'mdat', 'free', 'skip', 'wide', 'pnot']);
const IMAGE_BRANDS = new Set(['heic', 'heix', 'hevc', 'hevx', 'heim', 'heis', 'mif1', 'msf1', 'avif', 'avis', 'crx ']);

function isIsoBmffBox(bytes: Uint8Array, offset: number): boolean {
  const type = String.fromCharCode(...bytes.subarray(offset + 4, offset + 8));
  if (type === 'ftyp') return true;
  if (!QUICKTIME_TOP_BOXES.has(type)) return false;
  // Old QuickTime files start without 'ftyp'; require a plausible box size (1 = 64-bit size).
  const size = readU32Be(bytes, offset);
  return size === 1 || size >= 8;
}

function identifyIsoBmff(bytes: Uint8Array, offset: number): AudioContent {
  if (!hasAscii(bytes, offset + 4, 'ftyp')) return audio('m4a');
  if (offset + 12 > bytes.length) return { kind: 'truncated', container: 'MP4/M4A' };
  const brand = String.fromCharCode(...bytes.subarray(offset + 8, offset + 12));
  if (IMAGE_BRANDS.has(brand)) return unsupported(`ISO BMFF image (brand '${sanitize(brand)}')`);
  return audio('m4a');
}

// --- MPEG audio, ADTS, ID3 --------------------------------------------------------------------

function id3TagBytes(bytes: Uint8Array, offset: number): number | undefined {
  const major = bytes[offset + 3] ?? 0xff;
  const flags = bytes[offset + 5] ?? 0;
  if (major < 2 || major > 4) return undefined;
  let size = 0;
  for (let i = 6; i < 10; i += 1) {
    const byte = bytes[offset + i] ?? 0x80;
    if (byte >= 0x80) return undefined; // sizes are "synchsafe": 7 bits per byte
    size = size * 128 + byte;
  }
  const hasFooter = (flags & 0x10) !== 0;
  return 10 + size + (hasFooter ? 10 : 0);
}

const MPEG_SAMPLE_RATES_HZ: readonly (readonly number[])[] = [
  [11025, 12000, 8000], // MPEG 2.5
  [], // reserved
  [22050, 24000, 16000], // MPEG 2
  [44100, 48000, 32000], // MPEG 1
];
// kbit/s by [isMpeg1][layerIndex 1..3 as stored: 3 = Layer I, 2 = Layer II, 1 = Layer III][bitrateIndex]
const MPEG1_BITRATES_KBPS: Readonly<Record<number, readonly number[]>> = {
  3: [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  2: [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  1: [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
};
const MPEG2_BITRATES_KBPS: Readonly<Record<number, readonly number[]>> = {
  3: [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  2: [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
  1: [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};

/**
 * The byte length of the MPEG audio frame whose header is at `offset`: 0 for a valid free-format
 * header (length unknown), undefined when the four bytes are not a valid frame header.
 */
function mpegFrameBytes(bytes: Uint8Array, offset: number): number | undefined {
  const b1 = bytes[offset + 1];
  const b2 = bytes[offset + 2];
  if (bytes[offset] !== 0xff || b1 === undefined || b2 === undefined || (b1 & 0xe0) !== 0xe0) return undefined;
  const version = (b1 >> 3) & 3;
  const layer = (b1 >> 1) & 3;
  const bitrateIndex = b2 >> 4;
  const rateIndex = (b2 >> 2) & 3;
  if (version === 1 || layer === 0 || bitrateIndex === 15 || rateIndex === 3) return undefined;
  if (bitrateIndex === 0) return 0;
  const isMpeg1 = version === 3;
  const bitrateBps = ((isMpeg1 ? MPEG1_BITRATES_KBPS : MPEG2_BITRATES_KBPS)[layer]?.[bitrateIndex] ?? 0) * 1000;
  const sampleRateHz = MPEG_SAMPLE_RATES_HZ[version]?.[rateIndex] ?? 0;
  if (bitrateBps === 0 || sampleRateHz === 0) return undefined;
  const padding = (b2 >> 1) & 1;
  if (layer === 3) return (Math.floor((12 * bitrateBps) / sampleRateHz) + padding) * 4;
  const samplesPerFrameOver8 = layer === 1 && !isMpeg1 ? 72 : 144;
  return Math.floor((samplesPerFrameOver8 * bitrateBps) / sampleRateHz) + padding;
}

/** A frame header at `offset`, and a second one right after it when the bytes reach that far. */
function isMpegAudioStream(bytes: Uint8Array, offset: number): boolean {
  const frameBytes = mpegFrameBytes(bytes, offset);
  if (frameBytes === undefined) return false;
  const next = offset + frameBytes;
  if (frameBytes === 0 || next + 4 > bytes.length) return true;
  return mpegFrameBytes(bytes, next) !== undefined;
}

function adtsFrameBytes(bytes: Uint8Array, offset: number): number | undefined {
  if (offset + 7 > bytes.length) return undefined;
  const b1 = bytes[offset + 1] ?? 0;
  const b2 = bytes[offset + 2] ?? 0;
  if (bytes[offset] !== 0xff || (b1 & 0xf6) !== 0xf0) return undefined;
  if (((b2 >> 2) & 0xf) > 12) return undefined; // sampling frequency index
  // 13-bit frame length, header included, across bytes 3 to 5.
  const length = (((bytes[offset + 3] ?? 0) & 3) << 11) | ((bytes[offset + 4] ?? 0) << 3) | ((bytes[offset + 5] ?? 0) >> 5);
  return length >= 7 ? length : undefined;
}

function isAdtsStream(bytes: Uint8Array, offset: number): boolean {
  const frameBytes = adtsFrameBytes(bytes, offset);
  if (frameBytes === undefined) return false;
  const next = offset + frameBytes;
  if (next + 7 > bytes.length) return true;
  return adtsFrameBytes(bytes, next) !== undefined;
}

// --- FLAC STREAMINFO --------------------------------------------------------------------------

/** The fields of a FLAC STREAMINFO block that bound the decode before it starts. */
export interface FlacStreamInfo {
  sampleRateHz: number;
  channels: number;
  /** 0 when the encoder did not know the length. */
  totalFrames: number;
}

/** Reads STREAMINFO from a native FLAC file (it must be the first metadata block). */
export function readFlacStreamInfo(bytes: Uint8Array): FlacStreamInfo | undefined {
  if (!hasAscii(bytes, 0, 'fLaC') || bytes.length < 42) return undefined;
  const blockType = (bytes[4] ?? 0) & 0x7f;
  const blockBytes = ((bytes[5] ?? 0) << 16) | ((bytes[6] ?? 0) << 8) | (bytes[7] ?? 0);
  if (blockType !== 0 || blockBytes < 34) return undefined;
  const b = (i: number): number => bytes[8 + i] ?? 0;
  const sampleRateHz = (b(10) << 12) | (b(11) << 4) | (b(12) >> 4);
  const channels = ((b(12) >> 1) & 7) + 1;
  const totalFrames = (b(13) & 0x0f) * 2 ** 32 + readU32Be(bytes, 8 + 14);
  if (sampleRateHz === 0) return undefined;
  return { sampleRateHz, channels, totalFrames };
}

// --- Descriptions of everything else ---------------------------------------------------------

const OTHER_SIGNATURES: readonly (readonly [string, number, string])[] = [
  ['\x89PNG', 0, 'PNG image'],
  ['\xff\xd8\xff', 0, 'JPEG image'],
  ['GIF8', 0, 'GIF image'],
  ['%PDF', 0, 'PDF document'],
  ['PK\x03\x04', 0, 'ZIP archive'],
  ['\x1f\x8b', 0, 'gzip data'],
  ['AIFF', 8, 'AIFF audio'],
  ['AIFC', 8, 'AIFF-C audio'],
  ['#!AMR', 0, 'AMR audio'],
  ['caff', 0, 'CAF audio'],
  ['\x30\x26\xb2\x75\x8e\x66\xcf\x11', 0, 'ASF/WMA audio'],
  ['.snd', 0, 'Sun AU audio'],
  ['MThd', 0, 'MIDI data'],
  ['\x7fELF', 0, 'ELF executable'],
];

function describeOther(bytes: Uint8Array, offset: number): string {
  for (const [signature, at, description] of OTHER_SIGNATURES) {
    if (hasAscii(bytes, offset + at, signature)) return description;
  }
  const head = bytes.subarray(offset, offset + 512);
  if (head.length > 0 && isText(head)) {
    const first = String.fromCharCode(...head).trimStart()[0];
    if (first === '{' || first === '[') return 'JSON or other text';
    if (first === '<') return 'XML or HTML text';
    return 'text';
  }
  const hex = [...bytes.subarray(offset, offset + 4)].map((b) => b.toString(16).padStart(2, '0')).join('');
  return hex.length === 0 ? 'no data' : `unrecognised data starting with 0x${hex}`;
}

function isText(head: Uint8Array): boolean {
  for (const byte of head) {
    const isControl = byte < 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d;
    if (isControl || byte === 0x7f) return false;
  }
  return true;
}

// --- Byte helpers -----------------------------------------------------------------------------

function hasAscii(bytes: Uint8Array, position: number, text: string): boolean {
  if (position < 0 || position + text.length > bytes.length) return false;
  for (let i = 0; i < text.length; i += 1) {
    if (bytes[position + i] !== text.charCodeAt(i)) return false;
  }
  return true;
}

function readU32Be(bytes: Uint8Array, position: number): number {
  return (
    (bytes[position] ?? 0) * 2 ** 24 + ((bytes[position + 1] ?? 0) << 16) + ((bytes[position + 2] ?? 0) << 8) + (bytes[position + 3] ?? 0)
  );
}

function printableTag(bytes: Uint8Array, position: number): string {
  return `'${sanitize(String.fromCharCode(...bytes.subarray(position, position + 4)))}'`;
}

/** Keeps client-supplied text in error messages printable and short. */
function sanitize(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?').slice(0, 32);
}
