/**
 * Reusable memory for uploaded files. A transcription's upload (1.44 MB for 45 s of 16 kHz audio)
 * lives until its batch's result comes back, long enough for V8 to move it to the old
 * generation, where only full collections free it. A fresh buffer per upload then drove a full
 * collection every 10 to 30 uploads: with 45 s uploads, about 40 % of the gateway's main-thread
 * time went to collecting and copying them; reusing the memory took a quarter off that thread's
 * time per upload (bench/results/gateway-upload-pool-2026-12-03/). The gateway has one pool; the
 * transcription, translation and diarization routes take each upload's buffer from it and give it
 * back once the call's result is in, when nothing reads the audio any more (for a diarization
 * session's chunk of 480 KB, that cut the gateway's CPU time per chunk by about a third:
 * bench/results/diarize-gateway-cpu-2026-12-04/).
 *
 * Buffers come in power-of-two sizes from 64 KiB; a given-back buffer is kept for the next upload
 * of its size while the pool holds less than `maxPooledBytes`, and left to the garbage collector
 * otherwise. Only give back a buffer nothing will read again: the pool hands it out as is.
 *
 * Memory bound: the pool keeps its high-water mark, at most `maxPooledBytes` (config
 * `gateway.uploadPoolBytes`), for as long as uploads keep coming. Once no upload has taken a
 * buffer for `idleMs` (config `gateway.uploadPoolIdleMs`), it lets go of all of it, so that a
 * gateway's memory returns to its idle level after a burst (issue 16: a fuzz run left the pool,
 * and so the process, 70 MiB above idle for good).
 */
import type { Clock, TimerHandle } from '../core/clock.js';

const MIN_CLASS_BYTES = 64 * 1024;

export interface PoolChange {
  /** Bytes held for reuse now. */
  pooledBytes: number;
  /** Bytes this change allocated (a take the pool could not serve), else 0. */
  allocatedBytes: number;
}

export interface UploadPoolOptions {
  /** Most memory kept for reuse, in bytes; 0 turns pooling off (every take allocates). */
  maxPooledBytes: number;
  /** How long the pool keeps its memory while no upload takes any, in milliseconds. @default never let go */
  idleMs?: number;
}

export interface UploadPoolDeps {
  /** Drives the idle release; required with `idleMs`. */
  clock?: Clock;
  /** Hears of each allocation and of the pooled bytes after each take, give-back and release. */
  onChange?: (change: PoolChange) => void;
  /** Called once the idle timer has let go of the pool's memory. */
  onIdleRelease?: () => void;
}

export class UploadPool {
  readonly #maxPooledBytes: number;
  readonly #idleMs: number | undefined;
  readonly #clock: Clock | undefined;
  readonly #free = new Map<number, ArrayBuffer[]>();
  /** Buffers handed out and not given back, so that a stray or second release is ignored. */
  readonly #out = new WeakSet<ArrayBuffer>();
  readonly #onChange: (change: PoolChange) => void;
  readonly #onIdleRelease: (() => void) | undefined;
  #pooledBytes = 0;
  #lastTakeMs = 0;
  #idleTimer: TimerHandle | undefined;

  constructor(options: UploadPoolOptions, deps: UploadPoolDeps = {}) {
    this.#maxPooledBytes = options.maxPooledBytes;
    this.#idleMs = options.idleMs;
    this.#clock = deps.clock;
    this.#onChange = deps.onChange ?? (() => {});
    this.#onIdleRelease = deps.onIdleRelease;
  }

  /** Bytes held for reuse now. */
  get pooledBytes(): number {
    return this.#pooledBytes;
  }

  /** A buffer of `bytes` bytes (its contents are whatever the last user left). */
  take(bytes: number): Buffer {
    const size = classBytes(bytes);
    const reused = this.#free.get(size)?.pop();
    if (reused !== undefined) this.#pooledBytes -= size;
    const memory = reused ?? new ArrayBuffer(size);
    this.#out.add(memory);
    if (this.#clock !== undefined) this.#lastTakeMs = this.#clock.nowMs();
    this.#onChange({ pooledBytes: this.#pooledBytes, allocatedBytes: reused === undefined ? size : 0 });
    return Buffer.from(memory, 0, bytes);
  }

  /** Gives back a buffer from take() (any view of it); other buffers and second calls are ignored. */
  giveBack(buffer: Uint8Array): void {
    const memory = buffer.buffer;
    if (!(memory instanceof ArrayBuffer) || !this.#out.has(memory)) return;
    this.#out.delete(memory);
    if (this.#pooledBytes + memory.byteLength > this.#maxPooledBytes) return;
    const list = this.#free.get(memory.byteLength) ?? [];
    list.push(memory);
    this.#free.set(memory.byteLength, list);
    this.#pooledBytes += memory.byteLength;
    this.#onChange({ pooledBytes: this.#pooledBytes, allocatedBytes: 0 });
    this.#armIdleRelease();
  }

  /**
   * Runs what comes before an upload is handed on (its checks and decoding): when that throws,
   * nothing else has read the upload, so it goes back to the pool before the error does.
   */
  async giveBackOnFailure<T>(upload: Uint8Array | undefined, accept: () => Promise<T>): Promise<T> {
    try {
      return await accept();
    } catch (err) {
      if (upload !== undefined) this.giveBack(upload);
      throw err;
    }
  }

  /**
   * Takes memory back that left this thread: a buffer from take() whose memory was transferred to
   * another thread (which detached it here) and has now come back as a new ArrayBuffer. Memory of
   * a size take() never hands out is ignored.
   */
  adopt(memory: ArrayBuffer): void {
    if (memory.byteLength !== classBytes(memory.byteLength)) return;
    this.#out.add(memory);
    this.giveBack(new Uint8Array(memory));
  }

  /** Lets go of every pooled buffer (the garbage collector frees them). */
  release(): void {
    this.#idleTimer?.cancel();
    this.#idleTimer = undefined;
    if (this.#pooledBytes === 0) return;
    this.#free.clear();
    this.#pooledBytes = 0;
    this.#onChange({ pooledBytes: 0, allocatedBytes: 0 });
  }

  #armIdleRelease(): void {
    const clock = this.#clock;
    const idleMs = this.#idleMs;
    if (clock === undefined || idleMs === undefined || this.#idleTimer !== undefined) return;
    const check = (): void => {
      const idleForMs = clock.nowMs() - this.#lastTakeMs;
      if (idleForMs >= idleMs) {
        this.#idleTimer = undefined;
        this.release();
        this.#onIdleRelease?.();
      } else {
        this.#idleTimer = clock.setTimeout(check, idleMs - idleForMs);
      }
    };
    this.#idleTimer = clock.setTimeout(check, Math.max(0, idleMs - (clock.nowMs() - this.#lastTakeMs)));
  }
}

function classBytes(bytes: number): number {
  let size = MIN_CLASS_BYTES;
  while (size < bytes) size *= 2;
  return size;
}

/**
 * Reads `chunks` into one buffer from `pool`, taken at `capacity` bytes (an upper bound, such as
 * the request's Content-Length). Returns a view of the bytes read, to give back to the pool when
 * done. Should more arrive than `capacity`, the bytes are gathered in a fresh buffer instead and
 * the pooled one goes back at once; so does it when reading `chunks` fails.
 */
export async function readIntoPool(chunks: AsyncIterable<Buffer>, capacity: number, pool: UploadPool): Promise<Buffer> {
  const target = pool.take(capacity);
  let filled = 0;
  const overflow: Buffer[] = [];
  try {
    for await (const chunk of chunks) {
      if (overflow.length === 0 && filled + chunk.length <= target.length) {
        chunk.copy(target, filled);
        filled += chunk.length;
      } else {
        overflow.push(chunk);
      }
    }
  } catch (err) {
    // A read that failed part way (the client left, the body broke off): nothing else holds it.
    pool.giveBack(target);
    throw err;
  }
  if (overflow.length === 0) return target.subarray(0, filled);
  const whole = Buffer.concat([target.subarray(0, filled), ...overflow]);
  pool.giveBack(target);
  return whole;
}
