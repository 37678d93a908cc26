/**
 * A gateway thread that ends while the main thread holds one of its calls (owner.ts): the call is
 * cancelled in the main thread (no one is left to answer it), the end is logged, and after the
 * restart delay another thread listens on the same port and answers at once, readiness included
 * (it starts with the main thread's state). Real worker threads running the real gateway thread,
 * on a real loopback socket; the main thread's gateway functions are a test double, and the
 * thread's entry point (test/support/ending-gateway-thread-main.ts) ends the thread on its first
 * dispatch, and fails one start when asked. A replacement that fails to start is tried again, and
 * the socket's duplicate it never took is closed.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { systemClock } from '../../src/core/clock.js';
import { loadConfig } from '../../src/config/load.js';
import { openListenSocket } from '../../src/app/gateway-threads/listen-socket.js';
import { startGatewayThreads, type GatewayThreads } from '../../src/app/gateway-threads/owner.js';
import type { GatewayDeps } from '../../src/gateway/index.js';
import { floatWav, noise } from '../support/audio.js';
import { captureLogger } from '../support/test-logger.js';
import { waitFor } from '../support/wait-for.js';

let threads: GatewayThreads | undefined;

/** This process's descriptors open on the same file or socket as `fd` (Linux's /proc). */
function descriptorsOf(fd: number): string[] {
  const target = readlinkSync(`/proc/self/fd/${fd}`);
  return readdirSync('/proc/self/fd').filter((other) => {
    try {
      return readlinkSync(`/proc/self/fd/${other}`) === target;
    } catch {
      return false; // closed since the listing (readdir's own descriptor, say)
    }
  });
}

after(async () => {
  await threads?.destroy();
});

describe('a gateway thread that ends', () => {
  it('has its handed-over call cancelled and is replaced, after a failed start, by a thread that answers on the same port', async () => {
    // The test entry reads gateway.tmpDir: a `fail-start` file there makes the next start fail once.
    const tmpDir = mkdtempSync(join(tmpdir(), 'voxmux-thread-replacement-'));
    const config = loadConfig({
      file: { gateway: { threads: 1, voiceActivity: 'energy', tmpDir }, models: { echo: { adapter: 'test', instances: 1 } } },
    });
    const cancelled: string[] = [];
    const gateway = {
      models: {
        list: () => [{ id: 'echo', created: 1, ownedBy: 'voxmux' }],
        resolve: (name: string) => (name === 'echo' ? 'echo' : undefined),
      },
      voices: { models: () => [], catalog: () => [], residency: () => [] },
      readiness: () => ({ isReady: true, body: { models: { echo: { isReady: true } } } }),
      isDraining: () => false,
      // Held until cancelled: the thread ends on the dispatch, with the call in the main thread's hands.
      transcribe: (_model, _request, options) =>
        new Promise((_resolve, reject) => {
          options.signal?.addEventListener('abort', () => {
            cancelled.push(options.requestId ?? '?');
            reject(new Error('cancelled'));
          });
          options.onDispatched?.({ instanceId: 'echo-0', queuedMs: 0 });
        }),
    } as Partial<GatewayDeps> as GatewayDeps;
    const socket = await openListenSocket('127.0.0.1', 0);
    const { log, lines } = captureLogger();
    threads = startGatewayThreads(
      {
        count: 1,
        entry: new URL('../support/ending-gateway-thread.mjs', import.meta.url),
        config,
        modelsCreatedS: 1,
        listenFd: socket.fd,
        ownerUrl: 'http://127.0.0.1:9',
        restartDelayMs: 300,
      },
      { gateway, metricsText: async () => '', instanceGpus: () => ({}), clock: systemClock, log },
    );
    await threads.started;
    assert.equal((await fetch(`${socket.url}/health/ready`)).status, 200);

    writeFileSync(join(tmpDir, 'fail-start'), '');
    const body = new FormData();
    body.append('model', 'echo');
    body.append('file', new Blob([floatWav(noise(8000, 1))]), 'a.wav');
    // The thread ends with the call unanswered: the client sees its connection end.
    await assert.rejects(fetch(`${socket.url}/v1/audio/transcriptions`, { method: 'POST', body, headers: { 'x-request-id': 'call-1' } }));
    await waitFor(() => cancelled.length === 1, 'the handed-over call cancelled', 5000);
    assert.deepEqual(cancelled, ['call-1']);
    const ended = lines().find((l) => l.msg === 'gateway thread ended: starting another');
    assert.equal(ended?.exitCode, 7);

    // The first replacement fails to start and is tried again; the second listens on a fresh
    // duplicate of the socket and is ready with its first answer.
    await waitFor(() => lines().some((l) => l.msg === 'gateway thread replaced'), 'the thread replaced', 15_000);
    const failed = lines().find((l) => l.msg === 'gateway thread failed to start: trying again');
    assert.equal(failed?.attempt, 1);
    assert.match(String((failed?.err as { message?: string } | undefined)?.message), /exited with code 9 while starting/);
    const ready = await fetch(`${socket.url}/health/ready`);
    assert.equal(ready.status, 200, await ready.text());
    const models = (await (await fetch(`${socket.url}/v1/models`)).json()) as { data: { id: string }[] };
    assert.deepEqual(
      models.data.map((m) => m.id),
      ['echo'],
    );
    assert.equal((await threads.metricsJson()).length, 1);
    // The socket is held by the main thread's descriptor and the live thread's duplicate alone: the
    // ended thread's server closed its own, and the failed start's (never taken) was closed for it.
    assert.equal(descriptorsOf(socket.fd).length, 2, `descriptors of the listening socket: ${descriptorsOf(socket.fd).join(', ')}`);
  });
});
