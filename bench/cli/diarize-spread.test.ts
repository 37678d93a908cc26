import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { systemClock } from '../../src/core/clock.js';
import { parseShare, runSpreadDiarizeLoad } from './diarize-spread.js';

/**
 * Stand-ins for the bench's own processes: real Node processes that read the arguments a part is
 * given and write the results file a load run writes (two samples per session of their share), or
 * fail as a part that cannot reach its server does.
 */
const PART = `
const fs = require('node:fs');
const args = process.argv.slice(1);
const flag = (name) => args[args.indexOf(name) + 1];
const [k, n] = flag('--share').split('/').map(Number);
const sessions = Number(flag('--sessions'));
const chunks = [];
for (let s = k; s < sessions; s += n) for (const seq of [0, 1]) chunks.push({ session: s, seq, latencyMs: 10 + s, audioS: 15 });
fs.mkdirSync(flag('--out'), { recursive: true });
fs.writeFileSync(flag('--out') + '/results.json', JSON.stringify({
  chunks, createErrors: k === 0 ? { queue_full: 1 } : {}, totals: { wallS: 30 + k }, isInterrupted: false,
  startAt: Number(flag('--start-at-ms')),
}));
`;
const UNREACHABLE = `process.stderr.write('Cannot reach http://127.0.0.1:9\\n'); process.exit(2);`;

function run(script: string, processes: number) {
  const outDir = mkdtempSync(join(tmpdir(), 'voxmux-spread-'));
  const spawned: string[][] = [];
  return {
    outDir,
    spawned,
    done: runSpreadDiarizeLoad(
      { processes, loadArgs: ['--mode', 'load', '--sessions', '5'], label: 'spread', outDir },
      {
        spawn: (args) => {
          spawned.push([...args]);
          return spawn(process.execPath, ['-e', script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
        },
        clock: systemClock,
        signal: new AbortController().signal,
        isSigint: () => false,
      },
    ),
  };
}

describe('runSpreadDiarizeLoad (#17)', () => {
  it('gives each process its share, one start for all and its own output folder, and merges their parts', async () => {
    const { outDir, spawned, done } = run(PART, 2);
    const merged = await done;
    assert.deepEqual(
      spawned.map((args) => [args[args.indexOf('--share') + 1], args[args.indexOf('--out') + 1]]),
      [
        ['0/2', join(outDir, 'process-1')],
        ['1/2', join(outDir, 'process-2')],
      ],
    );
    const starts = new Set(spawned.map((args) => args[args.indexOf('--start-at-ms') + 1]));
    assert.equal(starts.size, 1);
    assert.deepEqual(
      merged.chunks.map((c) => `${c.session}.${c.seq}`),
      ['0.0', '0.1', '1.0', '1.1', '2.0', '2.1', '3.0', '3.1', '4.0', '4.1'],
    );
    assert.deepEqual(merged.createErrors, { queue_full: 1 });
    assert.equal(merged.wallS, 31);
  });

  it("fails with the part's own words when a part writes no results", async () => {
    await assert.rejects(run(UNREACHABLE, 2).done, (err: Error & { code?: string }) => {
      assert.equal(err.code, 'usage');
      assert.match(err.message, /Bench process 1\/2 wrote no results \(exit code 2\): Cannot reach http:\/\/127\.0\.0\.1:9/);
      return true;
    });
  });

  it('reads --share K/N and refuses a share outside its run', () => {
    assert.deepEqual(parseShare('2/4'), { index: 2, of: 4 });
    assert.equal(parseShare(undefined), undefined);
    for (const bad of ['4/4', '1/0', 'a/b', '1']) assert.throws(() => parseShare(bad), /Expected --share K\/N/);
  });
});
