/**
 * How fast the gateway can write a batch's audio into an instance's socket while its main thread
 * is busy. The supervisor writes each batch (46 MB for 32 x 45 s) into a socket pair (Node's
 * 'pipe' stdio) whose send buffer holds about 208 KiB. libuv refills that buffer once per turn of
 * the event loop, so the write's speed depends on how long the loop's other callbacks take.
 *
 * The reader is a Python process that reads the socket as the host does (recv_into with
 * MSG_WAITALL). The writer sends 46 MB frames one after another, first with an idle event loop,
 * then with the loop kept busy by callbacks of `--busy-ms` each (standing in for HTTP uploads
 * being parsed), and times each write until the kernel has taken its last byte.
 *
 * Usage: npx tsx bench/socket-write.ts [--frames 12] [--busy-ms 0.5,2] [--out bench/results]
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
    out: { type: 'string', default: 'bench/results' },
  },
});
const frames = Number(values.frames);
const busyLevels = values['busy-ms']!.split(',').map(Number);
const frameBytes = 32 * 45 * 16_000 * 2;
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
  writeMsP50: number;
  writeMsMax: number;
  megabytesPerSecond: number;
}

const rows: Row[] = [];
for (const busyMs of [0, ...busyLevels]) {
  const stop = keepBusy(busyMs);
  await writeOnce(); // the first write warms both sides
  const times: number[] = [];
  for (let i = 0; i < frames; i++) times.push(await writeOnce());
  stop();
  times.sort((a, b) => a - b);
  const p50 = times[Math.floor(times.length / 2)]!;
  rows.push({
    busyMs,
    writeMsP50: Math.round(p50 * 10) / 10,
    writeMsMax: Math.round(times.at(-1)! * 10) / 10,
    megabytesPerSecond: Math.round(frameBytes / 1e6 / (p50 / 1000)),
  });
}
socket.end();
await new Promise((r) => child.once('exit', r));

const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
const machine = `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
const command = `npx tsx bench/socket-write.ts --frames ${frames} --busy-ms ${values['busy-ms']}`;
const md = [
  `# Writing a 46 MB batch into an instance's socket, ${date}`,
  '',
  `- machine: ${machine}`,
  `- commit: ${commit}`,
  `- command: \`${command}\``,
  `- ${frames} frames of ${frameBytes} bytes (32 x 45 s of 16 kHz int16) per row, one after another; a Python reader`,
  '  drains the socket with recv_into(MSG_WAITALL). "busy ms": each callback the event loop runs between',
  '  socket refills takes this long (0: the loop is idle).',
  '',
  '| busy ms per callback | write ms, p50 | write ms, max | MB/s |',
  '| ---: | ---: | ---: | ---: |',
  ...rows.map((r) => `| ${r.busyMs} | ${r.writeMsP50} | ${r.writeMsMax} | ${r.megabytesPerSecond} |`),
  '',
];
const outDir = resolve(values.out!);
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, `socket-write-${date}.md`), md.join('\n'));
writeFileSync(join(outDir, `socket-write-${date}.json`), JSON.stringify({ date, machine, commit, command, frameBytes, rows }, null, 2));
process.stdout.write(md.join('\n'));
