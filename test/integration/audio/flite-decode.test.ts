/** The in-process WAV decoder on speech from a real synthesiser (flite), not on generated tones. */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createAudioDecoder } from '../../../src/gateway/audio/index.js';
import { fliteWav } from '../../support/audio.js';

let tmpDir = '';
before(async () => {
  tmpDir = await mkdtemp(join(tmpdir(), 'voxmux-flite-decode-test-'));
});
after(async () => {
  await rm(tmpDir, { recursive: true, force: true });
});

describe('createAudioDecoder: WAV from a speech synthesiser, in process', () => {
  it('decodes a WAV written by flite, a real speech synthesiser', async (t) => {
    const path = join(tmpDir, 'flite.wav');
    try {
      fliteWav('The quick brown fox jumps over the lazy dog.', path);
    } catch {
      t.skip('flite is not installed');
      return;
    }
    const bytes = await readFile(path);
    const dataBytes = bytes.readUInt32LE(40);
    // A WAV never reaches ffmpeg; a path that cannot run proves it.
    const decoder = createAudioDecoder({ maxDurationMs: 60_000, ffmpegPath: '/nonexistent/ffmpeg', tmpDir, ffmpegTimeoutMs: 10_000 });
    const audio = await decoder.decode(bytes);
    assert.equal(audio.sourceSampleRateHz, 16000);
    assert.equal(audio.samples.length, dataBytes / 2);
    let energy = 0;
    for (const value of audio.samples) energy += (value / 32768) ** 2;
    assert.ok(Math.sqrt(energy / audio.samples.length) > 0.01, 'speech should not be silence');
  });
});
