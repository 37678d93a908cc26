import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../test/support/fake-clock.js';
import { createPullProgress, formatBytes } from './pull-progress.js';

function record(isTTY: boolean) {
  const clock = new FakeClock();
  let text = '';
  const progress = createPullProgress(
    { isTTY, totalFiles: 1, totalBytes: 10_000_000 },
    { out: { write: (t: string) => (text += t) }, clock },
  );
  return { clock, progress, text: () => text };
}

describe('PullProgress', () => {
  it('on a terminal, rewrites one line at most every 250 ms and clears it for the result', () => {
    const { clock, progress, text } = record(true);
    progress.fileStarted('model.safetensors');
    for (let i = 0; i < 100; i++) {
      progress.bytesReceived(50_000);
      clock.advance(10);
    }
    const rewrites = text().split('\r\x1b[2K').length - 1;
    assert.ok(rewrites >= 4 && rewrites <= 5, `rewrites: ${rewrites}`);
    assert.match(text(), /0\/1 files, [\d.]+ MB of 10\.0 MB \(\d+ %\), [\d.]+ MB\/s, model\.safetensors/);
    progress.fileFinished({
      path: 'model.safetensors',
      receivedBytes: 10_000_000,
      sizeBytes: 10_000_000,
      durationMs: 2000,
      verifiedBy: 'sha256',
    });
    assert.ok(text().endsWith('\r\x1b[2Kdownloaded model.safetensors: 10.0 MB in 2.0 s (5.00 MB/s), sha256 verified\n'));
  });

  it('on a terminal, keeps the live line narrower than the terminal, so that rewriting it in place leaves no wrapped rows', () => {
    const clock = new FakeClock();
    let text = '';
    const progress = createPullProgress(
      { isTTY: true, columns: 60, totalFiles: 13, totalBytes: 3_450_000_000 },
      { out: { write: (t: string) => (text += t) }, clock },
    );
    progress.fileStarted('model-00001-of-00002.safetensors');
    progress.bytesReceived(1_230_000_000);
    const live = text.split('\r\x1b[2K').filter((line) => line !== '');
    assert.equal(live.length, 1);
    assert.ok(live[0]!.length < 60, live[0]);
    assert.match(live[0]!, /^0\/13 files, 1\.23 GB of 3\.45 GB \(35 %\), .*\.\.\.[\w-]*\.safetensors$/);
  });

  it('elsewhere, writes a line per file and one every 30 s, not one per chunk', () => {
    const { clock, progress, text } = record(false);
    progress.fileStarted('model.safetensors');
    for (let i = 0; i < 200; i++) {
      progress.bytesReceived(50_000);
      clock.advance(500);
    }
    progress.fileFinished({
      path: 'model.safetensors',
      receivedBytes: 10_000_000,
      sizeBytes: 10_000_000,
      durationMs: 100_000,
      verifiedBy: 'sha256',
    });
    const lines = text().trimEnd().split('\n');
    assert.equal(lines.length, 4);
    assert.match(lines[0]!, /^0\/1 files, 3\.05 MB of 10\.0 MB \(30 %\), 102 kB\/s$/);
    assert.doesNotMatch(text(), /\r/);
  });

  it('grows the total when a file starts over', () => {
    const { progress, text } = record(false);
    progress.fileRestarted('a.bin', 4_000_000, 'the server ignored the Range request');
    assert.equal(text(), 'a.bin: the server ignored the Range request: downloading it again from the start\n');
  });

  it('formats bytes in decimal units', () => {
    assert.deepEqual([0, 999, 1000, 1_620_000_000, 2_471_147_520].map(formatBytes), ['0 B', '999 B', '1.00 kB', '1.62 GB', '2.47 GB']);
  });
});
