import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { captureLogger, silentLogger } from '../../test/support/test-logger.js';
import { createRequestLog, rotatedPaths } from './request-log.js';

function tempPath(): string {
  return join(mkdtempSync(join(tmpdir(), 'voxmux-request-log-')), 'requests.jsonl');
}

const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { n: number });

/** A line of JSON that serializes to exactly `bytes` bytes with its newline. */
function entryOf(n: number, bytes: number): { n: number; pad: string } {
  const base = JSON.stringify({ n, pad: '' }).length + 1;
  return { n, pad: 'x'.repeat(bytes - base) };
}

describe('createRequestLog', () => {
  it('appends one JSON line per entry, in order, to an existing file without truncating it', async () => {
    const path = tempPath();
    writeFileSync(path, '{"n":0}\n');
    const writer = createRequestLog({ path, maxBytes: 1024 * 1024, keepFiles: 5 }, { log: silentLogger() });
    for (let n = 1; n <= 50; n += 1) writer.write({ n });
    await writer.close();
    assert.deepEqual(
      lines(path).map((l) => l.n),
      Array.from({ length: 51 }, (_, i) => i),
    );
    assert.equal(writer.droppedLines(), 0);
  });

  it('write returns before anything is on disk: the line lands with flush', async () => {
    const path = tempPath();
    const writer = createRequestLog({ path, maxBytes: 4096, keepFiles: 1 }, { log: silentLogger() });
    writer.write({ n: 1 });
    assert.equal(existsSync(path) ? readFileSync(path, 'utf8') : '', '');
    await writer.flush();
    assert.deepEqual(lines(path), [{ n: 1 }]);
    await writer.close();
  });

  it('rotates when the next line would pass maxBytes, shifting older files up to keepFiles and dropping the oldest', async () => {
    const path = tempPath();
    // 100-byte lines, 250-byte files: two lines a file.
    const writer = createRequestLog({ path, maxBytes: 250, keepFiles: 2 }, { log: silentLogger() });
    for (let n = 1; n <= 7; n += 1) {
      writer.write(entryOf(n, 100));
      // Flushing one line at a time and all at once must rotate the same way.
      if (n <= 3) await writer.flush();
    }
    await writer.close();
    const [one, two] = rotatedPaths(path, 2);
    assert.deepEqual(
      lines(path).map((l) => l.n),
      [7],
    );
    assert.deepEqual(
      lines(one!).map((l) => l.n),
      [5, 6],
    );
    assert.deepEqual(
      lines(two!).map((l) => l.n),
      [3, 4],
    );
    assert.equal(existsSync(`${path}.3`), false);
    for (const file of [path, one!, two!]) assert.ok(readFileSync(file).length <= 250);
  });

  it('keepFiles 0 starts the file afresh and keeps no rotated copy', async () => {
    const path = tempPath();
    const writer = createRequestLog({ path, maxBytes: 150, keepFiles: 0 }, { log: silentLogger() });
    for (let n = 1; n <= 3; n += 1) writer.write(entryOf(n, 100));
    await writer.close();
    assert.deepEqual(
      lines(path).map((l) => l.n),
      [3],
    );
    assert.equal(existsSync(`${path}.1`), false);
  });

  it('a write that fails is logged once as a warning and its lines counted as dropped, without throwing', async () => {
    const path = join(tempPath(), 'missing-folder', 'requests.jsonl');
    const { log, lines: logged } = captureLogger();
    const counted = { written: 0, dropped: 0 };
    const writer = createRequestLog({ path, maxBytes: 4096, keepFiles: 1 }, { log, onLines: (outcome, n) => (counted[outcome] += n) });
    writer.write({ n: 1 });
    await writer.flush();
    writer.write({ n: 2 });
    await writer.close();
    assert.equal(writer.droppedLines(), 2);
    assert.deepEqual(counted, { written: 0, dropped: 2 });
    assert.equal(logged().filter((l) => l.msg === 'request log write failed').length, 1);
  });

  it('drops lines past maxQueuedLines and after close', async () => {
    const path = tempPath();
    const counted = { written: 0, dropped: 0 };
    const writer = createRequestLog(
      { path, maxBytes: 1024 * 1024, keepFiles: 1, maxQueuedLines: 3 },
      { log: silentLogger(), onLines: (outcome, n) => (counted[outcome] += n) },
    );
    for (let n = 1; n <= 5; n += 1) writer.write({ n });
    await writer.close();
    writer.write({ n: 6 });
    // The first line starts a drain at once, so the queue holds lines 2 to 4 and line 5 is dropped.
    assert.deepEqual(
      lines(path).map((l) => l.n),
      [1, 2, 3, 4],
    );
    assert.equal(writer.droppedLines(), 2);
    assert.deepEqual(counted, { written: 4, dropped: 2 });
  });
});
