/**
 * How fast the gateway can write a batch's audio into an instance's socket while its main thread
 * is busy. The supervisor writes each batch (46 MB for 32 x 45 s) into a socket pair (Node's
 * 'pipe' stdio) whose send buffer holds about 208 KiB. libuv refills that buffer once per turn of
 * the event loop, so the write's speed depends on how long the loop's other callbacks take.
 *
 * The reader is a Python process that reads the socket as the host does (recv_into with
 * MSG_WAITALL). The writer sends frames of `--clips` 45 s clips (32: 46 MB), first with an idle
 * event loop, then with the loop kept busy by callbacks of `--busy-ms` each (standing in for HTTP
 * uploads being parsed), and times each write as the supervisor does: from the frame handed to the
 * socket until the kernel has taken its last byte. With `--in-flight N`, N frames are handed to the
 * socket at once (as with N batches in flight on one instance), so the later ones wait behind the
 * earlier ones; 1: one after another.
 *
 * Usage: npx tsx bench/socket-write.ts [--frames 12] [--busy-ms 0.5,2] [--clips 32] [--in-flight 1]
 *   [--out bench/results]
 * Writes socket-write-<date>.json and .md under --out.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    frames: { type: 'string', default: '12' },
    'busy-ms': { type: 'string', default: '0.5,2' },
    clips: { type: 'string', default: '32' },
    'in-flight': { type: 'string', default: '1' },
    out: { type: 'string', default: 'bench/results' },
  },
});
const frames = Number(values.frames);
const busyLevels = values['busy-ms']!.split(',').map(Number);
const clips = Number(values.clips);
const inFlightLevels = values['in-flight']!.split(',').map(Number);
if (![frames, clips, ...inFlightLevels].every((n) => Number.isInteger(n) && n >= 1) || busyLevels.some((n) => !(n >= 0)))
  throw new Error('--frames, --clips and --in-flight take whole numbers >= 1, --busy-ms numbers >= 0');
const frameBytes = clips * 45 * 16_000 * 2;
const date = new Date().toISOString().slice(0, 10);

const READER = `
import socket, sys
sock = socket.socket(fileno=3)
size = int(sys.argv[1])
buffer = bytearray(size)
view = memoryview(buffer)
while True:
    got = sock.recv_into(view, size, socket.MSG_WAITALL)
    if got < size:
        break
`;

const child = spawn('/usr/bin/python3', ['-c', READER, String(frameBytes)], { stdio: ['ignore', 'inherit', 'inherit', 'pipe'] });
const socket = child.stdio[3] as Writable;
const payload = Buffer.alloc(frameBytes, 7);

function writeOnce(): Promise<number> {
  const started = performance.now();
  return new Promise((resolvePromise, reject) => {
    socket.write(payload, (error) => (error ? reject(error) : resolvePromise(performance.now() - started)));
  });
}

/** Keeps the event loop busy: one callback of `ms` after another, until stopped. */
function keepBusy(ms: number): () => void {
  let isRunning = true;
  const tick = (): void => {
    if (!isRunning) return;
    const until = performance.now() + ms;
    while (performance.now() < until) {
      // busy
    }
    setImmediate(tick);
  };
  if (ms > 0) setImmediate(tick);
  return () => {
    isRunning = false;
  };
}

interface Row {
  busyMs: number;
  inFlight: number;
  writeMsP50: number;
  writeMsMean: number;
  writeMsMax: number;
  /** p50 of the first frame of each group handed over at once, and of the last. */
  firstMsP50: number;
  lastMsP50: number;
  megabytesPerSecond: number;
}

const round1 = (ms: number): number => Math.round(ms * 10) / 10;
const p50 = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const rows: Row[] = [];
for (const busyMs of [0, ...busyLevels]) {
  for (const inFlight of inFlightLevels) {
    const stop = keepBusy(busyMs);
    await writeOnce(); // the first write warms both sides
    const times: number[] = [];
    const first: number[] = [];
    const last: number[] = [];
    const started = performance.now();
    for (let i = 0; i < frames; i++) {
      const group = await Promise.all(Array.from({ length: inFlight }, () => writeOnce()));
      times.push(...group);
      first.push(group[0]!);
      last.push(group.at(-1)!);
    }
    const elapsedS = (performance.now() - started) / 1000;
    stop();
    rows.push({
      busyMs,
      inFlight,
      writeMsP50: round1(p50(times)),
      writeMsMean: round1(times.reduce((a, b) => a + b, 0) / times.length),
      writeMsMax: round1(Math.max(...times)),
      firstMsP50: round1(p50(first)),
      lastMsP50: round1(p50(last)),
      megabytesPerSecond: Math.round((frameBytes * times.length) / 1e6 / elapsedS),
    });
  }
}
socket.end();
await new Promise((r) => child.once('exit', r));

const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
const machine = `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
const command = `npx tsx bench/socket-write.ts --frames ${frames} --busy-ms ${values['busy-ms']} --clips ${clips} --in-flight ${values['in-flight']}`;
const md = [
  `# Writing batches into an instance's socket, ${date}`,
  '',
  `- machine: ${machine}`,
  `- commit: ${commit}`,
  `- command: \`${command}\``,
  `- frames of ${frameBytes} bytes (${clips} x 45 s of 16 kHz int16); per row ${frames} groups of "in flight" frames`,
  '  handed to the socket at once, each timed from its handover until the kernel took its last byte; a',
  '  Python reader drains the socket with recv_into(MSG_WAITALL). "busy ms": each callback the event',
  '  loop runs between socket refills takes this long (0: the loop is idle).',
  '',
  '| busy ms per callback | in flight | write ms, p50 | mean | max | first of a group, p50 | last of a group, p50 | MB/s |',
  '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ...rows.map(
    (r) =>
      `| ${r.busyMs} | ${r.inFlight} | ${r.writeMsP50} | ${r.writeMsMean} | ${r.writeMsMax} | ${r.firstMsP50} | ${r.lastMsP50} | ${r.megabytesPerSecond} |`,
  ),
  '',
];
const outDir = resolve(values.out!);
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, `socket-write-${date}.md`), md.join('\n'));
writeFileSync(join(outDir, `socket-write-${date}.json`), JSON.stringify({ date, machine, commit, command, frameBytes, rows }, null, 2));
process.stdout.write(md.join('\n'));
