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
import Fastify from 'fastify';
import { waitFor } from '../../../test/support/wait-for.js';
import { createModelLifecycleControl, toHttpError } from '../../gateway/index.js';
import type { ModelLifecycleState, ModelWakeEnd } from '../../gateway/index.js';
import { registerModelRoutes } from '../../gateway/routes/models.js';
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
    let seen: { audio: Int16Array; language: string | null; priority: string | undefined; rest: unknown } | undefined;
    const { deps, transfers } = link({
      transcribe: async (_model, request, options) => {
        const { task, temperature, piece } = request;
        seen = {
          audio: new Int16Array(request.audio),
          language: request.language,
          priority: options.priority,
          rest: { task, temperature, piece },
        };
        options.onDispatched?.({ instanceId: 'i-0', queuedMs: 7 });
        return { text: 'hello', language: 'en', durationS: 1 } as never;
      },
    });
    const audio = Int16Array.from({ length: 16_000 }, (_, i) => (i * 37) % 30_000);
    const dispatches: unknown[] = [];
    const result = await deps.transcribe(
      'm',
      {
        audio: audio.subarray(1000),
        language: 'en',
        prompt: null,
        wordTimestamps: false,
        task: 'translate',
        temperature: 0.4,
        piece: true,
      },
      { ...OPTIONS, onDispatched: (d) => dispatches.push(d) },
    );
    assert.equal((result as { text: string }).text, 'hello');
    assert.deepEqual(seen?.audio, audio.subarray(1000));
    assert.equal(seen?.language, 'en');
    assert.equal(seen?.priority, 'high');
    assert.deepEqual(seen?.rest, { task: 'translate', temperature: 0.4, piece: true }, 'every field of the request crosses');
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

describe("gateway thread: POST /v1/models/{id}/wake and /sleep answer with the main thread's state after the call", () => {
  /** A thread's model routes over a main thread whose lifecycle the test owns (one model, `m`). */
  async function threadModelRoutes(owner: { state: ModelLifecycleState; why: ServiceError | undefined; wakeEnds?: Promise<ModelWakeEnd> }) {
    const channel = new MessageChannel();
    channels.push(channel);
    const metrics = createMetrics({ thread: 'gateway-test' });
    // The main thread's control over a lifecycle that behaves as the supervisor's.
    const lifecycle = createModelLifecycleControl({
      state: () => owner.state,
      whyUnavailable: () => (owner.state === 'stopped' || owner.state === 'stopping' ? owner.why : undefined),
      // As the supervisor's: a wake of a stopped model starts at once (the failure of the last one is forgotten).
      wake: (): Promise<ModelWakeEnd> => {
        if (owner.state === 'stopped') Object.assign(owner, { state: 'starting', why: undefined });
        return owner.wakeEnds ?? new Promise<ModelWakeEnd>(() => undefined);
      },
      sleep: async () => void Object.assign(owner, { state: 'stopping' }),
    });
    const snapshot = () => ({
      readiness: { isReady: true, body: { models: {} } },
      models: { m: { state: owner.state } },
      catalogs: {},
      residency: {},
      instanceGpus: {},
      isDraining: false,
    });
    const remote = createRemoteDeps(
      channel.port1,
      {
        models: { list: () => [], resolve: (id) => (id === 'm' ? 'm' : undefined) },
        voiceModels: [],
        decoder: undefined as never,
        voiceActivity: undefined as never,
        metricsContentType: metrics.registry.contentType,
        clock: systemClock,
        log: silentLogger(),
        metrics,
      },
      new UploadPool({ maxPooledBytes: 1024 * 1024 }),
      snapshot(),
    );
    channel.port1.on('message', (message: OwnerMessage) => remote.receive(message));
    const server = serveThread((message, transfer = []) => channel.port2.postMessage(message, transfer), {
      gateway: { lifecycle } as unknown as GatewayDeps,
      metricsText: async () => 'metrics',
      log: silentLogger(),
    });
    channel.port2.on('message', (message: ThreadMessage) => {
      if (isThreadRequest(message)) server.receive(message);
    });
    const app = Fastify();
    app.setErrorHandler(async (err, _request, reply) => {
      const http = toHttpError(err as ServiceError);
      return reply.code(http.status).send(http.body);
    });
    registerModelRoutes(app, remote.deps);
    await app.ready();
    return app;
  }

  it('answers a wake of a stopped model 202 starting, as the main thread does, even after a failed wake', async () => {
    // docs/operations.md: `POST .../wake  # 202 {"state":"starting"} at once (200 if ready)`; the last
    // wake's failure is forgotten once the next wake starts ("the next request wakes the model again").
    const owner: { state: ModelLifecycleState; why: ServiceError | undefined } = {
      state: 'stopped',
      why: errors.modelWakeFailed({ model: 'm', reason: 'no instance could start', retryAfterMs: 1000 }),
    };
    const app = await threadModelRoutes(owner);
    const res = await app.inject({ method: 'POST', url: '/v1/models/m/wake' });
    await waitFor(() => owner.state === 'starting', 'the main thread to start the wake', 2000);
    assert.equal(res.statusCode, 202, `answered ${res.statusCode} ${res.body}`);
    assert.equal(res.json().state, 'starting');
    await app.close();
  });

  it('answers a sleep of a ready model with its stopping state, not the ready state it had before the call', async () => {
    const owner: { state: ModelLifecycleState; why: ServiceError | undefined } = { state: 'ready', why: undefined };
    const app = await threadModelRoutes(owner);
    const res = await app.inject({ method: 'POST', url: '/v1/models/m/sleep' });
    await waitFor(() => owner.state === 'stopping', 'the main thread to start the sleep', 2000);
    assert.equal(res.json().state, 'stopping', `answered ${res.statusCode} ${res.body}`);
    await app.close();
  });
  it("answers wake?wait=true with the wake's own 503 (model_wake_timeout) when the wake fails", async () => {
    // docs/operations.md: `wake?wait=true # 200 once ready, or the wake's 503`.
    const owner: { state: ModelLifecycleState; why: ServiceError | undefined; wakeEnds?: Promise<ModelWakeEnd> } = {
      state: 'stopped',
      why: undefined,
    };
    // The wake times out on the main thread: the model is stopped again with model_wake_timeout.
    let timeOut!: () => void;
    owner.wakeEnds = new Promise<ModelWakeEnd>((resolve) => {
      timeOut = () => {
        const error = errors.modelWakeTimeout({ model: 'm', wakeTimeoutMs: 50, retryAfterMs: 1000 });
        Object.assign(owner, { state: 'stopped', why: error });
        resolve({ isReady: false, error });
      };
    });
    const app = await threadModelRoutes(owner);
    const answer = app.inject({ method: 'POST', url: '/v1/models/m/wake?wait=true' });
    await waitFor(() => owner.state === 'starting', 'the main thread to start the wake', 2000);
    timeOut();
    const res = await answer;
    assert.equal(res.statusCode, 503);
    assert.equal(res.json().error.code, 'model_wake_timeout', `answered ${res.statusCode} ${res.body}`);
    await app.close();
  });
});
