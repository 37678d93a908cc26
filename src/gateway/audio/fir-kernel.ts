/**
 * The inner loop of the polyphase resampler: for each output sample, a dot product of one row of
 * filter coefficients with a window of input samples. Two implementations compute the same sums:
 * a WebAssembly SIMD one (over ten times faster here: V8 does not vectorise JavaScript loops, and
 * the 48 kHz filter has 152 taps per output sample) and a plain JavaScript one, used where
 * WebAssembly SIMD is unavailable and as the reference in tests.
 */

import { invariant } from '../../core/invariant.js';

/** What a kernel needs from a resampling plan. */
export interface FirKernelPlan {
  /** Taps per row; a multiple of 8. */
  readonly taps: number;
  /** Coefficient rows, `taps` floats each. */
  readonly table: Float32Array;
  /** The row used for each phase 0..phaseCount-1. */
  readonly rowOfPhase: Int32Array;
  /** Phases per input sample (the upsampling factor L). */
  readonly phaseCount: number;
  /** Whole input samples to advance per output sample: floor(M / L). */
  readonly inputStep: number;
  /** Phases to advance per output sample: M mod L. */
  readonly phaseStep: number;
}

/** Buffers sized for one plan; a block is run by filling `input` and calling `run`. */
export interface FirBlockRunner {
  /** Input window for a block: `input[0]` is the first sample under output 0's first tap. */
  readonly input: Float32Array;
  readonly output: Float32Array;
  /**
   * Computes `count` outputs into `output[0..count)`, the first at phase `firstPhase`. Outputs are
   * clamped to [-1, 1]: the filter's overshoot near full scale would leave that range.
   */
  run(firstPhase: number, count: number): void;
}

export interface FirKernel {
  readonly name: 'wasm-simd' | 'js';
  /** Allocates buffers for blocks of up to `maxOutputs` outputs reading up to `maxInputs` samples. */
  prepare(plan: FirKernelPlan, sizes: { maxInputs: number; maxOutputs: number }): FirBlockRunner;
}

/** The fastest kernel this runtime supports. */
export function createFirKernel(options: { implementation?: 'wasm-simd' | 'js' } = {}): FirKernel {
  const wanted = options.implementation;
  if (wanted !== 'js') {
    const module = compiledWasmModule();
    if (module !== undefined && wasm !== undefined) return createWasmKernel(module, wasm);
    invariant(wanted !== 'wasm-simd', 'WebAssembly SIMD is not available in this runtime');
  }
  return jsKernel;
}

// --- JavaScript kernel ------------------------------------------------------------------------

const jsKernel: FirKernel = {
  name: 'js',
  prepare(plan, sizes) {
    const input = new Float32Array(sizes.maxInputs);
    const output = new Float32Array(sizes.maxOutputs);
    const { taps, table, rowOfPhase, phaseCount, inputStep, phaseStep } = plan;
    return {
      input,
      output,
      run(firstPhase, count) {
        let phase = firstPhase;
        let base = 0;
        for (let n = 0; n < count; n += 1) {
          const row = (rowOfPhase[phase] ?? 0) * taps;
          let sum0 = 0;
          let sum1 = 0;
          for (let k = 0; k < taps; k += 2) {
            sum0 += (input[base + k] ?? 0) * (table[row + k] ?? 0);
            sum1 += (input[base + k + 1] ?? 0) * (table[row + k + 1] ?? 0);
          }
          output[n] = Math.min(1, Math.max(-1, sum0 + sum1));
          base += inputStep;
          phase += phaseStep;
          if (phase >= phaseCount) {
            phase -= phaseCount;
            base += 1;
          }
        }
      },
    };
  },
};

// --- WebAssembly SIMD kernel ------------------------------------------------------------------

/**
 * NOTE: the WebAssembly global's types live in lib.dom, which server code does not load; these
 * are the few members this file uses, as Node provides them.
 */
type WasmModule = object;
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => WasmModule;
  Memory: new (descriptor: { initial: number }) => WasmMemory;
  Instance: new (module: WasmModule, imports: { env: { memory: WasmMemory } }) => { exports: Record<string, unknown> };
}
// Absent when Node runs with --jitless.
const wasm = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;

const WASM_PAGE_BYTES = 65536;

function createWasmKernel(module: WasmModule, api: WasmApi): FirKernel {
  return {
    name: 'wasm-simd',
    prepare(plan, sizes) {
      // Memory layout: [row byte offsets (Int32 per phase) | table | input | output], 16-byte aligned.
      const align = (value: number): number => Math.ceil(value / 16) * 16;
      const rowsAt = 0;
      const tableAt = align(rowsAt + plan.phaseCount * 4);
      const inputAt = align(tableAt + plan.table.length * 4);
      // The SIMD loop reads whole rows of `taps` floats, which the input window already covers.
      const outputAt = align(inputAt + sizes.maxInputs * 4);
      const totalBytes = align(outputAt + sizes.maxOutputs * 4);
      const memory = new api.Memory({ initial: Math.ceil(totalBytes / WASM_PAGE_BYTES) });
      const instance = new api.Instance(module, { env: { memory } });
      const fir = instance.exports['fir'] as (...args: number[]) => void;
      const rowOffsets = new Int32Array(memory.buffer, rowsAt, plan.phaseCount);
      for (let phase = 0; phase < plan.phaseCount; phase += 1) {
        rowOffsets[phase] = tableAt + (plan.rowOfPhase[phase] ?? 0) * plan.taps * 4;
      }
      new Float32Array(memory.buffer, tableAt, plan.table.length).set(plan.table);
      const input = new Float32Array(memory.buffer, inputAt, sizes.maxInputs);
      const output = new Float32Array(memory.buffer, outputAt, sizes.maxOutputs);
      const tapBytes = plan.taps * 4;
      const inputStepBytes = plan.inputStep * 4;
      return {
        input,
        output,
        run(firstPhase, count) {
          fir(inputAt, rowsAt, outputAt, count, tapBytes, plan.phaseCount, inputStepBytes, plan.phaseStep, firstPhase);
        },
      };
    },
  };
}

let wasmModule: WasmModule | undefined | 'unavailable';

function compiledWasmModule(): WasmModule | undefined {
  if (wasmModule === undefined) {
    const bytes = firModuleBytes();
    wasmModule = wasm?.validate(bytes) === true ? new wasm.Module(bytes) : 'unavailable';
  }
  return wasmModule === 'unavailable' ? undefined : wasmModule;
}

// A tiny WebAssembly assembler: just the encodings the one function below needs.
const I32 = 0x7f;
const V128 = 0x7b;
const OP = {
  block: 0x02,
  loop: 0x03,
  if: 0x04,
  end: 0x0b,
  br: 0x0c,
  brIf: 0x0d,
  localGet: 0x20,
  localSet: 0x21,
  localTee: 0x22,
  i32Load: 0x28,
  f32Store: 0x38,
  i32Const: 0x41,
  i32GeU: 0x4f,
  i32LtU: 0x49,
  i32GeS: 0x4e,
  i32Add: 0x6a,
  i32Sub: 0x6b,
  i32Shl: 0x74,
  f32Const: 0x43,
  f32Add: 0x92,
  f32Min: 0x96,
  f32Max: 0x97,
  simdPrefix: 0xfd,
  voidBlockType: 0x40,
} as const;
const SIMD = { v128Load: 0, v128Const: 12, f32x4ExtractLane: 31, f32x4Add: 228, f32x4Mul: 230 } as const;

function unsignedLeb(value: number): number[] {
  const out: number[] = [];
  let rest = value >>> 0;
  do {
    let byte = rest & 0x7f;
    rest >>>= 7;
    if (rest !== 0) byte |= 0x80;
    out.push(byte);
  } while (rest !== 0);
  return out;
}

function signedLeb(value: number): number[] {
  const out: number[] = [];
  let rest = value | 0;
  for (;;) {
    const byte = rest & 0x7f;
    rest >>= 7;
    const isDone = (rest === 0 && (byte & 0x40) === 0) || (rest === -1 && (byte & 0x40) !== 0);
    out.push(isDone ? byte : byte | 0x80);
    if (isDone) return out;
  }
}

const name = (text: string): number[] => [...unsignedLeb(text.length), ...[...text].map((c) => c.charCodeAt(0))];
const vector = (items: number[][]): number[] => [...unsignedLeb(items.length), ...items.flat()];
const section = (id: number, body: number[]): number[] => [id, ...unsignedLeb(body.length), ...body];
const get = (local: number): number[] => [OP.localGet, ...unsignedLeb(local)];
const set = (local: number): number[] => [OP.localSet, ...unsignedLeb(local)];
const tee = (local: number): number[] => [OP.localTee, ...unsignedLeb(local)];
const i32 = (value: number): number[] => [OP.i32Const, ...signedLeb(value)];
const simd = (op: number, ...immediates: number[]): number[] => [OP.simdPrefix, ...unsignedLeb(op), ...immediates];
/** memarg: alignment exponent 2 (floats are 4-byte aligned), then the static offset. */
const memarg = (offset: number): number[] => [2, ...unsignedLeb(offset)];
const f32 = (value: number): number[] => {
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setFloat32(0, value, true);
  return [OP.f32Const, ...bytes];
};

/**
 * Builds the module. Equivalent text format:
 *
 *   (func (export "fir") (param $x $rows $y $count $tapBytes $phases $stepBytes $phaseStep $phase i32)
 *     (local $n $xp $hp $end $base i32) (local $acc0 $acc1 v128)
 *     base = x
 *     loop (while n < count)
 *       xp = base; hp = load_i32(rows + phase*4); end = hp + tapBytes
 *       acc0 = acc1 = 0
 *       loop: acc0 += v128(xp) * v128(hp); acc1 += v128(xp+16) * v128(hp+16); xp += 32; hp += 32; while hp < end
 *       acc0 += acc1; store_f32(y, clamp((lane0 + lane1) + (lane2 + lane3), -1, 1)); y += 4
 *       base += stepBytes; phase += phaseStep; if phase >= phases { phase -= phases; base += 4 }
 *       n += 1
 */
function firModuleBytes(): Uint8Array {
  const [x, rows, y, count, tapBytes, phases, stepBytes, phaseStep, phase] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
  const [n, xp, hp, end, base, acc0, acc1] = [9, 10, 11, 12, 13, 14, 15];
  const zero = simd(SIMD.v128Const, ...new Array<number>(16).fill(0));
  const multiplyAdd = (acc: number, offset: number): number[] => [
    ...get(acc),
    ...get(xp),
    ...simd(SIMD.v128Load, ...memarg(offset)),
    ...get(hp),
    ...simd(SIMD.v128Load, ...memarg(offset)),
    ...simd(SIMD.f32x4Mul),
    ...simd(SIMD.f32x4Add),
    ...set(acc),
  ];
  const lane = (index: number): number[] => [...get(acc0), ...simd(SIMD.f32x4ExtractLane, index)];
  const body = [
    ...get(x),
    ...set(base),
    OP.block,
    OP.voidBlockType,
    OP.loop,
    OP.voidBlockType,
    ...get(n),
    ...get(count),
    OP.i32GeU,
    OP.brIf,
    1,
    ...get(base),
    ...set(xp),
    ...get(rows),
    ...get(phase),
    ...i32(2),
    OP.i32Shl,
    OP.i32Add,
    OP.i32Load,
    ...memarg(0),
    ...tee(hp),
    ...get(tapBytes),
    OP.i32Add,
    ...set(end),
    ...zero,
    ...set(acc0),
    ...zero,
    ...set(acc1),
    OP.loop,
    OP.voidBlockType,
    ...multiplyAdd(acc0, 0),
    ...multiplyAdd(acc1, 16),
    ...get(xp),
    ...i32(32),
    OP.i32Add,
    ...set(xp),
    ...get(hp),
    ...i32(32),
    OP.i32Add,
    ...tee(hp),
    ...get(end),
    OP.i32LtU,
    OP.brIf,
    0,
    OP.end,
    ...get(acc0),
    ...get(acc1),
    ...simd(SIMD.f32x4Add),
    ...set(acc0),
    ...get(y),
    ...lane(0),
    ...lane(1),
    OP.f32Add,
    ...lane(2),
    ...lane(3),
    OP.f32Add,
    OP.f32Add,
    ...f32(-1),
    OP.f32Max,
    ...f32(1),
    OP.f32Min,
    OP.f32Store,
    ...memarg(0),
    ...get(y),
    ...i32(4),
    OP.i32Add,
    ...set(y),
    ...get(base),
    ...get(stepBytes),
    OP.i32Add,
    ...set(base),
    ...get(phase),
    ...get(phaseStep),
    OP.i32Add,
    ...tee(phase),
    ...get(phases),
    OP.i32GeS,
    OP.if,
    OP.voidBlockType,
    ...get(phase),
    ...get(phases),
    OP.i32Sub,
    ...set(phase),
    ...get(base),
    ...i32(4),
    OP.i32Add,
    ...set(base),
    OP.end,
    ...get(n),
    ...i32(1),
    OP.i32Add,
    ...set(n),
    OP.br,
    0,
    OP.end,
    OP.end,
    OP.end,
  ];
  const locals = vector([
    [...unsignedLeb(5), I32],
    [...unsignedLeb(2), V128],
  ]);
  const code = [...locals, ...body];
  const funcType = [0x60, ...vector(new Array<number[]>(9).fill([I32])), ...vector([])];
  const memoryImport = [...name('env'), ...name('memory'), 0x02, 0x00, ...unsignedLeb(1)];
  return new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, vector([funcType])),
    ...section(2, vector([memoryImport])),
    ...section(3, vector([[0]])),
    ...section(7, vector([[...name('fir'), 0x00, 0]])),
    ...section(10, vector([[...unsignedLeb(code.length), ...code]])),
  ]);
}
