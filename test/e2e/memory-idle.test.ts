/**
 * Memory back to idle (#16): after the whole fuzz corpus (every API-level case, every HTTP-level
 * class, then a seeded run of random bytes, random uploads and valid uploads) and an overload
 * burst, the gateway's resident memory returns to within 20 % of its idle level.
 *
 * What is measured: VmRSS of the gateway process itself (the launcher's child, see
 * bin/voxmux.mjs; not the launcher, not the model instances). What idle is: the figure read once
 * a warm-up has run every path once (each corpus case and class, valid uploads, a short burst of
 * refusals), no call is pending, and the upload pool has let go of its memory
 * (`gateway.uploadPoolIdleMs`, 300 ms here), read after a further second. Compiled code and the
 * caches every path fills once count as idle; what a burst's volume leaves behind does not.
 *
 * Where the memory went before (issue 16): freed upload-sized blocks stayed in glibc's main heap
 * (18 to 25 MiB after 900 calls) because glibc raises its mmap threshold to the largest block
 * freed; the launcher fixes that threshold for the gateway. V8's young generation also grows from
 * 16 to 32 MiB under the burst's allocation rate and keeps its pages committed until it shrinks;
 * that is within the margin. The pool's own memory goes at its idle timer.
 *
 * Deterministic: the random calls come from a fixed seed; the overload's refusals are by
 * admission, whose figures do not depend on how fast this machine is. It runs in about 30 s on
 * 2 cores.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { floatWav, noise } from '../support/audio.js';
import { CASES, CLASSES, CORPUS_CONFIG, good, rawCall, sendCase } from '../support/fuzz-corpus.js';
import { startServer, type RunningServer } from '../support/server-process.js';

const POOL_IDLE_MS = 300;
/**
 * Random calls after the corpus. With the launcher's malloc setting the gateway ended 7 to 12 %
 * above idle in trial runs; without it, 15 to 27 %, its glibc main heap 18 to 25 MiB larger.
 */
const FUZZ_CALLS = 900;

/** Resident memory of a process, in bytes (Linux). */
function rssBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? NaN) * 1024;
}

/** Resident bytes of glibc's main heap (the [heap] mapping) of a process (Linux). */
function mainHeapBytes(pid: number): number {
  const smaps = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  const at = smaps.search(/^\S+ \S+ \S+ \S+ \S+\s+\[heap\]$/m);
  if (at === -1) return 0;
  return Number(/^Rss:\s+(\d+) kB/m.exec(smaps.slice(at))?.[1] ?? NaN) * 1024;
}

const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('gateway memory after the fuzz corpus and overload (#16)', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({
      config: {
        ...CORPUS_CONFIG,
        models: {
          // One instance taking 150 ms per batch of at most 2: a 100-call burst with a 1 s
          // deadline is mostly refused by admission, the rest served in time.
          echo: { adapter: 'test', instances: 1, maxBatchSize: 2, maxQueueDelayMs: 10, options: { batchDelayMs: 100, itemDelayMs: 25 } },
        },
        gateway: { ...CORPUS_CONFIG.gateway, uploadPoolIdleMs: POOL_IDLE_MS },
      },
    });
  });
  after(async () => {
    await server.stop();
  });

  const upload = (file: Buffer, headers: Record<string, string> = {}): Promise<number> => {
    const body = new FormData();
    body.append('model', 'echo');
    body.append('file', new Blob([file]), 'a.wav');
    return fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', body, headers }).then(
      async (res) => {
        await res.arrayBuffer();
        return res.status;
      },
      () => 0,
    );
  };

  /** `count` calls started 10 ms apart, each with a 1 s deadline; resolves with their statuses. */
  const burst = async (count: number): Promise<number[]> => {
    const calls: Array<Promise<number>> = [];
    for (let i = 0; i < count; i += 1) {
      calls.push(upload(good, { 'voxmux-deadline-ms': '1000' }));
      await pause(10);
    }
    return Promise.all(calls);
  };

  /** Every API-level case and every HTTP-level class once, the slow (stalled) classes at once. */
  const corpus = async (): Promise<void> => {
    for (const c of CASES) await (await sendCase(server.url, c)).arrayBuffer();
    await Promise.all(CLASSES.map((c) => rawCall(server.url, c.pieces).catch(() => undefined)));
  };

  it('returns to within 20 % of its idle memory', { timeout: 90_000 }, async (t) => {
    const pid = server.gatewayPid();
    assert.notEqual(pid, server.process.pid, 'the gateway runs in the launcher’s child');

    await corpus();
    for (let i = 0; i < 5; i += 1) assert.equal(await upload(good), 200);
    const warmBurst = await burst(30);
    assert.ok(warmBurst.includes(429) && warmBurst.includes(200), `warm-up burst: ${warmBurst.join(',')}`);
    await pause(POOL_IDLE_MS + 1000);
    const idle = rssBytes(pid);
    const idleHeap = mainHeapBytes(pid);

    await corpus();
    let seed = 7;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const randomBytes = (length: number): Buffer => {
      const bytes = Buffer.allocUnsafe(length);
      for (let j = 0; j < length; j += 1) bytes[j] = random(256);
      return bytes;
    };
    const calls: Array<Promise<unknown>> = [];
    for (let i = 0; i < FUZZ_CALLS; i += 1) {
      const pick = random(3);
      if (pick === 0) {
        calls.push(rawCall(server.url, [randomBytes(1 + random(4096))], 3000).catch(() => undefined));
      } else if (pick === 1) {
        calls.push(upload(randomBytes(1 + random(400_000))));
      } else {
        calls.push(upload(floatWav(noise(1600 + random(30_000), i))));
      }
      if (calls.length >= 8) await Promise.all(calls.splice(0));
    }
    await Promise.all(calls);
    const afterFuzz = rssBytes(pid);
    const statuses = await burst(200);
    const refused = statuses.filter((s) => s === 429).length;
    assert.ok(refused > 100, `overload burst: ${refused} of 200 refused`);
    const afterOverload = rssBytes(pid);

    // Back to idle: no call pending, the pool's idle time passed and a second more (as for the idle
    // figure: the gateway's collection waits for its last calls to be answered); poll for at most 10 s.
    await pause(POOL_IDLE_MS + 1000);
    let settled = rssBytes(pid);
    for (let i = 0; i < 40 && settled > idle * 1.2; i += 1) {
      await pause(250);
      await fetch(`${server.url}/health/live`);
      settled = rssBytes(pid);
    }
    const heapGrowth = mainHeapBytes(pid) - idleHeap;
    const facts = `idle ${mib(idle)} MiB, after the fuzz run ${mib(afterFuzz)} MiB, after the overload ${mib(afterOverload)} MiB, then ${mib(settled)} MiB; glibc main heap ${mib(heapGrowth)} MiB above idle`;
    t.diagnostic(facts);
    assert.ok(settled <= idle * 1.2, facts);
    // The cause pinned: without the launcher's malloc setting the main heap kept 18 to 25 MiB
    // after such a run (the whole RSS then ends 15 to 27 % above idle, either side of the bound);
    // with it, 4.5 to 12.7 MiB over runs on a 2-core machine (the fuzz calls' overlap varies).
    assert.ok(heapGrowth <= idle * 0.14, facts);
    assert.equal(await upload(good), 200);
  });
});
