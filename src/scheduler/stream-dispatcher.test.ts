import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { errors } from '../core/error-catalog.js';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { FakeExecutor } from '../../test/support/fake-executor.js';
import { createScheduler, type ModelPolicy, type SchedulerOptions, type StreamCall, type StreamChunk } from './index.js';

const input = (resource: string | null = null) => ({ resource, params: { text: 'hi' }, body: new Uint8Array() });

function setup(policy: Partial<ModelPolicy> = {}, instances = ['a'], overrides: Partial<SchedulerOptions> = {}) {
  const clock = new FakeClock();
  const executor = new FakeExecutor({ m: instances });
  const metrics = createMetrics();
  const scheduler = createScheduler(
    {
      maxQueuedRequests: 100,
      retryAfterMs: 1000,
      lengthBucketsMs: [5000],
      maxRunningBatchesPerInstance: 1,
      models: {
        m: { maxBatchSize: 4, preferredBatchSizes: [], maxQueueDelayMs: 0, maxStreamsPerInstance: 1, streamCreditChunks: 4, ...policy },
      },
      ...overrides,
    },
    { executor, clock, log: createLogger({ level: 'silent' }), metrics },
  );
  return { clock, executor, scheduler, metrics };
}

async function collect(call: StreamCall): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = [];
  for await (const chunk of call) chunks.push(chunk);
  return chunks;
}

describe('StreamDispatcher', () => {
  it('delivers the chunks in order and resolves done with the count and usage', async () => {
    const { executor, scheduler } = setup();
    const call = scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    const chunks = collect(call);
    const [stream] = executor.streams;
    assert.equal(stream!.input.creditChunks, 4);
    assert.equal(stream!.produce(3), 3);
    stream!.end({ characters: 2 });
    assert.deepEqual(
      (await chunks).map((c) => c.index),
      [0, 1, 2],
    );
    assert.deepEqual(await call.done, { chunks: 3, usage: { characters: 2 } });
    assert.equal(scheduler.stats().streamsRunning, 0);
  });

  it('reports each start through onDispatched with its instance and queued time (#20)', async () => {
    const { clock, executor, scheduler } = setup();
    const seen: { instanceId: string; queuedMs: number }[] = [];
    const first = scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    const firstChunks = collect(first);
    const second = scheduler.openStream('m', input(), { timeoutMs: 10_000, onDispatched: (d) => seen.push(d) });
    const secondChunks = collect(second);
    clock.advance(25);
    await settle();
    assert.deepEqual(seen, [], 'queued behind the first stream');
    executor.streams[0]!.end({});
    await firstChunks;
    await settle();
    assert.deepEqual(seen, [{ instanceId: 'a', queuedMs: 25 }]);
    executor.streams[1]!.end({});
    await secondChunks;
  });

  it('keeps at most streamCreditChunks outstanding for a slow reader of a 200-chunk stream', async () => {
    const { executor, scheduler } = setup({ streamCreditChunks: 8 });
    const call = scheduler.openStream('m', input(), { timeoutMs: 1_000_000 });
    const stream = executor.streams[0]!;
    const iterator = call[Symbol.asyncIterator]();
    let taken = 0;
    while (taken < 200) {
      stream.produce(200 - stream.sentChunks); // the instance runs as far ahead as its credit allows
      assert.ok(stream.sentChunks - taken <= 8, `outstanding ${stream.sentChunks - taken}`);
      const next = await iterator.next(); // the reader takes one chunk at a time
      assert.equal(next.done, false);
      assert.equal(next.value!.index, taken);
      taken += 1;
    }
    stream.end();
    assert.equal((await iterator.next()).done, true);
    assert.equal(stream.maxOutstanding, 8);
    assert.equal(stream.grants.length, 200);
  });

  it('passes cancel() to the executor, rejects done with stream_cancelled and frees the slot for the next stream', async () => {
    const { executor, scheduler, metrics } = setup();
    const first = scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    const second = scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    assert.equal(executor.streams.length, 1, 'one stream per instance: the second waits');
    assert.equal(scheduler.stats().streamsQueued, 1);
    first.cancel();
    await assert.rejects(first.done, { code: 'stream_cancelled', kind: 'cancelled' });
    assert.equal(executor.streams[0]!.isCancelled, true);
    assert.equal(executor.streams.length, 2);
    executor.streams[1]!.end();
    await second.done;
    const outcomes = (await metrics.registry.getSingleMetric('voxmux_scheduler_streams_total')!.get()).values;
    assert.deepEqual(outcomes.map((v) => [v.labels.outcome, v.value]).sort(), [
      ['ok', 1],
      ['stream_cancelled', 1],
    ]);
  });

  it('cancels a stream when its signal aborts, and when the reader leaves its loop early', async () => {
    const { executor, scheduler } = setup({ maxStreamsPerInstance: 2 });
    const controller = new AbortController();
    const aborted = scheduler.openStream('m', input(), { timeoutMs: 10_000, signal: controller.signal });
    controller.abort();
    await assert.rejects(aborted.done, { code: 'client_disconnected' });
    assert.equal(executor.streams[0]!.isCancelled, true);
    const left = scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    executor.streams[1]!.produce(2);
    for await (const chunk of left) {
      assert.equal(chunk.index, 0);
      break;
    }
    assert.equal(executor.streams[1]!.isCancelled, true);
  });

  it('queues streams beyond capacity in priority order, expires them at their deadline and refuses beyond maxQueuedRequests', async () => {
    const { clock, executor, scheduler } = setup({}, ['a'], { maxQueuedRequests: 2 });
    void scheduler.openStream('m', { ...input(), requestId: 'running' }, { timeoutMs: 10_000 });
    const normal = scheduler.openStream('m', { ...input(), requestId: 'normal' }, { timeoutMs: 10_000 });
    const high = scheduler.openStream('m', { ...input(), requestId: 'high' }, { timeoutMs: 50, priority: 'high' });
    await assert.rejects(scheduler.openStream('m', input(), { timeoutMs: 10_000 }).done, { code: 'queue_full' });
    clock.advance(50);
    await assert.rejects(high.done, { code: 'deadline_exceeded' });
    const high2 = scheduler.openStream('m', { ...input(), requestId: 'high2' }, { timeoutMs: 10_000, priority: 'high' });
    executor.streams[0]!.end();
    await settle();
    assert.deepEqual(
      executor.streams.map((s) => s.input.requestId),
      ['running', 'high2'],
    );
    executor.streams[1]!.end();
    await high2.done;
    assert.equal(executor.streams[2]!.input.requestId, 'normal');
    executor.streams[2]!.end();
    await normal.done;
  });

  it('ends a running stream at its deadline and stops it at the instance', async () => {
    const { clock, executor, scheduler } = setup();
    const call = scheduler.openStream('m', input(), { timeoutMs: 100 });
    executor.streams[0]!.produce(1);
    clock.advance(100);
    await assert.rejects(call.done, { code: 'deadline_exceeded' });
    assert.equal(executor.streams[0]!.isCancelled, true);
    assert.equal(scheduler.stats().streamsRunning, 0);
  });

  it('retries once on another instance when the instance dies before the first chunk', async () => {
    const { executor, scheduler } = setup({}, ['a', 'b']);
    const call = scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    assert.equal(executor.streams[0]!.instanceId, 'a');
    executor.crash('a');
    assert.equal(executor.streams.length, 2);
    assert.equal(executor.streams[1]!.instanceId, 'b');
    executor.streams[1]!.produce(1);
    executor.streams[1]!.end();
    assert.equal((await collect(call)).length, 1);
  });

  it('retries on another instance than the one that failed, though that one still looks ready', async () => {
    const { executor, scheduler } = setup({}, ['a', 'b']);
    const call = scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    executor.streams[0]!.fail(errors.instanceCrashed({ instanceId: 'a', reason: 'test' }));
    assert.equal(executor.streams.length, 2);
    assert.equal(executor.streams[1]!.instanceId, 'b');
    executor.streams[1]!.produce(1);
    executor.streams[1]!.end();
    assert.equal((await collect(call)).length, 1);
  });

  it("reports a retried stream's queued time from its requeue, not from its open (its first run is not queue time)", async () => {
    const { clock, executor, scheduler } = setup({}, ['a', 'b']);
    const seen: { instanceId: string; queuedMs: number }[] = [];
    const call = scheduler.openStream('m', input(), { timeoutMs: 60_000, onDispatched: (d) => seen.push(d) });
    clock.advance(5000); // the first attempt runs 5 s without a chunk, then its instance dies
    executor.streams[0]!.fail(errors.instanceCrashed({ instanceId: 'a', reason: 'test' }));
    executor.streams[1]!.end();
    await call.done;
    assert.deepEqual(seen, [
      { instanceId: 'a', queuedMs: 0 },
      { instanceId: 'b', queuedMs: 0 },
    ]);
  });

  it('ends with instance_crashed when the instance dies after chunks were delivered', async () => {
    const { executor, scheduler } = setup({}, ['a', 'b']);
    const call = scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    executor.streams[0]!.produce(2);
    executor.crash('a');
    await assert.rejects(call.done, { code: 'instance_crashed' });
    assert.equal(executor.streams.length, 1, 'not retried');
    await assert.rejects(collect(call), { code: 'instance_crashed' });
  });

  it('fails after the retry when the second instance dies too before its first chunk', async () => {
    const { executor, scheduler } = setup({}, ['a', 'b', 'c']);
    const call = scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    executor.streams[0]!.fail(errors.instanceCrashed({ instanceId: 'a', reason: 'test' }));
    executor.streams[1]!.fail(errors.instanceCrashed({ instanceId: 'b', reason: 'test' }));
    await assert.rejects(call.done, { code: 'instance_crashed' });
    assert.equal(executor.streams.length, 2);
  });

  it('routes a stream to the instance where its resource is resident', () => {
    const { executor, scheduler } = setup({ maxStreamsPerInstance: 4 }, ['a', 'b', 'c']);
    executor.setResources('b', [{ name: 'voice-1', residency: 'host', bytes: 10 }]);
    executor.setResources('c', [{ name: 'voice-1', residency: 'device', bytes: 10 }]);
    void scheduler.openStream('m', input('voice-1'), { timeoutMs: 10_000 });
    void scheduler.openStream('m', input('voice-2'), { timeoutMs: 10_000 });
    assert.deepEqual(
      executor.streams.map((s) => s.instanceId),
      ['c', 'a'],
    );
  });

  it('refuses streams for an unknown model and while no instance can come', async () => {
    const { executor, scheduler } = setup();
    await assert.rejects(scheduler.openStream('nope', input(), { timeoutMs: 10 }).done, { code: 'model_not_found' });
    executor.setAvailability('m', 'unavailable');
    await assert.rejects(collect(scheduler.openStream('m', input(), { timeoutMs: 10 })), { code: 'no_ready_instance' });
  });

  it('close() waits for running streams to end', async () => {
    const { executor, scheduler } = setup();
    void scheduler.openStream('m', input(), { timeoutMs: 10_000 });
    let isClosed = false;
    const closed = scheduler.close().then(() => (isClosed = true));
    await settle();
    assert.equal(isClosed, false);
    executor.streams[0]!.end();
    await closed;
  });
});
