/**
 * Progress of a pull on stderr. On a terminal: one line, rewritten at most every `ttyIntervalMs`,
 * with the files done, the bytes, the share and the current rate. Elsewhere (CI logs, files,
 * pipes): a line per file when it is complete and, during long downloads, one every
 * `plainIntervalMs`, so a log gets a few lines per file rather than one per chunk.
 */
import type { Clock } from '../core/clock.js';
import { RateWindow } from '../core/rate-window.js';

export interface TextSink {
  write(text: string): unknown;
}

export interface PullProgressOptions {
  isTTY: boolean;
  /** The terminal's width in characters, where known: the live line is kept narrower. */
  columns?: number | undefined;
  /** Files to download in this run (skipped ones excluded). */
  totalFiles: number;
  /** Bytes to download in this run, where every size is known. */
  totalBytes: number | undefined;
  /** @default 250 */
  ttyIntervalMs?: number;
  /** @default 30000 */
  plainIntervalMs?: number;
}

export interface FileFinished {
  path: string;
  /** Bytes received in this run (less than the size for a resumed file). */
  receivedBytes: number;
  sizeBytes: number;
  durationMs: number;
  /** How the content was checked: 'sha256', 'git blob id' or 'size'. */
  verifiedBy: string;
}

export interface PullProgress {
  /** Bytes of a file arrived (negative when a server ignored a Range and the file starts over). */
  bytesReceived(count: number): void;
  fileStarted(path: string): void;
  /** A file starts over from its first byte: `droppedBytes` already counted must come again. */
  fileRestarted(path: string, droppedBytes: number, reason: string): void;
  fileFinished(finished: FileFinished): void;
  /** A line of its own (a retry, a restart), without garbling the live line. */
  message(line: string): void;
  close(): void;
}

const UNITS = ['B', 'kB', 'MB', 'GB', 'TB'];

/** Bytes in decimal units with three significant digits: `812 kB`, `1.62 GB`. */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1000 && unit < UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toPrecision(3)} ${UNITS[unit]}`;
}

export function formatRate(bytesPerSecond: number | undefined): string {
  return bytesPerSecond === undefined || !Number.isFinite(bytesPerSecond) ? '-' : `${formatBytes(Math.round(bytesPerSecond))}/s`;
}

export function createPullProgress(options: PullProgressOptions, deps: { out: TextSink; clock: Clock }): PullProgress {
  const { out, clock } = deps;
  const ttyIntervalMs = options.ttyIntervalMs ?? 250;
  const plainIntervalMs = options.plainIntervalMs ?? 30_000;
  const startedMs = clock.nowMs();
  const rate = new RateWindow(2000);
  let receivedBytes = 0;
  let totalBytes = options.totalBytes;
  let finishedFiles = 0;
  let current: string | undefined;
  let lastLineMs: number | undefined;
  let hasLiveLine = false;

  const clearLine = (): void => {
    if (hasLiveLine) {
      out.write('\r\x1b[2K');
      hasLiveLine = false;
    }
  };

  const share = (): string =>
    totalBytes === undefined || totalBytes === 0
      ? formatBytes(receivedBytes)
      : `${formatBytes(receivedBytes)} of ${formatBytes(totalBytes)} (${Math.min(100, Math.floor((100 * receivedBytes) / totalBytes))} %)`;

  const render = (nowMs: number): void => {
    const perSecond = rate.add(nowMs, receivedBytes);
    if (options.isTTY) {
      const line = `${finishedFiles}/${options.totalFiles} files, ${share()}, ${formatRate(perSecond)}`;
      // A line as wide as the terminal wraps, and '\r' then rewrites only its last row: every
      // render would leave a row behind. The file name gives way first.
      const maxChars = options.columns === undefined || options.columns < 2 ? Infinity : options.columns - 1;
      const nameChars = Math.min(40, maxChars - line.length - 2);
      const name =
        current === undefined || nameChars < 8 ? '' : `, ${current.length > nameChars ? `...${current.slice(-(nameChars - 3))}` : current}`;
      out.write(`\r\x1b[2K${`${line}${name}`.slice(0, maxChars)}`);
      hasLiveLine = true;
    } else {
      const averagePerSecond = nowMs > startedMs ? (receivedBytes * 1000) / (nowMs - startedMs) : undefined;
      out.write(`${finishedFiles}/${options.totalFiles} files, ${share()}, ${formatRate(averagePerSecond)}\n`);
    }
    lastLineMs = nowMs;
  };

  return {
    bytesReceived(count) {
      receivedBytes += count;
      const nowMs = clock.nowMs();
      const intervalMs = options.isTTY ? ttyIntervalMs : plainIntervalMs;
      // The first plain line waits a whole interval: short downloads print only their result.
      if (lastLineMs === undefined && !options.isTTY) lastLineMs = startedMs;
      if (lastLineMs === undefined || nowMs - lastLineMs >= intervalMs) render(nowMs);
    },
    fileStarted(path) {
      current = path;
    },
    fileRestarted(path, droppedBytes, reason) {
      if (totalBytes !== undefined) totalBytes += droppedBytes;
      clearLine();
      out.write(`${path}: ${reason}: downloading it again from the start\n`);
    },
    fileFinished(finished) {
      finishedFiles++;
      if (current === finished.path) current = undefined;
      clearLine();
      const seconds = finished.durationMs / 1000;
      const resumed = finished.receivedBytes < finished.sizeBytes ? `, ${formatBytes(finished.receivedBytes)} of it in this run` : '';
      const perSecond = seconds > 0 ? formatRate(finished.receivedBytes / seconds) : formatRate(undefined);
      out.write(
        `downloaded ${finished.path}: ${formatBytes(finished.sizeBytes)}${resumed} in ${seconds.toFixed(1)} s (${perSecond}), ${finished.verifiedBy} verified\n`,
      );
    },
    message(line) {
      clearLine();
      out.write(`${line}\n`);
    },
    close() {
      clearLine();
    },
  };
}
