import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { identifyAudioContent, readFlacStreamInfo, sniffAudioFormat } from './sniff-audio-format.js';
import { encodeWav } from './wav-builder.js';

const ascii = (text: string): number[] => [...text].map((c) => c.charCodeAt(0));
const bytesOf = (...parts: (number[] | Uint8Array | string)[]): Uint8Array =>
  new Uint8Array(parts.flatMap((part) => (typeof part === 'string' ? ascii(part) : [...part])));
const zeros = (count: number): number[] => new Array<number>(count).fill(0);

function oggPage(firstPacket: Uint8Array | number[]): Uint8Array {
  const packet = [...firstPacket];
  // capture, version, header type (BOS), granule(8), serial(4), sequence(4), crc(4), 1 segment
  return bytesOf('OggS', [0, 0x02], zeros(8), [1, 0, 0, 0], zeros(4), zeros(4), [1, packet.length], packet);
}

function ebmlHeader(docType: string | undefined): Uint8Array {
  const children = [
    ...[0x42, 0x86, 0x81, 0x01], // EBMLVersion 1
    ...(docType === undefined ? [] : [0x42, 0x82, 0x80 | docType.length, ...ascii(docType)]),
  ];
  return bytesOf([0x1a, 0x45, 0xdf, 0xa3, 0x80 | children.length], children, [0x18, 0x53, 0x80, 0x67]);
}

function isoBox(type: string, body: number[] = []): number[] {
  const size = 8 + body.length;
  return [(size >>> 24) & 0xff, (size >>> 16) & 0xff, (size >>> 8) & 0xff, size & 0xff, ...ascii(type), ...body];
}

/** MPEG-1 Layer III, 128 kbit/s, 44.1 kHz, no padding: 417-byte frames. */
function mpegFrames(count: number): number[] {
  const frame = [0xff, 0xfb, 0x90, 0x64, ...zeros(413)];
  return new Array<number[]>(count).fill(frame).flat();
}

function adtsFrames(count: number, frameBytes = 200): number[] {
  const header = [0xff, 0xf1, 0x50, 0x80 | ((frameBytes >> 11) & 3), (frameBytes >> 3) & 0xff, ((frameBytes & 7) << 5) | 0x1f, 0xfc];
  return new Array<number[]>(count).fill([...header, ...zeros(frameBytes - 7)]).flat();
}

function id3Tag(bodyBytes: number): number[] {
  return [...ascii('ID3'), 4, 0, 0, 0, 0, (bodyBytes >> 7) & 0x7f, bodyBytes & 0x7f, ...zeros(bodyBytes)];
}

function flacHeader(options: { sampleRateHz: number; channels: number; totalFrames: number }): Uint8Array {
  const info = zeros(34);
  const { sampleRateHz, channels, totalFrames } = options;
  info[10] = (sampleRateHz >> 12) & 0xff;
  info[11] = (sampleRateHz >> 4) & 0xff;
  info[12] = ((sampleRateHz & 0x0f) << 4) | ((channels - 1) << 1) | 0; // bits per sample - 1 = 15: high bit 0
  info[13] = ((15 & 0x0f) << 4) | Math.floor(totalFrames / 2 ** 32);
  info[14] = (totalFrames >>> 24) & 0xff;
  info[15] = (totalFrames >>> 16) & 0xff;
  info[16] = (totalFrames >>> 8) & 0xff;
  info[17] = totalFrames & 0xff;
  return bytesOf('fLaC', [0x80, 0, 0, 34], info);
}

const tone = new Float32Array(100);

describe('sniffAudioFormat', () => {
  it('recognises each accepted format by its first bytes', () => {
    const cases: [string, Uint8Array, string][] = [
      ['RIFF/WAVE', encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [tone] }), 'wav'],
      ['RF64/WAVE', encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [tone], layout: 'rf64' }), 'wav'],
      ['fLaC', flacHeader({ sampleRateHz: 44100, channels: 2, totalFrames: 1000 }), 'flac'],
      ['Ogg Opus', oggPage(bytesOf('OpusHead', [1, 2, 0x38, 1, 0x80, 0xbb, 0, 0, 0, 0, 0])), 'ogg-opus'],
      ['Ogg Vorbis', oggPage(bytesOf('\x01vorbis', zeros(22))), 'ogg-vorbis'],
      ['Ogg FLAC', oggPage(bytesOf('\x7fFLAC', [1, 0, 0, 1], 'fLaC', zeros(38))), 'ogg-flac'],
      ['EBML webm', ebmlHeader('webm'), 'webm'],
      ['EBML matroska', ebmlHeader('matroska'), 'matroska'],
      ['EBML without DocType', ebmlHeader(undefined), 'matroska'],
      ['ftyp M4A', bytesOf(isoBox('ftyp', [...ascii('M4A '), 0, 0, 0, 0]), isoBox('free')), 'm4a'],
      ['ftyp isom', bytesOf(isoBox('ftyp', [...ascii('isom'), 0, 0, 2, 0])), 'm4a'],
      ['QuickTime starting with mdat', bytesOf(isoBox('mdat', zeros(16)), isoBox('moov')), 'm4a'],
      ['bare MPEG audio frames', bytesOf(mpegFrames(3)), 'mp3'],
      ['ID3 then MPEG audio', bytesOf(id3Tag(300), mpegFrames(2)), 'mp3'],
      ['ID3 then unrecognised bytes', bytesOf(id3Tag(20), [1, 2, 3, 4, 5, 6]), 'mp3'],
      ['ID3 then fLaC', bytesOf(id3Tag(20), flacHeader({ sampleRateHz: 8000, channels: 1, totalFrames: 0 })), 'flac'],
      ['ADTS AAC', bytesOf(adtsFrames(3)), 'aac'],
    ];
    for (const [name, bytes, expected] of cases) assert.equal(sniffAudioFormat(bytes), expected, name);
  });

  it('ignores what a file is called: the same bytes sniff the same whatever their name', () => {
    const text = bytesOf('this is not audio, whatever the file name says');
    assert.equal(sniffAudioFormat(text), undefined);
    assert.deepEqual(identifyAudioContent(text), { kind: 'unsupported', description: 'text' });
  });

  it('names unsupported content for the error message', () => {
    const cases: [string, Uint8Array, string][] = [
      ['PNG', bytesOf([0x89], 'PNG\r\n\x1a\n', zeros(20)), 'PNG image'],
      ['JPEG', bytesOf([0xff, 0xd8, 0xff, 0xe0], zeros(20)), 'JPEG image'],
      ['PDF', bytesOf('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n'), 'PDF document'],
      ['JSON', bytesOf('{"text": "hello"}'), 'JSON or other text'],
      ['HTML', bytesOf('<!doctype html><html></html>'), 'XML or HTML text'],
      ['ZIP', bytesOf('PK\x03\x04', zeros(26)), 'ZIP archive'],
      ['AIFF', bytesOf('FORM', [0, 0, 0, 4], 'AIFF'), 'AIFF audio'],
      ['RIFF AVI', bytesOf('RIFF', [4, 0, 0, 0], 'AVI '), "RIFF 'AVI ' data"],
      ['big-endian RIFX', bytesOf('RIFX', [0, 0, 0, 4], 'WAVE'), 'big-endian WAV (RIFX)'],
      ['Ogg Speex', oggPage(bytesOf('Speex   ', zeros(72))), 'Ogg Speex'],
      ['Ogg Theora', oggPage(bytesOf('\x80theora', zeros(34))), 'Ogg Theora video'],
      ['HEIF image', bytesOf(isoBox('ftyp', [...ascii('heic'), 0, 0, 0, 0])), "ISO BMFF image (brand 'heic')"],
      ['EBML of another type', ebmlHeader('mkvmerge'), "EBML document of type 'mkvmerge'"],
      ['binary', bytesOf([0x12, 0x34, 0x56, 0x78, 0x9a]), 'unrecognised data starting with 0x12345678'],
      ['one byte', bytesOf([0x00]), 'unrecognised data starting with 0x00'],
      [
        'MPEG sync then garbage where the next frame should be',
        bytesOf([0xff, 0xfb, 0x90, 0x64], zeros(500)),
        'unrecognised data starting with 0xfffb9064',
      ],
    ];
    for (const [name, bytes, description] of cases) {
      assert.deepEqual(identifyAudioContent(bytes), { kind: 'unsupported', description }, name);
      assert.equal(sniffAudioFormat(bytes), undefined, name);
    }
  });

  it('reports a container cut off before the bytes that name its codec as truncated', () => {
    const wav = encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [tone] });
    const opus = oggPage(bytesOf('OpusHead', zeros(11)));
    const cases: [string, Uint8Array, string][] = [
      ['RIFF only', wav.subarray(0, 4), 'WAV'],
      ['RIFF and size', wav.subarray(0, 8), 'WAV'],
      ['OggS page header only', opus.subarray(0, 27), 'Ogg'],
      ['Ogg packet cut short', opus.subarray(0, 31), 'Ogg'],
      ['fLaC without STREAMINFO', bytesOf('fLaC', [0x80, 0, 0]), 'FLAC'],
      ['EBML header cut short', ebmlHeader('webm').subarray(0, 8), 'WebM/Matroska'],
      ['ftyp without brand', bytesOf([0, 0, 0, 20], 'ftyp', 'M4'), 'MP4/M4A'],
      ['ID3 tag without audio', bytesOf(id3Tag(40)), 'MP3 (ID3 tag without audio)'],
      ['ID3 tag header cut short', bytesOf('ID3', [4, 0]), 'MP3 (ID3 tag)'],
    ];
    for (const [name, bytes, container] of cases) {
      assert.deepEqual(identifyAudioContent(bytes), { kind: 'truncated', container }, name);
    }
  });

  it('never throws on short or random input', () => {
    let seed = 42;
    const next = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed & 0xff;
    };
    const prefixes = [[], ascii('RIFF'), ascii('OggS'), [0x1a, 0x45, 0xdf, 0xa3], ascii('ID3'), [0xff, 0xfb], [0xff, 0xf1], ascii('fLaC')];
    for (let i = 0; i < 2000; i += 1) {
      const prefix = prefixes[i % prefixes.length] ?? [];
      const bytes = bytesOf(prefix, new Array<number>(i % 97).fill(0).map(next));
      const content = identifyAudioContent(bytes);
      assert.ok(['audio', 'truncated', 'unsupported'].includes(content.kind));
    }
  });
});

describe('readFlacStreamInfo', () => {
  it('reads the rate, channels and length from STREAMINFO', () => {
    assert.deepEqual(readFlacStreamInfo(flacHeader({ sampleRateHz: 44100, channels: 2, totalFrames: 5_000_000_000 })), {
      sampleRateHz: 44100,
      channels: 2,
      totalFrames: 5_000_000_000,
    });
    assert.deepEqual(readFlacStreamInfo(flacHeader({ sampleRateHz: 96000, channels: 8, totalFrames: 0 })), {
      sampleRateHz: 96000,
      channels: 8,
      totalFrames: 0,
    });
  });

  it('returns undefined when STREAMINFO is missing or cut short', () => {
    assert.equal(readFlacStreamInfo(bytesOf('fLaC', [0x80, 0, 0, 34], zeros(10))), undefined);
    assert.equal(readFlacStreamInfo(bytesOf('fLaC', [0x84, 0, 0, 34], zeros(34))), undefined);
    assert.equal(readFlacStreamInfo(bytesOf('OggS', zeros(60))), undefined);
  });
});
