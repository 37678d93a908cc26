/**
 * Sample-rate conversion by a polyphase Kaiser-windowed sinc filter.
 *
 * The filter is zero-phase (no delay), cuts off at 95% of the lower of the two Nyquist
 * frequencies, spans 24 zero crossings each side and uses a Kaiser window with beta 8.6 (about
 * 86 dB stopband). Converting 48 or 44.1 kHz to 16 kHz, the response is flat within 0.01 dB to
 * 6.5 kHz, -0.14 dB at 7 kHz, -4 dB at 7.5 kHz, and below -95 dB from 8.6 kHz: only content
 * between 8 and 8.6 kHz, already attenuated, folds back, into the band's top 600 Hz. Speech
 * recognisers are sensitive to aliasing, so the transition band is kept narrow; the SIMD kernel
 * (fir-kernel.ts) pays for the 152 taps per output sample this takes at 48 kHz.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { invariant } from '../../core/invariant.js';
import type { FirKernel, FirKernelPlan } from './fir-kernel.js';

/** A mono signal that can be read in windows; frames outside [0, frames) read as silence. */
export interface MonoSource {
  readonly frames: number;
  /** Writes frames [startFrame, startFrame + count) into dest[destOffset..]; startFrame may be negative. */
  read(startFrame: number, count: number, dest: Float32Array, destOffset: number): void;
}

export interface ResamplePlan extends FirKernelPlan {
  readonly fromRateHz: number;
  readonly toRateHz: number;
}

const CUTOFF_FRACTION = 0.95;
const ZERO_CROSSINGS = 24;
const KAISER_BETA = 8.6;
/**
 * One row per phase while the table stays within this many floats (2 MiB). Beyond it, phases are
 * quantised to the nearest of as many rows as fit. Rows times input rate is then at least
 * 2^19 * 0.95 * 16000 / 48, so the timing error is at most 1 / (2 * rows * rate) seconds and a
 * component at 8 kHz is off by at most pi * 8000 / (rows * rate), about -76 dB.
 */
const MAX_TABLE_FLOATS = 1 << 19;
const OUTPUTS_PER_BLOCK = 8192;
/** Outputs between two yields to the event loop (about a minute of 16 kHz audio). */
const OUTPUTS_PER_YIELD = 1 << 20;
const PLAN_CACHE_SIZE = 8;

const planCache = new Map<string, ResamplePlan>();

/** The filter for one rate pair. Plans are cached: one for an odd rate takes tens of milliseconds to build. */
export function planResample(fromRateHz: number, toRateHz: number): ResamplePlan {
  invariant(
    Number.isInteger(fromRateHz) && fromRateHz > 0 && Number.isInteger(toRateHz) && toRateHz > 0,
    `Expected positive integer rates: got ${fromRateHz} and ${toRateHz}`,
  );
  const key = `${fromRateHz}:${toRateHz}`;
  const cached = planCache.get(key);
  if (cached !== undefined) {
    planCache.delete(key); // re-insert to keep the map in least-recently-used order
    planCache.set(key, cached);
    return cached;
  }
  const plan = buildPlan(fromRateHz, toRateHz);
  planCache.set(key, plan);
  if (planCache.size > PLAN_CACHE_SIZE) {
    const oldest = planCache.keys().next().value;
    if (oldest !== undefined) planCache.delete(oldest);
  }
  return plan;
}

/** The number of output samples for `frames` input frames: ceil(frames * to / from). */
export function resampledLength(frames: number, plan: ResamplePlan): number {
  const scaled = frames * plan.phaseCount;
  const remainder = scaled % downFactor(plan);
  return (scaled - remainder) / downFactor(plan) + (remainder > 0 ? 1 : 0);
}

/**
 * Resamples a whole source, yielding to the event loop between large stretches so one long file
 * does not stall every other call, and checking `signal` at each yield.
 *
 * @throws signal.reason when the signal aborts.
 */
export async function resampleMono(
  source: MonoSource,
  options: { plan: ResamplePlan; kernel: FirKernel; signal?: AbortSignal | undefined },
): Promise<Float32Array> {
  const job = startResample(source, options.plan, options.kernel);
  while (!job.isDone()) {
    options.signal?.throwIfAborted();
    job.step(OUTPUTS_PER_YIELD);
    if (!job.isDone()) await yieldToEventLoop();
  }
  options.signal?.throwIfAborted();
  return job.output;
}

/** Synchronous form of resampleMono, for arrays already in memory. */
export function resampleArray(input: Float32Array, options: { fromRateHz: number; toRateHz: number; kernel: FirKernel }): Float32Array {
  const source = arraySource(input);
  const job = startResample(source, planResample(options.fromRateHz, options.toRateHz), options.kernel);
  job.step(Number.POSITIVE_INFINITY);
  return job.output;
}

/** A MonoSource over samples already in memory. */
export function arraySource(samples: Float32Array): MonoSource {
  return {
    frames: samples.length,
    read(startFrame, count, dest, destOffset) {
      const first = Math.max(0, startFrame);
      const last = Math.min(samples.length, startFrame + count);
      dest.fill(0, destOffset, destOffset + count);
      if (last > first) dest.set(samples.subarray(first, last), destOffset + (first - startFrame));
    },
  };
}

interface ResampleJob {
  readonly output: Float32Array;
  isDone(): boolean;
  /** Computes up to `maxOutputs` more outputs. */
  step(maxOutputs: number): void;
}

function startResample(source: MonoSource, plan: ResamplePlan, kernel: FirKernel): ResampleJob {
  const outputLength = resampledLength(source.frames, plan);
  const output = new Float32Array(outputLength);
  if (plan.fromRateHz === plan.toRateHz) {
    source.read(0, source.frames, output, 0);
    clampInPlace(output, 0, outputLength);
    return { output, isDone: () => true, step: () => undefined };
  }
  const m = downFactor(plan);
  const l = plan.phaseCount;
  const halfTaps = plan.taps / 2;
  const maxInputs = Math.ceil(((OUTPUTS_PER_BLOCK - 1) * m + (l - 1)) / l) + plan.taps + 1;
  const runner = kernel.prepare(plan, { maxInputs, maxOutputs: OUTPUTS_PER_BLOCK });
  // Output n sits at input time n*M/L = base + phase/L.
  let done = 0;
  let base = 0;
  let phase = 0;
  return {
    output,
    isDone: () => done >= outputLength,
    step(maxOutputs) {
      const stopAt = Math.min(outputLength, done + maxOutputs);
      while (done < stopAt) {
        const count = Math.min(OUTPUTS_PER_BLOCK, stopAt - done);
        const lastBase = base + Math.floor(((count - 1) * m + phase) / l);
        source.read(base - halfTaps + 1, lastBase - base + plan.taps, runner.input, 0);
        runner.run(phase, count);
        output.set(runner.output.subarray(0, count), done);
        const advanced = count * m + phase;
        phase = advanced % l;
        base += (advanced - phase) / l;
        done += count;
      }
    },
  };
}

/** Resamples a signal that arrives in pieces; see createStreamResampler. */
export interface StreamResampler {
  /** Takes the next input samples; returns every output sample they complete (possibly none). */
  push(samples: Float32Array): Float32Array;
  /** Ends the input (silence after it, as resampleArray assumes); returns the remaining outputs. */
  flush(): Float32Array;
}

/**
 * A resampler for a signal that arrives in pieces (synthesized speech). An output sample is
 * computed once every input under its filter has arrived, so outputs lag the input by half the
 * filter (24 zero crossings: about 1 ms from 22.05 kHz to 24 kHz). Pushing a signal in any
 * pieces and then flushing gives exactly what resampleArray gives for the whole signal.
 */
export function createStreamResampler(options: { fromRateHz: number; toRateHz: number; kernel: FirKernel }): StreamResampler {
  const plan = planResample(options.fromRateHz, options.toRateHz);
  if (plan.fromRateHz === plan.toRateHz) {
    return {
      push(samples) {
        const out = samples.slice();
        clampInPlace(out, 0, out.length);
        return out;
      },
      flush: () => new Float32Array(0),
    };
  }
  const m = downFactor(plan);
  const l = plan.phaseCount;
  const halfTaps = plan.taps / 2;
  const maxInputs = Math.ceil(((OUTPUTS_PER_BLOCK - 1) * m + (l - 1)) / l) + plan.taps + 1;
  const runner = options.kernel.prepare(plan, { maxInputs, maxOutputs: OUTPUTS_PER_BLOCK });
  /** Input frames from `bufferStart` on that outputs still need. */
  let buffer = new Float32Array(0);
  let bufferStart = 0;
  let received = 0;
  // Output `done` sits at input time base + phase / L (as in startResample).
  let done = 0;
  let base = 0;
  let phase = 0;
  const source: MonoSource = {
    get frames() {
      return received;
    },
    read(startFrame, count, dest, destOffset) {
      dest.fill(0, destOffset, destOffset + count);
      const first = Math.max(startFrame, bufferStart);
      const last = Math.min(startFrame + count, bufferStart + buffer.length);
      if (last > first) dest.set(buffer.subarray(first - bufferStart, last - bufferStart), destOffset + (first - startFrame));
    },
  };
  const produce = (target: number): Float32Array => {
    const output = new Float32Array(Math.max(0, target - done));
    let at = 0;
    while (done < target) {
      const count = Math.min(OUTPUTS_PER_BLOCK, target - done);
      const lastBase = base + Math.floor(((count - 1) * m + phase) / l);
      source.read(base - halfTaps + 1, lastBase - base + plan.taps, runner.input, 0);
      runner.run(phase, count);
      output.set(runner.output.subarray(0, count), at);
      at += count;
      const advanced = count * m + phase;
      phase = advanced % l;
      base += (advanced - phase) / l;
      done += count;
    }
    // Inputs before the next output's first tap are no longer needed.
    const keepFrom = base - halfTaps + 1;
    if (keepFrom > bufferStart) {
      buffer = buffer.slice(Math.min(buffer.length, keepFrom - bufferStart));
      bufferStart = keepFrom;
    }
    return output;
  };
  return {
    push(samples) {
      const joined = new Float32Array(buffer.length + samples.length);
      joined.set(buffer);
      joined.set(samples, buffer.length);
      buffer = joined;
      received += samples.length;
      // Output n needs inputs up to floor(n * M / L) + halfTaps: n < (received - halfTaps) * L / M.
      const ready = received - halfTaps > 0 ? Math.ceil(((received - halfTaps) * l) / m) : 0;
      return produce(Math.max(done, ready));
    },
    flush: () => produce(resampledLength(received, plan)),
  };
}

function downFactor(plan: ResamplePlan): number {
  return plan.inputStep * plan.phaseCount + plan.phaseStep;
}

/** Sources in this folder already read within [-1, 1]; this keeps the contract for any other. */
function clampInPlace(samples: Float32Array, from: number, to: number): void {
  for (let i = from; i < to; i += 1) {
    const value = samples[i] ?? 0;
    if (value > 1) samples[i] = 1;
    else if (value < -1) samples[i] = -1;
  }
}

function buildPlan(fromRateHz: number, toRateHz: number): ResamplePlan {
  const divisor = gcd(fromRateHz, toRateHz);
  const up = toRateHz / divisor;
  const down = fromRateHz / divisor;
  if (up === down) {
    return {
      fromRateHz,
      toRateHz,
      taps: 8,
      table: new Float32Array(8),
      rowOfPhase: new Int32Array(1),
      phaseCount: 1,
      inputStep: 1,
      phaseStep: 0,
    };
  }
  // Cutoff as a fraction of the input Nyquist frequency, and the window's half-width in input samples.
  const cutoff = CUTOFF_FRACTION * Math.min(1, up / down);
  const halfWidth = ZERO_CROSSINGS / cutoff;
  const taps = Math.ceil((2 * Math.ceil(halfWidth)) / 8) * 8;
  const halfTaps = taps / 2;
  const isQuantised = up * taps > MAX_TABLE_FLOATS;
  const rows = isQuantised ? Math.floor(MAX_TABLE_FLOATS / taps) : up;
  // A quantised table also holds the row for phase 1.0, reached when a phase rounds up.
  const table = new Float32Array((isQuantised ? rows + 1 : rows) * taps);
  for (let row = 0; row < table.length / taps; row += 1) {
    const fraction = row / rows;
    let sum = 0;
    for (let k = 0; k < taps; k += 1) {
      const t = k - (halfTaps - 1) - fraction; // input-sample distance from the output instant
      const value = cutoff * sinc(cutoff * t) * kaiserWindow(t / halfWidth);
      table[row * taps + k] = value;
      sum += value;
    }
    // Unity gain at DC for every phase, so a constant signal stays constant.
    for (let k = 0; k < taps; k += 1) table[row * taps + k] = (table[row * taps + k] ?? 0) / sum;
  }
  const rowOfPhase = new Int32Array(up);
  for (let p = 0; p < up; p += 1) rowOfPhase[p] = isQuantised ? Math.round((p * rows) / up) : p;
  return {
    fromRateHz,
    toRateHz,
    taps,
    table,
    rowOfPhase,
    phaseCount: up,
    inputStep: Math.floor(down / up),
    phaseStep: down % up,
  };
}

const KAISER_TABLE_STEPS = 8192;
let kaiserTable: Float64Array | undefined;

/**
 * The Kaiser window at x in [-1, 1], interpolated from a table: a rate with thousands of phases
 * needs a million window values, and the Bessel series for each would take a quarter second.
 * Linear interpolation over 8192 steps is accurate to about 1e-7, far below the stopband.
 */
function kaiserWindow(x: number): number {
  const position = Math.abs(x) * KAISER_TABLE_STEPS;
  if (position >= KAISER_TABLE_STEPS) return 0;
  if (kaiserTable === undefined) {
    const table = new Float64Array(KAISER_TABLE_STEPS + 1);
    const norm = besselI0(KAISER_BETA);
    for (let i = 0; i <= KAISER_TABLE_STEPS; i += 1) {
      const u = i / KAISER_TABLE_STEPS;
      table[i] = besselI0(KAISER_BETA * Math.sqrt(Math.max(0, 1 - u * u))) / norm;
    }
    kaiserTable = table;
  }
  const index = Math.floor(position);
  const weight = position - index;
  return (kaiserTable[index] ?? 0) * (1 - weight) + (kaiserTable[index + 1] ?? 0) * weight;
}

function sinc(x: number): number {
  if (x === 0) return 1;
  const px = Math.PI * x;
  return Math.sin(px) / px;
}

/** Modified Bessel function of the first kind, order 0, by its power series. */
function besselI0(x: number): number {
  const quarterSquare = (x * x) / 4;
  let term = 1;
  let sum = 1;
  for (let k = 1; k < 64 && term > sum * 1e-17; k += 1) {
    term *= quarterSquare / (k * k);
    sum += term;
  }
  return sum;
}

function gcd(a: number, b: number): number {
  let x = a;
  let y = b;
  while (y !== 0) [x, y] = [y, x % y];
  return x;
}
