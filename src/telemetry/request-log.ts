/**
 * The request log's writer: JSON lines appended to a file, off the event loop's critical path.
 * `write` only queues the line; one drain at a time appends every queued line with a single
 * write, rotating first when the file would exceed maxBytes (`<path>` → `<path>.1`, each older
 * file shifted up, the oldest past keepFiles dropped).
 *
 * NOTE: a small writer of its own rather than a rotating-file library: the log needs size
 * rotation only, and the writer is about a hundred lines with no dependency to keep pinned.
 */
import { open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import type { Logger } from './logger.js';

export interface RequestLogOptions {
  /** The log file; its folder must exist. */
  path: string;
  /** Largest size a file may reach, in bytes: the line that would pass it goes to a fresh file. */
  maxBytes: number;
  /** Rotated files kept beside the live one (`<path>.1` is the newest). */
  keepFiles: number;
  /** Lines queued while a write is slow; further lines are dropped and counted. @default 10000 */
  maxQueuedLines?: number;
}

export interface RequestLogDeps {
  log: Logger;
  /** Counts lines written and dropped (voxmux_request_log_lines_total). */
  onLines?: (outcome: 'written' | 'dropped', count: number) => void;
}

export interface RequestLogWriter {
  /** Queues one entry; returns at once. */
  write(entry: object): void;
  /** Resolves once every entry queued so far is in the file. */
  flush(): Promise<void>;
  /** Flushes, then closes the file; later writes are dropped. */
  close(): Promise<void>;
  /** Lines dropped because the queue was full or a write failed. */
  droppedLines(): number;
}

const DEFAULT_MAX_QUEUED_LINES = 10_000;

/** The rotated file names, newest first: `<path>.1` … `<path>.<keepFiles>`. */
export function rotatedPaths(path: string, keepFiles: number): string[] {
  return Array.from({ length: keepFiles }, (_, i) => `${path}.${i + 1}`);
}

export function createRequestLog(options: RequestLogOptions, deps: RequestLogDeps): RequestLogWriter {
  const maxQueued = options.maxQueuedLines ?? DEFAULT_MAX_QUEUED_LINES;
  let queued: string[] = [];
  let handle: FileHandle | undefined;
  let sizeBytes = 0;
  let draining: Promise<void> | undefined;
  let dropped = 0;
  let isClosed = false;
  let hasWarned = false;

  async function openFile(): Promise<FileHandle> {
    if (handle !== undefined) return handle;
    handle = await open(options.path, 'a');
    sizeBytes = (await stat(options.path)).size;
    return handle;
  }

  async function rotate(): Promise<void> {
    await handle?.close();
    handle = undefined;
    const older = rotatedPaths(options.path, options.keepFiles);
    if (older.length === 0) {
      await rm(options.path, { force: true });
    } else {
      for (let i = older.length - 1; i > 0; i -= 1) await rename(older[i - 1]!, older[i]!).catch(ignoreMissing);
      await rename(options.path, older[0]!).catch(ignoreMissing);
    }
    sizeBytes = 0;
  }

  async function append(lines: readonly string[]): Promise<void> {
    let batch = '';
    let batchBytes = 0;
    for (const line of lines) {
      const bytes = Buffer.byteLength(line);
      await openFile();
      if (sizeBytes + batchBytes > 0 && sizeBytes + batchBytes + bytes > options.maxBytes) {
        if (batch !== '') await handle!.appendFile(batch);
        sizeBytes += batchBytes;
        batch = '';
        batchBytes = 0;
        await rotate();
        await openFile();
      }
      batch += line;
      batchBytes += bytes;
    }
    if (batch !== '') {
      await (await openFile()).appendFile(batch);
      sizeBytes += batchBytes;
    }
  }

  async function drain(): Promise<void> {
    while (queued.length > 0) {
      const lines = queued;
      queued = [];
      try {
        await append(lines);
        deps.onLines?.('written', lines.length);
      } catch (err) {
        dropped += lines.length;
        deps.onLines?.('dropped', lines.length);
        await handle?.close().catch(() => undefined);
        handle = undefined;
        // Degrade politely: calls are answered whatever the log's disk does; one warning per failure streak.
        if (!hasWarned) deps.log.warn({ err, path: options.path }, 'request log write failed');
        hasWarned = true;
        continue;
      }
      hasWarned = false;
    }
  }

  function schedule(): void {
    if (draining !== undefined) return;
    draining = drain().finally(() => {
      draining = undefined;
      if (queued.length > 0) schedule();
    });
  }

  return {
    write(entry) {
      if (isClosed || queued.length >= maxQueued) {
        dropped += 1;
        deps.onLines?.('dropped', 1);
        return;
      }
      queued.push(`${JSON.stringify(entry)}\n`);
      schedule();
    },
    async flush() {
      while (draining !== undefined || queued.length > 0) {
        if (draining === undefined) schedule();
        await draining;
      }
    },
    async close() {
      isClosed = true;
      await this.flush();
      await handle?.close();
      handle = undefined;
    },
    droppedLines: () => dropped,
  };
}

function ignoreMissing(err: unknown): void {
  if ((err as { code?: unknown }).code !== 'ENOENT') throw err;
}
