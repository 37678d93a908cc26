import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseWav } from '../audio/wav-parser.js';
import { createSpeechEncoder, streamingWavHeader, WAV_STREAMING_SIZE } from './speech-encoder.js';

function collect(format: 'pcm' | 'wav') {
  const out: Uint8Array[] = [];
  const encoder = createSpeechEncoder({ format, ffmpegPath: 'ffmpeg', onData: (bytes) => out.push(bytes) });
  return { encoder, bytes: () => Buffer.concat(out), count: () => out.length };
}

describe('createSpeechEncoder (pcm and wav, in process)', () => {
  it('pcm passes each piece on at once as 16-bit little-endian bytes', async () => {
    const { encoder, bytes, count } = collect('pcm');
    await encoder.write(Int16Array.from([1, -2, 300]));
    assert.equal(count(), 1);
    await encoder.write(Int16Array.from([-32768, 32767]));
    await encoder.end();
    assert.deepEqual([...bytes()], [1, 0, 254, 255, 44, 1, 0, 128, 255, 127]);
  });

  it('wav sends the streaming header with the first samples, and a header alone for no audio', async () => {
    const { encoder, bytes } = collect('wav');
    await encoder.write(Int16Array.from([5, 6]));
    await encoder.end();
    assert.deepEqual(bytes().subarray(0, 44), Buffer.from(streamingWavHeader(24_000)));
    assert.deepEqual([...bytes().subarray(44)], [5, 0, 6, 0]);
    const empty = collect('wav');
    await empty.encoder.end();
    assert.equal(empty.bytes().length, 44);
  });

  it("the streaming WAV header reads, by the gateway's own parser, as 24 kHz mono 16-bit PCM to the end of the file", () => {
    const header = Buffer.from(streamingWavHeader(24_000));
    assert.equal(header.readUInt32LE(4), WAV_STREAMING_SIZE);
    assert.equal(header.readUInt32LE(40), WAV_STREAMING_SIZE);
    const parsed = parseWav(Buffer.concat([header, Buffer.from([1, 0, 2, 0])]));
    assert.deepEqual(parsed.kind === 'pcm' && [parsed.encoding, parsed.channels, parsed.sampleRateHz, parsed.frames, parsed.isTruncated], [
      's16',
      1,
      24_000,
      2,
      false,
    ]);
  });

  it('after destroy nothing more is sent', async () => {
    const { encoder, count } = collect('wav');
    encoder.destroy();
    await encoder.write(Int16Array.from([1]));
    await encoder.end();
    assert.equal(count(), 0);
  });
});
