/**
 * The speech encoders with the real ffmpeg: each compressed format is a long-lived ffmpeg that
 * turns PCM written in pieces into its container's bytes as they come, decodable to the same length.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSpeechEncoder } from '../../../src/gateway/speech/speech-encoder.js';
import { probeAudio } from '../../support/audio.js';

const RATE_HZ = 24_000;

function tone(frames: number, startFrame: number): Int16Array {
  return Int16Array.from({ length: frames }, (_, i) => Math.round(8000 * Math.sin(((startFrame + i) * 2 * Math.PI * 220) / RATE_HZ)));
}

const EXPECTED = {
  mp3: { formatName: 'mp3', codecName: 'mp3' },
  opus: { formatName: 'ogg', codecName: 'opus' },
  aac: { formatName: 'aac', codecName: 'aac' },
  flac: { formatName: 'flac', codecName: 'flac' },
  wav: { formatName: 'wav', codecName: 'pcm_s16le' },
} as const;

describe('speech encoders', () => {
  for (const format of ['mp3', 'opus', 'aac', 'flac', 'wav'] as const) {
    it(`${format}: 2 s written in 100 ms pieces decode to 2 s, and bytes arrive before the input ends`, async () => {
      const out: Uint8Array[] = [];
      const encoder = createSpeechEncoder({ format, ffmpegPath: 'ffmpeg', onData: (bytes) => out.push(bytes) });
      const pieceFrames = RATE_HZ / 10;
      let bytesBeforeEnd = 0;
      for (let i = 0; i < 20; i += 1) {
        await encoder.write(tone(pieceFrames, i * pieceFrames));
        // ffmpeg runs on its own: three quarters in, wait for its first bytes (up to 10 s on a
        // loaded machine) while the input is still open.
        for (let waitedMs = 0; i === 15 && out.length === 0 && waitedMs < 10_000; waitedMs += 20) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }
      bytesBeforeEnd = out.reduce((n, b) => n + b.length, 0);
      await encoder.end();
      assert.ok(bytesBeforeEnd > 0, 'encoded bytes arrived before the input ended');
      const probed = probeAudio(Buffer.concat(out));
      assert.equal(probed.formatName, EXPECTED[format].formatName);
      assert.equal(probed.codecName, EXPECTED[format].codecName);
      assert.equal(probed.channels, 1);
      if (format !== 'opus') assert.equal(probed.sampleRateHz, RATE_HZ); // Opus reports its 48 kHz decode rate
      assert.ok(Math.abs(probed.decodedSeconds - 2) < 0.1, `decoded ${probed.decodedSeconds} s`);
    });
  }

  it('pcm passes the samples through as 16-bit little-endian bytes', async () => {
    const out: Uint8Array[] = [];
    const encoder = createSpeechEncoder({ format: 'pcm', ffmpegPath: 'ffmpeg', onData: (bytes) => out.push(bytes) });
    const samples = tone(480, 0);
    await encoder.write(samples);
    await encoder.end();
    const bytes = Buffer.concat(out);
    assert.deepEqual(new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)), samples);
  });

  it('destroy kills ffmpeg: end then resolves and no more bytes arrive', async () => {
    const out: Uint8Array[] = [];
    const encoder = createSpeechEncoder({ format: 'mp3', ffmpegPath: 'ffmpeg', onData: (bytes) => out.push(bytes) });
    await encoder.write(tone(RATE_HZ, 0));
    encoder.destroy();
    const count = out.length;
    await encoder.end();
    await encoder.write(tone(100, 0));
    assert.equal(out.length, count);
  });

  it('a missing ffmpeg fails write or end with internal_error', async () => {
    const encoder = createSpeechEncoder({ format: 'flac', ffmpegPath: '/nonexistent/ffmpeg', onData: () => undefined });
    await assert.rejects(
      (async () => {
        await encoder.write(tone(100, 0));
        await encoder.end();
      })(),
      (err: { code?: string }) => err.code === 'internal_error',
    );
  });
});
