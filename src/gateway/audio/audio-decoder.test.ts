import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isServiceError } from '../../core/errors.js';
import { createAudioDecoder, type AudioDecoderOptions } from './index.js';
import { encodeWav, type WavBuildOptions } from './wav-builder.js';
import type { WavSampleEncoding } from './wav-parser.js';

let tmpDir = '';
before(async () => {
  tmpDir = await mkdtemp(join(tmpdir(), 'voxmux-audio-decoder-test-'));
});
after(async () => {
  await rm(tmpDir, { recursive: true, force: true });
});

function decoder(overrides: Partial<AudioDecoderOptions> = {}) {
  // No WAV here reaches ffmpeg; a path that cannot run proves it.
  return createAudioDecoder({ maxDurationMs: 60_000, ffmpegPath: '/nonexistent/ffmpeg', tmpDir, ffmpegTimeoutMs: 10_000, ...overrides });
}

function sine(frequencyHz: number, rateHz: number, seconds: number, amplitude: number): Float32Array {
  return new Float32Array(Math.round(rateHz * seconds)).map((_, i) => amplitude * Math.sin((2 * Math.PI * frequencyHz * i) / rateHz));
}

/** Largest difference of 16-bit PCM (/ 32768) from amplitude*sin(2π·1000·t) at 16 kHz, away from the ends. */
function maxErrorFrom1kHz(samples: Int16Array, amplitude: number): number {
  let max = 0;
  for (let i = 400; i < samples.length - 400; i += 1) {
    max = Math.max(max, Math.abs((samples[i] ?? 0) / 32768 - amplitude * Math.sin((2 * Math.PI * 1000 * i) / 16000)));
  }
  return max;
}

async function rejectsWithCode(promise: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(isServiceError(error), `expected a ServiceError: got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return true;
  });
}

interface WavCase {
  name: string;
  encoding: WavSampleEncoding;
  rateHz: number;
  /** Amplitude of the 1 kHz sine in each channel; the decoded amplitude is their mean. */
  channelAmplitudes: number[];
  layout?: WavBuildOptions['layout'];
  tolerance: number;
}

const WAV_CASES: WavCase[] = [
  { name: '8-bit unsigned mono 8 kHz', encoding: 'u8', rateHz: 8000, channelAmplitudes: [0.5], tolerance: 0.012 },
  { name: '16-bit mono 16 kHz', encoding: 's16', rateHz: 16000, channelAmplitudes: [0.5], tolerance: 1e-4 },
  { name: '16-bit stereo 44.1 kHz', encoding: 's16', rateHz: 44100, channelAmplitudes: [0.6, 0.2], tolerance: 5e-4 },
  { name: '16-bit stereo 48 kHz', encoding: 's16', rateHz: 48000, channelAmplitudes: [0.9, -0.3], tolerance: 5e-4 },
  { name: '24-bit mono 48 kHz', encoding: 's24', rateHz: 48000, channelAmplitudes: [0.5], tolerance: 5e-4 },
  {
    name: '24-bit stereo 96 kHz extensible',
    encoding: 's24',
    rateHz: 96000,
    channelAmplitudes: [0.5, 0.5],
    layout: 'extensible',
    tolerance: 5e-4,
  },
  { name: '32-bit mono 22.05 kHz', encoding: 's32', rateHz: 22050, channelAmplitudes: [0.5], tolerance: 5e-4 },
  { name: 'float32 stereo 48 kHz', encoding: 'f32', rateHz: 48000, channelAmplitudes: [0.25, 0.75], tolerance: 5e-4 },
  {
    name: 'float32 mono 44.1 kHz extensible',
    encoding: 'f32',
    rateHz: 44100,
    channelAmplitudes: [0.5],
    layout: 'extensible',
    tolerance: 5e-4,
  },
  // No resampling: only the 16-bit rounding (at most half a step, 1.5e-5) remains.
  { name: 'float64 mono 16 kHz', encoding: 'f64', rateHz: 16000, channelAmplitudes: [0.5], tolerance: 2e-5 },
  { name: 'float64 stereo 8 kHz', encoding: 'f64', rateHz: 8000, channelAmplitudes: [0.5, 0.1], tolerance: 5e-4 },
  {
    name: '16-bit 6 channels 48 kHz extensible',
    encoding: 's16',
    rateHz: 48000,
    channelAmplitudes: [0.6, 0.6, 0.3, 0, 0.3, 0.6],
    layout: 'extensible',
    tolerance: 5e-4,
  },
  { name: '16-bit 6 channels 44.1 kHz', encoding: 's16', rateHz: 44100, channelAmplitudes: [0.5, 0.4, 0.3, 0.2, 0.1, 0], tolerance: 5e-4 },
  { name: '16-bit mono 48 kHz RF64', encoding: 's16', rateHz: 48000, channelAmplitudes: [0.5], layout: 'rf64', tolerance: 5e-4 },
];

describe('createAudioDecoder: WAV, in process', () => {
  for (const wavCase of WAV_CASES) {
    it(`decodes ${wavCase.name} to 16 kHz mono: the mean of the channels, same duration`, async () => {
      const seconds = 0.5;
      const frames = Math.round(wavCase.rateHz * seconds);
      const bytes = encodeWav({
        sampleRateHz: wavCase.rateHz,
        encoding: wavCase.encoding,
        channelData: wavCase.channelAmplitudes.map((amplitude) => sine(1000, wavCase.rateHz, seconds, amplitude)),
        layout: wavCase.layout,
      });
      const audio = await decoder().decode(bytes);
      assert.equal(audio.format, 'wav');
      assert.equal(audio.sampleRateHz, 16000);
      assert.equal(audio.sourceSampleRateHz, wavCase.rateHz);
      assert.equal(audio.sourceChannels, wavCase.channelAmplitudes.length);
      assert.equal(audio.samples.length, Math.ceil((frames * 16000) / wavCase.rateHz));
      assert.equal(audio.durationMs, (audio.samples.length * 1000) / 16000);
      const meanAmplitude = wavCase.channelAmplitudes.reduce((a, b) => a + b, 0) / wavCase.channelAmplitudes.length;
      const error = maxErrorFrom1kHz(audio.samples, meanAmplitude);
      assert.ok(error < wavCase.tolerance, `error ${error} exceeds ${wavCase.tolerance}`);
    });
  }

  it('accepts audio exactly as long as maxDurationMs and rejects audio one frame longer', async () => {
    const exact = encodeWav({ sampleRateHz: 44100, encoding: 's16', channelData: [new Float32Array(44100)] });
    const audio = await decoder({ maxDurationMs: 1000 }).decode(exact);
    assert.equal(audio.durationMs, 1000);
    const longer = encodeWav({ sampleRateHz: 44100, encoding: 's16', channelData: [new Float32Array(44101)] });
    await rejectsWithCode(decoder({ maxDurationMs: 1000 }).decode(longer), 'audio_too_long');
  });

  it('reports the duration it measured and the limit when audio is too long', async () => {
    const bytes = encodeWav({ sampleRateHz: 8000, encoding: 's16', channelData: [new Float32Array(8000 * 3)] });
    await assert.rejects(decoder({ maxDurationMs: 2000 }).decode(bytes), (error: unknown) => {
      assert.ok(isServiceError(error));
      assert.equal(error.code, 'audio_too_long');
      assert.deepEqual(error.details, { durationMs: 3000, maxAudioDurationMs: 2000 });
      return true;
    });
  });

  it('rejects a WAV whose header makes it hours long from the header, without resampling it', async () => {
    // 10,000 frames at 1 Hz: 10,000 s. Resampling it would produce 160 M samples.
    const bytes = encodeWav({ sampleRateHz: 1, encoding: 'u8', channelData: [new Float32Array(10_000)] });
    const started = performance.now();
    await rejectsWithCode(decoder({ maxDurationMs: 600_000 }).decode(bytes), 'audio_too_long');
    assert.ok(performance.now() - started < 1000);
  });

  it('rejects with the signal reason when the signal has already aborted', async () => {
    const bytes = encodeWav({ sampleRateHz: 16000, encoding: 's16', channelData: [new Float32Array(100)] });
    const reason = new Error('gone');
    await assert.rejects(decoder().decode(bytes, AbortSignal.abort(reason)), (error) => error === reason);
  });

  it('rejects with the signal reason when the signal aborts while a long WAV is being resampled', async () => {
    const bytes = encodeWav({ sampleRateHz: 48000, encoding: 's16', channelData: [new Float32Array(48000 * 70)] });
    const controller = new AbortController();
    const reason = new Error('client disconnected');
    const pending = decoder({ maxDurationMs: 120_000 }).decode(bytes, controller.signal);
    controller.abort(reason);
    await assert.rejects(pending, (error) => error === reason);
  });

  it('decodes concurrent calls independently', async () => {
    const make = (rateHz: number, amplitude: number) =>
      encodeWav({ sampleRateHz: rateHz, encoding: 's16', channelData: [sine(1000, rateHz, 0.3, amplitude)] });
    const shared = decoder();
    const results = await Promise.all([shared.decode(make(48000, 0.5)), shared.decode(make(44100, 0.25)), shared.decode(make(8000, 0.75))]);
    assert.deepEqual(
      results.map((r) => r.sourceSampleRateHz),
      [48000, 44100, 8000],
    );
    [0.5, 0.25, 0.75].forEach((amplitude, i) => assert.ok(maxErrorFrom1kHz(results[i]?.samples ?? new Int16Array(), amplitude) < 1e-3));
  });
});

describe('createAudioDecoder: truncated WAV, the same for every layout (#16)', () => {
  const LAYOUTS: Array<{ name: string; sampleRateHz: number; encoding: WavSampleEncoding; channels: number }> = [
    { name: '16 kHz mono 16-bit', sampleRateHz: 16000, encoding: 's16', channels: 1 },
    { name: '44.1 kHz stereo 16-bit', sampleRateHz: 44100, encoding: 's16', channels: 2 },
    { name: '48 kHz stereo 24-bit', sampleRateHz: 48000, encoding: 's24', channels: 2 },
    { name: '22.05 kHz mono 32-bit float', sampleRateHz: 22050, encoding: 'f32', channels: 1 },
  ];
  const bytesPerSample: Record<WavSampleEncoding, number> = { u8: 1, s16: 2, s24: 3, s32: 4, f32: 4, f64: 8 };

  for (const layout of LAYOUTS) {
    it(`decodes the whole frames present and says so, whatever share is cut, for ${layout.name}`, async () => {
      const tone = sine(440, layout.sampleRateHz, 2, 0.5);
      const whole = encodeWav({
        sampleRateHz: layout.sampleRateHz,
        encoding: layout.encoding,
        channelData: Array(layout.channels).fill(tone),
      });
      const blockAlign = layout.channels * bytesPerSample[layout.encoding];
      const dataOffset = whole.length - tone.length * blockAlign;
      const complete = await decoder().decode(whole);
      assert.equal(complete.isTruncated, false);
      // A cut on a frame boundary and one inside a frame, keeping 90 %, 40 % and 10 % of the data.
      for (const share of [0.9, 0.4, 0.1]) {
        for (const extraBytes of [0, 1]) {
          const frames = Math.floor(tone.length * share);
          const cut = whole.subarray(0, dataOffset + frames * blockAlign + extraBytes);
          const audio = await decoder().decode(cut);
          assert.equal(audio.isTruncated, true, `${share} +${extraBytes}`);
          const expected = Math.round((frames * 16000) / layout.sampleRateHz);
          assert.ok(Math.abs(audio.samples.length - expected) <= 1, `${share} +${extraBytes}: ${audio.samples.length} vs ${expected}`);
        }
      }
      // Cut before the first whole frame: nothing to decode.
      await rejectsWithCode(decoder().decode(whole.subarray(0, dataOffset + blockAlign - 1)), 'invalid_audio');
    });
  }
});
