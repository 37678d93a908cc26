/**
 * A gateway thread's GatewayDeps (remote-deps.ts) against the main thread's side (serve-thread.ts)
 * over a real MessageChannel, with a fake of the main thread's gateway functions: what crosses,
 * what comes back, errors, cancellation and a stream's flow control.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { MessageChannel } from 'node:worker_threads';
import { errors } from '../../core/error-catalog.js';
import { ServiceError } from '../../core/errors.js';
import type { GatewayDeps } from '../../gateway/index.js';
import { UploadPool } from '../../gateway/index.js';
import { StreamCallImpl, type StreamSummary, type SubmitOptions } from '../../scheduler/index.js';
import { createMetrics } from '../../telemetry/metrics.js';
import { silentLogger } from '../../../test/support/test-logger.js';
import { systemClock } from '../../core/clock.js';
import { createRemoteDeps } from './remote-deps.js';
import { serveThread } from './serve-thread.js';
import { isThreadRequest, STREAM_CHUNKS_AHEAD, type OwnerMessage, type ThreadMessage } from './thread-messages.js';

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

/** A thread's deps linked to a main-thread side over `gateway` (only the functions a test uses). */
function link(gateway: Partial<GatewayDeps>) {
  const channel = new MessageChannel();
  channels.push(channel);
  const transfers = new UploadPool({ maxPooledBytes: 64 * 1024 * 1024 });
  const metrics = createMetrics({ thread: 'gateway-test' });
  const remote = createRemoteDeps(
    channel.port1,
    {
      models: { list: () => [], resolve: () => undefined },
      voiceModels: [],
      decoder: undefined as never,
      voiceActivity: undefined as never,
      metricsContentType: metrics.registry.contentType,
      clock: systemClock,
      log: silentLogger(),
      metrics,
    },
    transfers,
    { readiness: { isReady: true, body: { models: {} } }, models: {}, catalogs: {}, residency: {}, instanceGpus: {}, isDraining: false },
  );
  channel.port1.on('message', (message: OwnerMessage) => remote.receive(message));
  const server = serveThread((message, transfer = []) => channel.port2.postMessage(message, transfer), {
    gateway: gateway as GatewayDeps,
    metricsText: async () => 'metrics',
    log: silentLogger(),
  });
  channel.port2.on('message', (message: ThreadMessage) => {
    if (isThreadRequest(message) || message.type === 'streamTake' || message.type === 'cancel') server.receive(message);
  });
  return { deps: remote.deps, transfers, server };
}

const OPTIONS: SubmitOptions = { timeoutMs: 5000, requestId: 'r1', priority: 'high' };

describe('gateway thread link', () => {
  it('hands a transcription over with its samples, reports the dispatch and takes the memory back with the result', async () => {
    let seen: { audio: Int16Array; language: string | null; priority: string | undefined } | undefined;
    const { deps, transfers } = link({
      transcribe: async (_model, request, options) => {
        seen = { audio: new Int16Array(request.audio), language: request.language, priority: options.priority };
        options.onDispatched?.({ instanceId: 'i-0', queuedMs: 7 });
        return { text: 'hello', language: 'en', durationS: 1 } as never;
      },
    });
    const audio = Int16Array.from({ length: 16_000 }, (_, i) => (i * 37) % 30_000);
    const dispatches: unknown[] = [];
    const result = await deps.transcribe(
      'm',
      { audio: audio.subarray(1000), language: 'en', prompt: null, wordTimestamps: false },
      { ...OPTIONS, onDispatched: (d) => dispatches.push(d) },
    );
    assert.equal((result as { text: string }).text, 'hello');
    assert.deepEqual(seen?.audio, audio.subarray(1000));
    assert.equal(seen?.language, 'en');
    assert.equal(seen?.priority, 'high');
    assert.deepEqual(dispatches, [{ instanceId: 'i-0', queuedMs: 7 }]);
    // The caller's own samples are untouched (a copy crossed), and the copy's memory is pooled again.
    assert.equal(audio.length, 16_000);
    assert.ok(transfers.pooledBytes >= 30_000, `pooled ${transfers.pooledBytes}`);
  });

  it("rebuilds the main thread's ServiceError, with its code, kind and Retry-After", async () => {
    const { deps } = link({
      transcribe: async () => {
        throw errors.queueFull({ model: 'm', queued: 3, retryAfterMs: 2000 });
      },
    });
    await assert.rejects(
      deps.transcribe('m', { audio: new Int16Array(10), language: null, prompt: null, wordTimestamps: false }, OPTIONS),
      (err) => {
        assert.ok(err instanceof ServiceError);
        assert.equal(err.code, 'queue_full');
        assert.equal(err.kind, 'resource_exhausted');
        assert.equal(err.retryAfterMs, 2000);
        assert.deepEqual(err.details, { model: 'm', queued: 3 });
        return true;
      },
    );
  });

  it('answers a thrown non-ServiceError as internal_error', async () => {
    const { deps } = link({ transcribe: async () => Promise.reject(new TypeError('boom')) });
    await assert.rejects(
      deps.transcribe('m', { audio: new Int16Array(10), language: null, prompt: null, wordTimestamps: false }, OPTIONS),
      {
        code: 'internal_error',
      },
    );
  });

  it("aborts the main thread's request when the caller's signal aborts", async () => {
    let aborted: Promise<void> | undefined;
    const { deps } = link({
      transcribe: (_model, _request, options) =>
        new Promise((_resolve, reject) => {
          aborted = new Promise((resolve) =>
            options.signal?.addEventListener('abort', () => {
              resolve();
              reject(errors.clientDisconnected({ requestId: 'r1' }));
            }),
          );
        }),
    });
    const abort = new AbortController();
    const call = deps.transcribe(
      'm',
      { audio: new Int16Array(10), language: null, prompt: null, wordTimestamps: false },
      { ...OPTIONS, signal: abort.signal },
    );
    await new Promise((r) => setTimeout(r, 20));
    abort.abort();
    await assert.rejects(call, { code: 'client_disconnected' });
    await aborted;
  });

  it("sends a stream's chunks in order, at most STREAM_CHUNKS_AHEAD ahead of the caller, and its end after the last", async () => {
    let takenFromMain = 0;
    const source = new StreamCallImpl({ onTake: () => (takenFromMain += 1), onCancel: () => undefined });
    const { deps } = link({ openStream: () => source });
    const stream = deps.openStream('voice', { resource: null, params: {}, body: new Uint8Array([1, 2, 3]) }, { timeoutMs: 5000 });
    for (let i = 0; i < 8; i++) source.push({ index: i, meta: { i }, bytes: new Uint8Array([i, i + 1]) });
    source.end({ ok: true, summary: { chunks: 8, usage: { seconds: 1 } } });
    const received: number[] = [];
    const iterator = stream[Symbol.asyncIterator]();
    await new Promise((r) => setTimeout(r, 30));
    // Nobody read yet: only the chunks ahead have left the main thread's stream.
    assert.equal(takenFromMain, STREAM_CHUNKS_AHEAD);
    for (;;) {
      const next = await iterator.next();
      if (next.done === true) break;
      received.push(next.value.index);
      assert.deepEqual([...next.value.bytes], [next.value.index, next.value.index + 1]);
      await new Promise((r) => setTimeout(r, 5));
      assert.ok(takenFromMain <= received.length + STREAM_CHUNKS_AHEAD, `${takenFromMain} taken, ${received.length} read`);
    }
    assert.deepEqual(received, [0, 1, 2, 3, 4, 5, 6, 7]);
    const summary: StreamSummary = await stream.done;
    assert.deepEqual(summary, { chunks: 8, usage: { seconds: 1 } });
  });

  it("cancels the main thread's stream when the caller cancels", async () => {
    let isCancelled = false;
    const source = new StreamCallImpl({ onTake: () => undefined, onCancel: () => (isCancelled = true) });
    const { deps } = link({ openStream: () => source });
    const stream = deps.openStream('voice', { resource: null, params: {}, body: new Uint8Array(0) }, { timeoutMs: 5000 });
    stream.cancel();
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(isCancelled, true);
  });

  it("runs a diarization session's chunk on the main thread's session service", async () => {
    let samples: number | undefined;
    const { deps } = link({
      diarizationSessions: {
        create: async () => Promise.reject(new Error('unused')),
        modelOf: async (id) => (id === 's1' ? 'diar' : Promise.reject(errors.sessionNotFound({ model: 'diar', sessionId: id }))),
        timeline: async () => Promise.reject(new Error('unused')),
        close: async () => Promise.reject(new Error('unused')),
        chunk: async (chunk) => {
          samples = chunk.samples?.length;
          return { id: chunk.id, seq: chunk.seq, duration: 1, speakers: 1, finalized: [], provisional: [], expires_at: 0 };
        },
      },
    });
    assert.equal(await deps.diarizationSessions!.modelOf('s1'), 'diar');
    await assert.rejects(deps.diarizationSessions!.modelOf('s2'), { code: 'session_not_found' });
    const answer = await deps.diarizationSessions!.chunk(
      { id: 's1', seq: 0, isLast: false, samples: new Int16Array(16_000) },
      { timeoutMs: 1000 },
    );
    assert.equal(answer.seq, 0);
    assert.equal(samples, 16_000);
  });
});
