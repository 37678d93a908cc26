import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createFirKernel } from './fir-kernel.js';
import { arraySource, createStreamResampler, planResample, resampleArray, resampledLength, resampleMono } from './resampler.js';

const kernel = createFirKernel();

function sine(options: { frequencyHz: number; rateHz: number; seconds: number; amplitude?: number }): Float32Array {
  const { frequencyHz, rateHz, seconds, amplitude = 0.5 } = options;
  const out = new Float32Array(Math.round(rateHz * seconds));
  for (let i = 0; i < out.length; i += 1) out[i] = amplitude * Math.sin((2 * Math.PI * frequencyHz * i) / rateHz);
  return out;
}

/** RMS over the middle of the signal, away from the filter's start-up and tail. */
function interiorRms(samples: Float32Array, marginSamples = 800): number {
  let sum = 0;
  const end = samples.length - marginSamples;
  for (let i = marginSamples; i < end; i += 1) sum += (samples[i] ?? 0) ** 2;
  return Math.sqrt(sum / (end - marginSamples));
}

/** Largest difference from the ideal sine at the output rate, over the interior. */
function maxErrorFromSine(samples: Float32Array, frequencyHz: number, amplitude: number, rateHz = 16000): number {
  let max = 0;
  for (let i = 800; i < samples.length - 800; i += 1) {
    const ideal = amplitude * Math.sin((2 * Math.PI * frequencyHz * i) / rateHz);
    max = Math.max(max, Math.abs((samples[i] ?? 0) - ideal));
  }
  return max;
}

const toDb = (ratio: number): number => 20 * Math.log10(ratio);

describe('resampler', () => {
  it('resampleArray turns a 1 kHz sine at 48 kHz into a 1 kHz sine at 16 kHz with error below -70 dBFS', () => {
    const out = resampleArray(sine({ frequencyHz: 1000, rateHz: 48000, seconds: 1 }), {
      fromRateHz: 48000,
      toRateHz: 16000,
      kernel,
    });
    assert.equal(out.length, 16000);
    // The filter is zero-phase, so the output lines up with the ideal sine sample for sample.
    assert.ok(toDb(maxErrorFromSine(out, 1000, 0.5)) < -70, `error ${toDb(maxErrorFromSine(out, 1000, 0.5))} dB`);
  });

  it('resampleArray attenuates an 11 kHz sine at 48 kHz by more than 80 dB instead of aliasing it to 5 kHz', () => {
    const input = sine({ frequencyHz: 11000, rateHz: 48000, seconds: 1 });
    const out = resampleArray(input, { fromRateHz: 48000, toRateHz: 16000, kernel });
    const attenuationDb = toDb(interiorRms(out) / interiorRms(input, 2400));
    assert.ok(attenuationDb < -80, `11 kHz came through at ${attenuationDb.toFixed(1)} dB`);
  });

  it('resampleArray keeps the band below 6 kHz flat and stops everything above 8.6 kHz, at 48 and 44.1 kHz', () => {
    for (const rateHz of [48000, 44100]) {
      for (const frequencyHz of [100, 1000, 3000, 5000, 6000]) {
        const input = sine({ frequencyHz, rateHz, seconds: 0.5 });
        const gain = interiorRms(resampleArray(input, { fromRateHz: rateHz, toRateHz: 16000, kernel })) / interiorRms(input, 2400);
        assert.ok(Math.abs(gain - 1) < 2e-3, `${frequencyHz} Hz at ${rateHz} Hz: gain ${gain}`);
      }
      for (const frequencyHz of [8600, 9000, 10000, 12000, 15000, 20000, 21900]) {
        const input = sine({ frequencyHz, rateHz, seconds: 0.5 });
        const gain = interiorRms(resampleArray(input, { fromRateHz: rateHz, toRateHz: 16000, kernel })) / interiorRms(input, 2400);
        assert.ok(toDb(gain) < -75, `${frequencyHz} Hz at ${rateHz} Hz leaked at ${toDb(gain).toFixed(1)} dB`);
      }
    }
  });

  it('resampleArray upsamples 8 kHz without images: a 3 kHz sine comes out as the ideal 3 kHz sine', () => {
    const out = resampleArray(sine({ frequencyHz: 3000, rateHz: 8000, seconds: 1 }), {
      fromRateHz: 8000,
      toRateHz: 16000,
      kernel,
    });
    assert.equal(out.length, 16000);
    // An image at 5 kHz would show up as a difference from the ideal 3 kHz sine.
    assert.ok(toDb(maxErrorFromSine(out, 3000, 0.5)) < -70);
  });

  it('resampleArray handles rates whose phase table is quantised (44099, 7919 Hz) and large ratios (384 kHz)', () => {
    for (const rateHz of [44099, 7919, 11025, 22050, 32000, 96000, 192000, 384000]) {
      const plan = planResample(rateHz, 16000);
      const out = resampleArray(sine({ frequencyHz: 1000, rateHz, seconds: 0.5 }), { fromRateHz: rateHz, toRateHz: 16000, kernel });
      assert.equal(out.length, resampledLength(Math.round(rateHz * 0.5), plan));
      const errorDb = toDb(maxErrorFromSine(out, 1000, 0.5));
      assert.ok(errorDb < -60, `${rateHz} Hz: error ${errorDb.toFixed(1)} dB`);
    }
  });

  it('resampleArray keeps a constant signal constant at every phase (unity DC gain per row)', () => {
    for (const rateHz of [44100, 44099, 8000]) {
      const out = resampleArray(new Float32Array(rateHz).fill(0.25), { fromRateHz: rateHz, toRateHz: 16000, kernel });
      for (let i = 800; i < out.length - 800; i += 1) assert.ok(Math.abs((out[i] ?? 0) - 0.25) < 1e-5, `${rateHz}: ${out[i]}`);
    }
  });

  it('resampleArray returns 16 kHz input unchanged', () => {
    const input = sine({ frequencyHz: 440, rateHz: 16000, seconds: 0.1 });
    assert.deepEqual(resampleArray(input, { fromRateHz: 16000, toRateHz: 16000, kernel }), input);
  });

  it('resampleArray clamps the overshoot of a full-scale square wave to [-1, 1]', () => {
    const input = new Float32Array(48000).map((_, i) => (Math.floor(i / 240) % 2 === 0 ? 1 : -1));
    const out = resampleArray(input, { fromRateHz: 48000, toRateHz: 16000, kernel });
    let peak = 0;
    for (const value of out) peak = Math.max(peak, Math.abs(value));
    assert.equal(peak, 1);
  });

  it('resampledLength is ceil(frames * 16000 / rate), including 0 and 1 frame', () => {
    const cases: [number, number, number][] = [
      [48000, 0, 0],
      [48000, 1, 1],
      [48000, 3, 1],
      [48000, 4, 2],
      [44100, 44100, 16000],
      [44100, 1, 1],
      [8000, 1, 2],
      [8000, 8000, 16000],
      [22050, 22051, 16001],
      [1, 1, 16000],
    ];
    for (const [rateHz, frames, expected] of cases) {
      assert.equal(resampledLength(frames, planResample(rateHz, 16000)), expected, `${frames} frames at ${rateHz} Hz`);
      assert.equal(resampleArray(new Float32Array(frames), { fromRateHz: rateHz, toRateHz: 16000, kernel }).length, expected);
    }
  });

  it('the WebAssembly SIMD and JavaScript kernels compute the same outputs', () => {
    const jsKernel = createFirKernel({ implementation: 'js' });
    const simdKernel = createFirKernel({ implementation: 'wasm-simd' });
    assert.equal(simdKernel.name, 'wasm-simd');
    let seed = 7;
    const noise = new Float32Array(30000).map(() => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 1073741824 - 1;
    });
    for (const rateHz of [48000, 44100, 8000, 44099, 96000]) {
      const fromJs = resampleArray(noise, { fromRateHz: rateHz, toRateHz: 16000, kernel: jsKernel });
      const fromSimd = resampleArray(noise, { fromRateHz: rateHz, toRateHz: 16000, kernel: simdKernel });
      assert.equal(fromSimd.length, fromJs.length);
      let maxDifference = 0;
      for (let i = 0; i < fromJs.length; i += 1) maxDifference = Math.max(maxDifference, Math.abs((fromJs[i] ?? 0) - (fromSimd[i] ?? 0)));
      assert.ok(maxDifference < 1e-5, `${rateHz} Hz: kernels differ by ${maxDifference}`);
    }
  });

  it('createFirKernel picks the WebAssembly SIMD kernel on this runtime', () => {
    assert.equal(createFirKernel().name, 'wasm-simd');
  });

  it('resampleMono stops at the next yield when the signal aborts, rejecting with its reason', async () => {
    const frames = 48000 * 100; // 1.6 M outputs: more than one stretch between yields
    let framesRead = 0;
    const source = arraySource(new Float32Array(frames));
    const counting = {
      frames,
      read(start: number, count: number, dest: Float32Array, offset: number) {
        framesRead += count;
        source.read(start, count, dest, offset);
      },
    };
    const controller = new AbortController();
    const reason = new Error('client went away');
    const pending = resampleMono(counting, { plan: planResample(48000, 16000), kernel, signal: controller.signal });
    controller.abort(reason);
    await assert.rejects(pending, (error) => error === reason);
    assert.ok(framesRead < frames, `read ${framesRead} of ${frames} frames`);
  });
});

describe('createStreamResampler', () => {
  const signal = (frames: number) => Float32Array.from({ length: frames }, (_, i) => 0.5 * Math.sin(i * 0.05) + 0.2 * Math.sin(i * 0.31));

  for (const fromRateHz of [22_050, 16_000, 8000, 32_000, 44_100, 24_000]) {
    it(`gives exactly what resampleArray gives for the whole signal, from ${fromRateHz} Hz to 24 kHz in uneven pieces`, () => {
      const input = signal(fromRateHz / 2 + 37);
      const whole = resampleArray(input, { fromRateHz, toRateHz: 24_000, kernel });
      const resampler = createStreamResampler({ fromRateHz, toRateHz: 24_000, kernel });
      const outputs: Float32Array[] = [];
      let at = 0;
      for (const size of [1, 5, 100, 4410, 3, 997]) {
        outputs.push(resampler.push(input.subarray(at, Math.min(input.length, at + size))));
        at = Math.min(input.length, at + size);
      }
      outputs.push(resampler.push(input.subarray(at)));
      outputs.push(resampler.flush());
      const streamed = new Float32Array(outputs.reduce((n, o) => n + o.length, 0));
      let offset = 0;
      for (const o of outputs) {
        streamed.set(o, offset);
        offset += o.length;
      }
      assert.equal(streamed.length, whole.length);
      assert.deepEqual(streamed, whole);
    });
  }

  it('returns output for each push once the filter has its inputs (a lag of half the filter)', () => {
    const resampler = createStreamResampler({ fromRateHz: 22_050, toRateHz: 24_000, kernel });
    const first = resampler.push(signal(2205));
    // 100 ms in gives nearly 100 ms out: only the filter's half-width (about 1 ms) waits for more.
    assert.ok(first.length > 2300 && first.length <= 2400, `got ${first.length}`);
    assert.equal(first.length + resampler.flush().length, resampledLength(2205, planResample(22_050, 24_000)));
  });
});
