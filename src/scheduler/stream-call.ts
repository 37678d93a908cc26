/**
 * The caller's side of one stream: an async iterable of its chunks, in order, with `done` and
 * `cancel()`. Chunks the instance sent wait here until the caller takes them; each one taken is
 * reported through `onTake`, which the dispatcher turns into one chunk of credit, so a slow
 * reader holds at most the stream's credit in memory.
 *
 * States: open → ended (ok or failed). Once ended, chunks already buffered are still delivered,
 * then the iterator finishes (ok) or throws the error (failed).
 */
import type { ServiceError } from '../core/errors.js';
import type { StreamChunk } from '../protocol/work.js';

export interface StreamSummary {
  chunks: number;
  usage: Readonly<Record<string, unknown>>;
}

export interface StreamCall extends AsyncIterable<StreamChunk> {
  /** Resolves when the stream ends well; rejects with its ServiceError otherwise. */
  readonly done: Promise<StreamSummary>;
  /** Stops the stream (the instance frees it); `done` rejects with stream_cancelled. */
  cancel(): void;
}

type Ending = { ok: true; summary: StreamSummary } | { ok: false; error: ServiceError };

interface Waiter {
  resolve: (result: IteratorResult<StreamChunk>) => void;
  reject: (error: ServiceError) => void;
}

export interface StreamCallHooks {
  /** The caller took one chunk from the iterator. */
  onTake: () => void;
  /** The caller cancelled, or left a for-await loop early. */
  onCancel: () => void;
}

export class StreamCallImpl implements StreamCall {
  readonly done: Promise<StreamSummary>;
  #buffer: StreamChunk[] = [];
  #waiters: Waiter[] = [];
  #ending: Ending | undefined;
  #hooks: StreamCallHooks;
  #resolveDone!: (summary: StreamSummary) => void;
  #rejectDone!: (error: ServiceError) => void;

  constructor(hooks: StreamCallHooks) {
    this.#hooks = hooks;
    this.done = new Promise<StreamSummary>((resolve, reject) => {
      this.#resolveDone = resolve;
      this.#rejectDone = reject;
    });
    // NOTE: a caller that reads only the iterator sees the error there; `done` must not then
    // surface as an unhandled rejection.
    this.done.catch(() => undefined);
  }

  /** Chunks sent by the instance and not yet taken by the caller. */
  get bufferedChunks(): number {
    return this.#buffer.length;
  }

  get isEnded(): boolean {
    return this.#ending !== undefined;
  }

  push(chunk: StreamChunk): void {
    if (this.#ending !== undefined) return;
    const waiter = this.#waiters.shift();
    if (waiter === undefined) {
      this.#buffer.push(chunk);
      return;
    }
    waiter.resolve({ done: false, value: chunk });
    this.#hooks.onTake();
  }

  end(ending: Ending): void {
    if (this.#ending !== undefined) return;
    this.#ending = ending;
    if (ending.ok) this.#resolveDone(ending.summary);
    else this.#rejectDone(ending.error);
    for (const waiter of this.#waiters.splice(0)) this.#settleEnded(waiter);
  }

  cancel(): void {
    if (this.#ending === undefined) this.#hooks.onCancel();
  }

  [Symbol.asyncIterator](): AsyncIterator<StreamChunk> {
    return {
      next: () =>
        new Promise<IteratorResult<StreamChunk>>((resolve, reject) => {
          const chunk = this.#buffer.shift();
          if (chunk !== undefined) {
            resolve({ done: false, value: chunk });
            this.#hooks.onTake();
            return;
          }
          if (this.#ending !== undefined) this.#settleEnded({ resolve, reject });
          else this.#waiters.push({ resolve, reject });
        }),
      return: () => {
        this.cancel();
        return Promise.resolve({ done: true, value: undefined });
      },
    };
  }

  #settleEnded(waiter: Waiter): void {
    const ending = this.#ending!;
    if (ending.ok) waiter.resolve({ done: true, value: undefined });
    else waiter.reject(ending.error);
  }
}
