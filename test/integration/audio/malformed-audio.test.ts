/**
 * The malformed-input corpus: every case must fail with its catalogued code and nothing else
 * (no RangeError, no hang, no crash), and a seeded fuzzer mutates valid headers to look for
 * anything the hand-written cases missed.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { generateAudioFixtures } from '../../fixtures/audio/generate.js';
import { isServiceError } from '../../../src/core/errors.js';
import { createAudioDecoder, type AudioDecoder } from '../../../src/gateway/audio/index.js';
import { encodeWav, WAV_FIELD_OFFSETS } from '../../../src/gateway/audio/wav-builder.js';

type AudioErrorCode = 'invalid_audio' | 'empty_audio' | 'unsupported_audio_format' | 'audio_too_long';

let workDir = '';
let decodeDir = '';
let decoder: AudioDecoder;
const real = new Map<string, Uint8Array>();

before(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'voxmux-malformed-audio-test-'));
  decodeDir = join(workDir, 'decode');
  const only = ['tone.mp3', 'tone.flac', 'tone.opus', 'tone.ogg', 'tone.webm', 'tone-moov-at-end.m4a', 'tone.aac'];
  const paths = await generateAudioFixtures(join(workDir, 'fixtures'), { only });
  for (const [file, path] of paths) real.set(file, new Uint8Array(await readFile(path)));
  await mkdir(decodeDir);
  decoder = createAudioDecoder({ maxDurationMs: 60_000, ffmpegPath: 'ffmpeg', tmpDir: decodeDir, ffmpegTimeoutMs: 20_000 });
});

after(async () => {
  await rm(workDir, { recursive: true, force: true });
});

const ascii = (text: string): number[] => [...text].map((c) => c.charCodeAt(0));
const bytesOf = (...parts: (number[] | Uint8Array | string)[]): Uint8Array =>
  new Uint8Array(parts.flatMap((part) => (typeof part === 'string' ? ascii(part) : [...part])));
const u32le = (value: number): number[] => [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, (value >>> 24) & 0xff];
const u16le = (value: number): number[] => [value & 0xff, (value >>> 8) & 0xff];

function seededBytes(count: number, seed: number): Uint8Array {
  let state = seed;
  return new Uint8Array(count).map(() => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return (state >>> 16) & 0xff;
  });
}

/** A valid 16-bit mono 16 kHz WAV of `frames` frames of a ramp. */
function wav(frames = 100): Uint8Array {
  return encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [new Float32Array(frames).map((_, i) => (i % 50) / 100)] });
}

function patched(edit: (view: DataView) => void, bytes = wav()): Uint8Array {
  const copy = bytes.slice();
  edit(new DataView(copy.buffer));
  return copy;
}

function fmtChunk(fields: {
  tag?: number;
  channels?: number;
  rateHz?: number;
  blockAlign?: number;
  bits?: number;
  extra?: number[];
}): number[] {
  const { tag = 1, channels = 1, rateHz = 16000, blockAlign = 2, bits = 16, extra = [] } = fields;
  const body = [
    ...u16le(tag),
    ...u16le(channels),
    ...u32le(rateHz),
    ...u32le(rateHz * blockAlign),
    ...u16le(blockAlign),
    ...u16le(bits),
    ...extra,
  ];
  return [...ascii('fmt '), ...u32le(body.length), ...body];
}

function riff(...chunks: number[][]): Uint8Array {
  const body = chunks.flat();
  return bytesOf('RIFF', u32le(4 + body.length), 'WAVE', body);
}

function realFile(file: string): Uint8Array {
  const bytes = real.get(file);
  assert.ok(bytes !== undefined, `fixture ${file} was not generated`);
  return bytes;
}

interface MalformedCase {
  name: string;
  bytes: () => Uint8Array;
  code: AudioErrorCode;
}

const GUID_TAIL = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];
const twoByteData = [...ascii('data'), ...u32le(2), 0, 0];

/** A 40-byte WAVE_FORMAT_EXTENSIBLE fmt chunk for 16-bit mono PCM. */
function extensibleFmt(fields: { validBits: number; guidTail: number[] }): number[] {
  const extension = [...u16le(22), ...u16le(fields.validBits), ...u32le(4), ...u16le(1), ...fields.guidTail];
  return fmtChunk({ tag: 0xfffe, extra: extension });
}

const CASES: MalformedCase[] = [
  { name: 'an empty file', bytes: () => new Uint8Array(0), code: 'empty_audio' },
  { name: 'one byte', bytes: () => bytesOf('R'), code: 'unsupported_audio_format' },
  { name: "'RIFF' and nothing else", bytes: () => bytesOf('RIFF'), code: 'invalid_audio' },
  { name: 'a RIFF/WAVE header without chunks', bytes: () => wav().subarray(0, 12), code: 'invalid_audio' },
  { name: 'a header cut inside the fmt chunk', bytes: () => wav().subarray(0, 30), code: 'invalid_audio' },
  { name: 'a header cut right after the fmt chunk', bytes: () => wav().subarray(0, 36), code: 'invalid_audio' },
  {
    name: "wrong magic: 'RIFX' (big-endian WAV)",
    bytes: () => patched((v) => v.setUint8(3, 0x58)),
    code: 'unsupported_audio_format',
  },
  {
    name: "wrong form type: 'RIFF' holding AVI",
    bytes: () => bytesOf('RIFF', u32le(100), 'AVI LIST', u32le(4), 'hdrl'),
    code: 'unsupported_audio_format',
  },
  {
    name: 'a text file named speech.wav',
    bytes: () => bytesOf('Hello, this is a transcript, not a recording.\n'),
    code: 'unsupported_audio_format',
  },
  { name: 'RIFF/WAVE with fmt but no data chunk', bytes: () => riff(fmtChunk({})), code: 'invalid_audio' },
  {
    name: 'RIFF/WAVE with data before fmt',
    bytes: () => riff([...ascii('data'), ...u32le(4), 0, 0, 0, 0], fmtChunk({})),
    code: 'invalid_audio',
  },
  { name: 'zero samples (data size 0, nothing after it)', bytes: () => wav(0), code: 'empty_audio' },
  {
    name: 'less than one frame of data',
    bytes: () => riff(fmtChunk({}), [...ascii('data'), ...u32le(1), 7, 0]),
    code: 'empty_audio',
  },
  {
    name: 'data size 4 GB with no data present',
    bytes: () => patched((v) => v.setUint32(WAV_FIELD_OFFSETS.dataSize, 0xf0000000, true), wav(0)),
    code: 'empty_audio',
  },
  {
    name: '0 channels',
    bytes: () => patched((v) => v.setUint16(WAV_FIELD_OFFSETS.channels, 0, true)),
    code: 'invalid_audio',
  },
  {
    name: '65535 channels',
    bytes: () => patched((v) => v.setUint16(WAV_FIELD_OFFSETS.channels, 65535, true)),
    code: 'invalid_audio',
  },
  {
    name: '0 Hz',
    bytes: () => patched((v) => v.setUint32(WAV_FIELD_OFFSETS.sampleRateHz, 0, true)),
    code: 'invalid_audio',
  },
  {
    name: '4 GHz',
    bytes: () => patched((v) => v.setUint32(WAV_FIELD_OFFSETS.sampleRateHz, 0xffffffff, true)),
    code: 'invalid_audio',
  },
  {
    name: 'an odd block align (3 for 16-bit mono)',
    bytes: () => patched((v) => v.setUint16(WAV_FIELD_OFFSETS.blockAlign, 3, true)),
    code: 'invalid_audio',
  },
  {
    name: 'block align 0',
    bytes: () => patched((v) => v.setUint16(WAV_FIELD_OFFSETS.blockAlign, 0, true)),
    code: 'invalid_audio',
  },
  {
    name: 'fmt chunk size 0',
    bytes: () => patched((v) => v.setUint32(WAV_FIELD_OFFSETS.fmtSize, 0, true)),
    code: 'invalid_audio',
  },
  {
    name: 'fmt chunk size 14 (no bits per sample)',
    bytes: () =>
      riff(
        fmtChunk({})
          .slice(0, 22)
          .map((b, i) => (i === 4 ? 14 : b)),
        [...ascii('data'), ...u32le(2), 0, 0],
      ),
    code: 'invalid_audio',
  },
  {
    name: 'fmt chunk size far past the end of the file',
    bytes: () => patched((v) => v.setUint32(WAV_FIELD_OFFSETS.fmtSize, 0x7fffffff, true)),
    code: 'invalid_audio',
  },
  {
    name: '0 bits per sample',
    bytes: () => patched((v) => v.setUint16(WAV_FIELD_OFFSETS.bitsPerSample, 0, true)),
    code: 'invalid_audio',
  },
  {
    name: '13 bits per sample',
    bytes: () => patched((v) => v.setUint16(WAV_FIELD_OFFSETS.bitsPerSample, 13, true)),
    code: 'invalid_audio',
  },
  {
    name: '16-bit IEEE float',
    bytes: () => patched((v) => v.setUint16(WAV_FIELD_OFFSETS.formatTag, 3, true)),
    code: 'invalid_audio',
  },
  {
    name: 'WAVE_FORMAT_EXTENSIBLE with an 18-byte fmt chunk',
    bytes: () => riff(fmtChunk({ tag: 0xfffe, extra: [0, 0] }), [...ascii('data'), ...u32le(2), 0, 0]),
    code: 'invalid_audio',
  },
  {
    name: 'WAVE_FORMAT_EXTENSIBLE with an unknown sub-format GUID',
    bytes: () => riff(extensibleFmt({ validBits: 16, guidTail: GUID_TAIL.map((b) => b ^ 0x5a) }), twoByteData),
    code: 'unsupported_audio_format',
  },
  {
    name: 'WAVE_FORMAT_EXTENSIBLE claiming more valid bits than its container',
    bytes: () => riff(extensibleFmt({ validBits: 20, guidTail: GUID_TAIL }), twoByteData),
    code: 'invalid_audio',
  },
  {
    name: 'a WAV codec nobody decodes (tag 0x1234)',
    bytes: () => patched((v) => v.setUint16(WAV_FIELD_OFFSETS.formatTag, 0x1234, true)),
    code: 'unsupported_audio_format',
  },
  {
    name: 'a chunk before data claiming 1 MB that is not there',
    bytes: () => riff(fmtChunk({}), [...ascii('LIST'), ...u32le(1 << 20), 1, 2, 3]),
    code: 'invalid_audio',
  },
  {
    name: 'an ID3 tag and no audio',
    bytes: () => bytesOf('ID3', [4, 0, 0, 0, 0, 0, 20], new Array<number>(20).fill(0)),
    code: 'invalid_audio',
  },
  {
    name: 'an mp3 cut to its first 100 bytes',
    bytes: () => realFile('tone.mp3').subarray(0, 100),
    code: 'invalid_audio',
  },
  {
    name: 'an mp3 frame header followed by random bytes',
    bytes: () => bytesOf([0xff, 0xfb, 0x90, 0x64], seededBytes(300, 3)),
    code: 'invalid_audio',
  },
  {
    name: 'a FLAC file cut inside STREAMINFO',
    bytes: () => realFile('tone.flac').subarray(0, 30),
    code: 'invalid_audio',
  },
  {
    name: 'a FLAC file cut after its metadata',
    bytes: () => realFile('tone.flac').subarray(0, 200),
    code: 'invalid_audio',
  },
  {
    name: 'an Ogg Opus file cut inside its first page',
    bytes: () => realFile('tone.opus').subarray(0, 30),
    code: 'invalid_audio',
  },
  {
    name: 'an Ogg Opus file cut after its headers',
    bytes: () => realFile('tone.opus').subarray(0, 200),
    code: 'invalid_audio',
  },
  {
    name: 'an Ogg Vorbis file cut inside its setup header',
    bytes: () => realFile('tone.ogg').subarray(0, 3000),
    code: 'invalid_audio',
  },
  {
    name: 'an Ogg Opus head followed by random bytes',
    bytes: () => bytesOf(realFile('tone.opus').subarray(0, 60), seededBytes(2000, 5)),
    code: 'invalid_audio',
  },
  {
    name: 'a WebM file cut inside its EBML header',
    bytes: () => realFile('tone.webm').subarray(0, 20),
    code: 'invalid_audio',
  },
  {
    name: 'a WebM file cut inside its segment header',
    bytes: () => realFile('tone.webm').subarray(0, 100),
    code: 'invalid_audio',
  },
  {
    name: 'an M4A with its moov box at the end, cut before it',
    bytes: () => realFile('tone-moov-at-end.m4a').subarray(0, 4000),
    code: 'invalid_audio',
  },
  {
    name: 'an ftyp box and nothing else',
    bytes: () => bytesOf([0, 0, 0, 16], 'ftypM4A ', [0, 0, 0, 0]),
    code: 'invalid_audio',
  },
  { name: 'random bytes', bytes: () => bytesOf([0x00], seededBytes(4096, 11)), code: 'unsupported_audio_format' },
  {
    name: 'a PNG image',
    bytes: () => bytesOf([0x89], 'PNG\r\n\x1a\n', u32le(13).reverse(), 'IHDR', seededBytes(17, 2)),
    code: 'unsupported_audio_format',
  },
  {
    name: 'a PDF header',
    bytes: () => bytesOf('%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n'),
    code: 'unsupported_audio_format',
  },
  {
    name: 'a JSON document',
    bytes: () => bytesOf('{"file": "speech.wav", "model": "whisper-1"}'),
    code: 'unsupported_audio_format',
  },
  {
    name: 'an HTML page',
    bytes: () => bytesOf('<!DOCTYPE html><html><body>404</body></html>'),
    code: 'unsupported_audio_format',
  },
  { name: 'a ZIP archive', bytes: () => bytesOf('PK\x03\x04', seededBytes(60, 4)), code: 'unsupported_audio_format' },
  {
    name: 'a HEIF image in an ISO BMFF box',
    bytes: () => bytesOf([0, 0, 0, 24], 'ftypheic', [0, 0, 0, 0], 'mif1heic'),
    code: 'unsupported_audio_format',
  },
  {
    name: 'an Ogg Speex stream',
    bytes: () => bytesOf('OggS', [0, 2], new Array<number>(20).fill(0), [1, 80], 'Speex   ', new Array<number>(72).fill(0)),
    code: 'unsupported_audio_format',
  },
  {
    name: 'an AIFF file',
    bytes: () => bytesOf('FORM', [0, 0, 0, 30], 'AIFFCOMM', new Array<number>(22).fill(0)),
    code: 'unsupported_audio_format',
  },
  {
    name: 'an M3U playlist (would make ffmpeg open other files if probed)',
    bytes: () => bytesOf('#EXTM3U\n#EXTINF:10,\nfile:///etc/passwd\n'),
    code: 'unsupported_audio_format',
  },
];

describe('createAudioDecoder: malformed input', () => {
  it(`has at least 30 cases (${CASES.length})`, () => {
    assert.ok(CASES.length >= 30);
  });

  for (const malformed of CASES) {
    it(`fails ${malformed.code} for ${malformed.name}`, async () => {
      await assert.rejects(decoder.decode(malformed.bytes()), (error: unknown) => {
        assert.ok(isServiceError(error), `expected a ServiceError: got ${String(error)}`);
        assert.equal(error.code, malformed.code, error.message);
        assert.equal(error.param, 'file');
        assert.ok(error.message.length < 600, 'messages stay short');
        return true;
      });
    });
  }

  it('decodes the frames present when a data chunk declares 4 GB but holds 100 bytes', async () => {
    const bytes = patched((v) => v.setUint32(WAV_FIELD_OFFSETS.dataSize, 0xf0000000, true), wav(50));
    const audio = await decoder.decode(bytes);
    assert.equal(audio.samples.length, 50);
  });

  it('decodes the first part of a compressed file cut in the middle, as players do', async () => {
    const mp3 = realFile('tone.mp3');
    const audio = await decoder.decode(mp3.subarray(0, Math.floor(mp3.length / 2)));
    assert.ok(audio.durationMs > 800 && audio.durationMs < 1700, `decoded ${audio.durationMs} ms`);
  });

  it('leaves no temporary files behind', async () => {
    assert.deepEqual(await readdir(decodeDir), []);
  });

  it('never fails with anything but an audio error code when WAV headers are mutated at random', async () => {
    const silence = new Float32Array(64);
    const seeds = [
      wav(64),
      encodeWav({ sampleRateHz: 44100, encoding: 'f32', channelData: [silence, silence], layout: 'extensible' }),
      encodeWav({ sampleRateHz: 8000, encoding: 'u8', channelData: [silence], layout: 'rf64' }),
    ];
    // Mutations only reach ffmpeg for a few format tags; a stand-in that fails at once keeps this fast.
    const inProcess = createAudioDecoder({ maxDurationMs: 10_000, ffmpegPath: '/bin/false', tmpDir: decodeDir, ffmpegTimeoutMs: 5000 });
    const allowed = new Set(['invalid_audio', 'empty_audio', 'unsupported_audio_format', 'audio_too_long']);
    const random = seededBytes(40_000, 99);
    let r = 0;
    const next = (): number => random[r++ % random.length] ?? 0;
    const outcomes = new Map<string, number>();
    for (let i = 0; i < 1500; i += 1) {
      const bytes = (seeds[i % seeds.length] ?? wav()).slice();
      const mutations = 1 + (next() % 4);
      for (let m = 0; m < mutations; m += 1) {
        const headerBytes = 80;
        bytes[next() % headerBytes] = next();
      }
      const cut = next() < 40 ? next() % bytes.length : bytes.length;
      try {
        await inProcess.decode(bytes.subarray(0, cut));
        outcomes.set('decoded', (outcomes.get('decoded') ?? 0) + 1);
      } catch (error) {
        assert.ok(isServiceError(error), `mutation ${i} threw ${String(error)}`);
        assert.ok(allowed.has(error.code), `mutation ${i} failed with ${error.code}: ${error.message}`);
        outcomes.set(error.code, (outcomes.get(error.code) ?? 0) + 1);
      }
    }
    // The mutations must exercise both outcomes, or the test proves nothing.
    assert.ok((outcomes.get('decoded') ?? 0) > 100, JSON.stringify([...outcomes]));
    assert.ok((outcomes.get('invalid_audio') ?? 0) > 100, JSON.stringify([...outcomes]));
  });
});
