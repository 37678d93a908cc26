import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isServiceError } from '../../core/errors.js';
import { encodeWav, WAV_FIELD_OFFSETS } from './wav-builder.js';
import { createWavMonoSource, parseWav, type PcmWavLayout, type WavSampleEncoding } from './wav-parser.js';

function ramp(frames: number, scale = 0.5): Float32Array {
  return new Float32Array(frames).map((_, i) => scale * ((i % 64) / 32 - 1));
}

function pcm(bytes: Uint8Array): PcmWavLayout {
  const layout = parseWav(bytes);
  assert.equal(layout.kind, 'pcm');
  return layout;
}

function readAll(bytes: Uint8Array): Float32Array {
  const layout = pcm(bytes);
  const out = new Float32Array(layout.frames);
  createWavMonoSource(bytes, layout).read(0, layout.frames, out, 0);
  return out;
}

function patch(bytes: Uint8Array, edit: (view: DataView) => void): Uint8Array {
  const copy = bytes.slice();
  edit(new DataView(copy.buffer));
  return copy;
}

function rejectsWith(code: string, action: () => unknown, messagePart?: string): void {
  assert.throws(action, (error: unknown) => {
    assert.ok(isServiceError(error), `expected a ServiceError: got ${String(error)}`);
    assert.equal(error.code, code);
    if (messagePart !== undefined) assert.ok(error.message.includes(messagePart), error.message);
    return true;
  });
}

describe('parseWav', () => {
  it('reads the layout of every sample encoding', () => {
    const encodings: [WavSampleEncoding, number][] = [
      ['u8', 1],
      ['s16', 2],
      ['s24', 3],
      ['s32', 4],
      ['f32', 4],
      ['f64', 8],
    ];
    for (const [encoding, bytesPerSample] of encodings) {
      const layout = pcm(encodeWav({ sampleRateHz: 22050, encoding, channelData: [ramp(100), ramp(100)] }));
      assert.deepEqual(
        { ...layout },
        {
          kind: 'pcm',
          encoding,
          channels: 2,
          sampleRateHz: 22050,
          blockAlign: 2 * bytesPerSample,
          dataOffset: encoding.startsWith('f') ? 46 : 44, // float fmt chunks carry a cbSize field
          frames: 100,
          isTruncated: false,
        },
        encoding,
      );
    }
  });

  it('decodes each encoding to the mean of the channels, within its quantisation step', () => {
    const left = ramp(256, 0.8);
    const right = ramp(256, -0.4);
    const tolerances: Record<WavSampleEncoding, number> = { u8: 1 / 100, s16: 1e-4, s24: 1e-6, s32: 1e-6, f32: 1e-7, f64: 1e-7 };
    for (const encoding of Object.keys(tolerances) as WavSampleEncoding[]) {
      const mono = readAll(encodeWav({ sampleRateHz: 16000, encoding, channelData: [left, right] }));
      for (let i = 0; i < mono.length; i += 1) {
        const expected = ((left[i] ?? 0) + (right[i] ?? 0)) / 2;
        assert.ok(Math.abs((mono[i] ?? 0) - expected) <= tolerances[encoding], `${encoding}[${i}]: ${mono[i]} vs ${expected}`);
      }
    }
  });

  it('maps the extremes of each integer encoding into [-1, 1]', () => {
    const extremes = new Float32Array([1, -1, 0]);
    for (const encoding of ['u8', 's16', 's24', 's32'] as const) {
      const mono = readAll(encodeWav({ sampleRateHz: 8000, encoding, channelData: [extremes] }));
      assert.ok((mono[0] ?? 0) > 0.99 && (mono[0] ?? 0) <= 1, `${encoding} max ${mono[0]}`);
      assert.ok((mono[1] ?? 0) < -0.99 && (mono[1] ?? 0) >= -1, `${encoding} min ${mono[1]}`);
      assert.ok(Math.abs(mono[2] ?? 1) <= 1 / 128, `${encoding} zero ${mono[2]}`);
    }
  });

  it('clamps float overs and infinities to full scale and turns NaN into silence', () => {
    const bytes = encodeWav({ sampleRateHz: 16000, encoding: 'f32', channelData: [new Float32Array(5)] });
    const edited = patch(bytes, (view) => {
      [1.5, -7, Number.POSITIVE_INFINITY, Number.NaN, 0.25].forEach((value, i) => view.setFloat32(46 + i * 4, value, true));
    });
    assert.deepEqual([...readAll(edited)], [1, -1, 1, 0, 0.25]);
  });

  it('reads WAVE_FORMAT_EXTENSIBLE for integer and float sub-formats', () => {
    const data = ramp(50);
    for (const encoding of ['s16', 's24', 'f32'] as const) {
      const bytes = encodeWav({ sampleRateHz: 48000, encoding, channelData: [data, data], layout: 'extensible' });
      const layout = pcm(bytes);
      assert.equal(layout.encoding, encoding);
      assert.equal(layout.dataOffset, 68);
      const mono = readAll(bytes);
      assert.ok(Math.abs((mono[10] ?? 0) - (data[10] ?? 0)) < 1e-4);
    }
  });

  it('reads RF64 with the data size from its ds64 chunk', () => {
    const layout = pcm(encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [ramp(300)], layout: 'rf64' }));
    assert.equal(layout.frames, 300);
  });

  it('walks past other chunks, honouring the pad byte after an odd-sized chunk', () => {
    const bytes = encodeWav({
      sampleRateHz: 16000,
      encoding: 's16',
      channelData: [ramp(10)],
      extraChunks: [
        { id: 'LIST', body: new Uint8Array(7).fill(0x41) },
        { id: 'junk', body: new Uint8Array(3) },
        { id: 'fact', body: new Uint8Array(4) },
      ],
    });
    const layout = pcm(bytes);
    assert.equal(layout.frames, 10);
    assert.equal(layout.dataOffset, 44 + (8 + 8) + (8 + 4) + (8 + 4));
  });

  it('treats a data size of 0xFFFFFFFF or 0 as unknown and reads to the end of the file', () => {
    const bytes = encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [ramp(40)] });
    for (const size of [0xffffffff, 0]) {
      const streamed = patch(bytes, (view) => {
        view.setUint32(WAV_FIELD_OFFSETS.riffSize, 0xffffffff, true);
        view.setUint32(WAV_FIELD_OFFSETS.dataSize, size, true);
      });
      assert.equal(pcm(streamed).frames, 40);
    }
  });

  it('clamps a declared data size beyond the end of the file to the whole frames present', () => {
    const bytes = encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [ramp(50)] });
    const claimsFourGigabytes = patch(bytes, (view) => view.setUint32(WAV_FIELD_OFFSETS.dataSize, 0xf0000000, true));
    assert.equal(pcm(claimsFourGigabytes).frames, 50);
    assert.equal(pcm(claimsFourGigabytes.subarray(0, 44 + 99)).frames, 49); // the partial frame is dropped
  });

  it('uses the declared data size when chunks follow the data chunk', () => {
    const bytes = encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [ramp(20)] });
    const withTrailer = new Uint8Array([...bytes, ...'LIST'.split('').map((c) => c.charCodeAt(0)), 4, 0, 0, 0, 1, 2, 3, 4]);
    assert.equal(pcm(withTrailer).frames, 20);
  });

  it('hands codecs other than PCM and float to ffmpeg, and refuses codecs ffmpeg is not asked to decode', () => {
    const bytes = encodeWav({ sampleRateHz: 8000, encoding: 'u8', channelData: [ramp(20)] });
    const mulaw = patch(bytes, (view) => view.setUint16(WAV_FIELD_OFFSETS.formatTag, 0x0007, true));
    assert.deepEqual(parseWav(mulaw), { kind: 'compressed', formatTag: 7, channels: 1, sampleRateHz: 8000 });
    const unknown = patch(bytes, (view) => view.setUint16(WAV_FIELD_OFFSETS.formatTag, 0x1234, true));
    rejectsWith('unsupported_audio_format', () => parseWav(unknown), 'codec tag 0x1234');
  });

  it('rejects header values outside the accepted ranges with a message naming the value', () => {
    const bytes = encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [ramp(10)] });
    const cases: [string, (view: DataView) => void, string][] = [
      ['0 channels', (v) => v.setUint16(WAV_FIELD_OFFSETS.channels, 0, true), 'expected 1 to 64 channels: got 0'],
      ['65535 channels', (v) => v.setUint16(WAV_FIELD_OFFSETS.channels, 65535, true), 'got 65535'],
      ['0 Hz', (v) => v.setUint32(WAV_FIELD_OFFSETS.sampleRateHz, 0, true), 'got 0'],
      ['500 kHz', (v) => v.setUint32(WAV_FIELD_OFFSETS.sampleRateHz, 500000, true), 'got 500000'],
      ['13 bits', (v) => v.setUint16(WAV_FIELD_OFFSETS.bitsPerSample, 13, true), 'got 13'],
      ['0 bits', (v) => v.setUint16(WAV_FIELD_OFFSETS.bitsPerSample, 0, true), 'got 0'],
      ['odd block align', (v) => v.setUint16(WAV_FIELD_OFFSETS.blockAlign, 3, true), 'block align of 2 bytes'],
      ['fmt size 0', (v) => v.setUint32(WAV_FIELD_OFFSETS.fmtSize, 0, true), 'fmt chunk is 0 bytes'],
    ];
    for (const [, edit, message] of cases) rejectsWith('invalid_audio', () => parseWav(patch(bytes, edit)), message);
  });
});

describe('createWavMonoSource', () => {
  it('reads windows that start before and end after the data as silence', () => {
    const bytes = encodeWav({ sampleRateHz: 16000, encoding: 'f32', channelData: [new Float32Array([0.1, 0.2, 0.3])] });
    const layout = pcm(bytes);
    const source = createWavMonoSource(bytes, layout);
    const out = new Float32Array(9).fill(9);
    source.read(-2, 7, out, 1);
    assert.deepEqual(
      [...out].map((v) => Math.round(v * 10) / 10),
      [9, 0, 0, 0.1, 0.2, 0.3, 0, 0, 9],
    );
    out.fill(9);
    source.read(5, 3, out, 0);
    assert.deepEqual([...out.subarray(0, 3)], [0, 0, 0]);
  });

  it('reads a WAV that sits at an unaligned offset inside a larger buffer', () => {
    const bytes = encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [ramp(30)] });
    const backing = new Uint8Array(bytes.length + 3);
    backing.set(bytes, 3);
    assert.deepEqual(readAll(backing.subarray(3)), readAll(bytes));
  });
});
