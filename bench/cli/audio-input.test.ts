import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadAudioInputs, wavDurationSeconds } from './audio-input.js';
import { isBenchError } from './bench-error.js';

function chunk(id: string, body: Buffer, declaredSize = body.length): Buffer {
  const header = Buffer.alloc(8);
  header.write(id, 0, 'ascii');
  header.writeUInt32LE(declaredSize, 4);
  return Buffer.concat([header, body, body.length % 2 === 1 ? Buffer.alloc(1) : Buffer.alloc(0)]);
}

function pcm16Wav(options: { sampleRateHz: number; channels: number; frames: number; extraChunk?: Buffer; dataSize?: number }): Buffer {
  const fmt = Buffer.alloc(16);
  fmt.writeUInt16LE(1, 0);
  fmt.writeUInt16LE(options.channels, 2);
  fmt.writeUInt32LE(options.sampleRateHz, 4);
  fmt.writeUInt32LE(options.sampleRateHz * options.channels * 2, 8);
  fmt.writeUInt16LE(options.channels * 2, 12);
  fmt.writeUInt16LE(16, 14);
  const data = Buffer.alloc(options.frames * options.channels * 2);
  const body = Buffer.concat([
    Buffer.from('WAVE'),
    chunk('fmt ', fmt),
    options.extraChunk ?? Buffer.alloc(0),
    chunk('data', data, options.dataSize),
  ]);
  const riff = Buffer.alloc(8);
  riff.write('RIFF', 0, 'ascii');
  riff.writeUInt32LE(body.length, 4);
  return Buffer.concat([riff, body]);
}

describe('wavDurationSeconds', () => {
  it('reads the duration from the fmt and data chunks, skipping other (odd-sized) chunks', () => {
    assert.equal(wavDurationSeconds(pcm16Wav({ sampleRateHz: 16000, channels: 1, frames: 24000 })), 1.5);
    const withList = pcm16Wav({ sampleRateHz: 8000, channels: 2, frames: 4000, extraChunk: chunk('LIST', Buffer.from('abc')) });
    assert.equal(wavDurationSeconds(withList), 0.5);
  });

  it('clamps a data size beyond the end of the file, as streamed WAVs declare', () => {
    assert.equal(wavDurationSeconds(pcm16Wav({ sampleRateHz: 16000, channels: 1, frames: 8000, dataSize: 0xffffffff })), 0.5);
  });

  it('gives undefined for other formats and broken headers', () => {
    assert.equal(wavDurationSeconds(new Uint8Array(Buffer.from('ID3\u0003 not a wav file at all'))), undefined);
    assert.equal(wavDurationSeconds(new Uint8Array(Buffer.from('RIFF\u0000\u0000\u0000\u0000WAVE'))), undefined);
  });
});

describe('loadAudioInputs', () => {
  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'voxmux-audio-input-'));
    await mkdir(join(dir, 'set'));
    await mkdir(join(dir, 'set', 'nested'));
    await mkdir(join(dir, 'empty'));
    await writeFile(join(dir, 'set', 'b.wav'), pcm16Wav({ sampleRateHz: 16000, channels: 1, frames: 16000 }));
    await writeFile(join(dir, 'set', 'a.mp3'), Buffer.from('ID3 fake mp3 bytes'));
    await writeFile(join(dir, 'set', 'notes.txt'), 'not audio');
    await writeFile(join(dir, 'set', 'nested', 'c.wav'), pcm16Wav({ sampleRateHz: 16000, channels: 1, frames: 1 }));
    await writeFile(join(dir, 'zero.wav'), Buffer.alloc(0));
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads a directory one level deep, audio files only, in name order', async () => {
    const inputs = await loadAudioInputs({ paths: [join(dir, 'set')], fallbackAudioSeconds: 3 });
    assert.deepEqual(
      inputs.map((i) => [i.fileName, i.contentType, i.audioSeconds]),
      [
        ['a.mp3', 'audio/mpeg', 3],
        ['b.wav', 'audio/wav', 1],
      ],
    );
  });

  it('leaves the duration of non-WAV files unknown without a fallback', async () => {
    const [mp3] = await loadAudioInputs({ paths: [join(dir, 'set', 'a.mp3')] });
    assert.equal(mp3?.audioSeconds, undefined);
  });

  it('rejects missing paths, directories without audio and empty files with usage errors', async () => {
    for (const [paths, pattern] of [
      [[join(dir, 'missing.wav')], /does not exist/],
      [[join(dir, 'empty')], /found none/],
      [[join(dir, 'zero.wav')], /is empty/],
    ] as const) {
      await assert.rejects(
        loadAudioInputs({ paths: [...paths] }),
        (err: unknown) => isBenchError(err) && err.code === 'usage' && pattern.test(err.message),
      );
    }
  });
});
