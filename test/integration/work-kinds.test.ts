/**
 * Acceptance tests of sequence and stream work end to end: the scheduler and the supervisor wired
 * as in app/build-server.ts, over real Python hosts running the `test` adapter.
 *
 * - sequence: the adapter keeps a running sum. Each item's output is {"sum": previous sum + the
 *   sum of the item's int16 samples, "items": items so far}, and the state carries both. A lost
 *   item, a double run (it would add twice) or an overtaking item shows in the sums.
 * - stream: params {"chunks", "chunkBytes", "chunkDelayMs"}; usage {"chunks"}; honours cancel.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { systemClock } from '../../src/core/clock.js';
import type { ServiceError } from '../../src/core/errors.js';
import { createScheduler, type Executor, type Scheduler, type StreamEnd } from '../../src/scheduler/index.js';
import type { Supervisor } from '../../src/supervisor/index.js';
import { buildTestSupervisor, testModel } from '../support/supervisor-fixture.js';
import { silentLogger } from '../support/test-logger.js';
import { waitFor } from '../support/wait-for.js';

const CREDIT_CHUNKS = 4;

interface StreamProbe {
  /** Chunks the supervisor delivered to the scheduler, per stream. */
  received: Map<string, number>;
  /** When cancel() reached the supervisor, and when the supervisor's sink then ended, per stream. */
  cancelledAtMs: Map<string, number>;
  endedAtMs: Map<string, { atMs: number; end: StreamEnd }>;
}

const running: { supervisor: Supervisor; scheduler: Scheduler }[] = [];
after(() => {
  for (const { scheduler, supervisor } of running) {
    scheduler.destroy();
    supervisor.destroy();
  }
});

/** A scheduler over a real supervisor, with the supervisor's stream side observed. */
async function build(instances: number) {
  const { supervisor, metrics } = buildTestSupervisor(
    { m: testModel({ instances }) },
    { heartbeatIntervalMs: 100, heartbeatMissLimit: 20, restartInitialBackoffMs: 50 },
  );
  const probe: StreamProbe = { received: new Map(), cancelledAtMs: new Map(), endedAtMs: new Map() };
  const executor: Executor = {
    ...supervisor,
    openStream(instanceId, input, sink) {
      probe.received.set(input.streamId, 0);
      const control = supervisor.openStream(instanceId, input, {
        chunk: (chunk) => {
          probe.received.set(input.streamId, (probe.received.get(input.streamId) ?? 0) + 1);
          sink.chunk(chunk);
        },
        end: (end) => {
          probe.endedAtMs.set(input.streamId, { atMs: performance.now(), end });
          sink.end(end);
        },
      });
      return {
        grant: (chunks) => control.grant(chunks),
        cancel: () => {
          probe.cancelledAtMs.set(input.streamId, performance.now());
          control.cancel();
        },
      };
    },
  };
  const scheduler = createScheduler(
    {
      maxQueuedRequests: 10_000,
      retryAfterMs: 100,
      lengthBucketsMs: [30_000],
      maxRunningBatchesPerInstance: 2,
      models: {
        m: {
          maxBatchSize: 16,
          preferredBatchSizes: [],
          maxQueueDelayMs: 2,
          dispatchWhenIdle: true,
          streamCreditChunks: CREDIT_CHUNKS,
          maxStreamsPerInstance: 4,
        },
      },
    },
    { executor, clock: systemClock, log: silentLogger(), metrics },
  );
  running.push({ supervisor, scheduler });
  await supervisor.start();
  await waitFor(() => supervisor.readyInstances('m').length === instances, `${instances} ready instances`);
  return { supervisor, scheduler, probe };
}

function randomAudio(samples: number): Int16Array {
  return Int16Array.from({ length: samples }, () => Math.floor(Math.random() * 65536) - 32768);
}

const sumOf = (audio: Int16Array) => audio.reduce((sum, sample) => sum + sample, 0);

describe('Sequence work on real instances', () => {
  it('keeps 50 sessions × 20 items exact through 3 instances when one is SIGKILLed midway', async () => {
    const { supervisor, scheduler } = await build(3);
    const sessions = 50;
    const itemsPerSession = 20;
    let finished = 0;
    let killedPid: number | undefined;
    const killMidway = () => {
      finished += 1;
      if (killedPid !== undefined || finished < (sessions * itemsPerSession) / 2) return;
      const victim = supervisor.stats().instances.find((i) => i.state === 'ready' && i.pid !== null);
      killedPid = victim?.pid ?? undefined;
      if (killedPid !== undefined) process.kill(killedPid, 'SIGKILL');
    };
    const runSession = async (s: number) => {
      const sessionId = `session-${s}`;
      const outputs: { sum: number; items: number }[] = [];
      let expected = 0;
      // The items of a session are all submitted at once: the scheduler must keep them in order.
      const pending = Array.from({ length: itemsPerSession }, (_, seq) => {
        const audio = randomAudio(320);
        expected += sumOf(audio);
        return scheduler.submitSequenceItem(
          'm',
          { sessionId, seq, audio, isLast: seq === itemsPerSession - 1, options: { itemDelayMs: 1 } },
          { timeoutMs: 30_000 },
        );
      });
      for (const promise of pending) {
        const result = await promise;
        killMidway();
        outputs.push(result.output as { sum: number; items: number });
      }
      return { sessionId, outputs, expected };
    };
    const startedMs = performance.now();
    const results = await Promise.all(Array.from({ length: sessions }, (_, s) => runSession(s)));
    assert.ok(killedPid !== undefined, 'an instance was killed midway');
    for (const { sessionId, outputs, expected } of results) {
      assert.deepEqual(
        outputs.map((o) => o.items),
        Array.from({ length: itemsPerSession }, (_, i) => i + 1),
        `${sessionId}: items in order, none lost or run twice`,
      );
      assert.equal(outputs.at(-1)?.sum, expected, `${sessionId}: the final sum is the sum of its audio`);
    }
    await waitFor(() => supervisor.stats().instances.every((i) => i.state === 'ready'), 'the killed instance replaced');
    assert.ok(supervisor.stats().instances.some((i) => i.restarts === 1));
    assert.ok(performance.now() - startedMs < 20_000);
    await scheduler.close();
    await supervisor.close();
  });
});

describe('Stream work on real instances', () => {
  it('delivers 200 chunks in order to a slow reader, never holding more than the credit window unread', async () => {
    const { supervisor, scheduler, probe } = await build(1);
    const call = scheduler.openStream(
      'm',
      { resource: null, params: { chunks: 200, chunkBytes: 64, chunkDelayMs: 0 }, body: new Uint8Array() },
      { timeoutMs: 30_000 },
    );
    let read = 0;
    let mostUnread = 0;
    const streamId = () => [...probe.received.keys()][0]!;
    for await (const chunk of call) {
      assert.equal(chunk.index, read, 'chunks arrive in order');
      assert.equal(chunk.bytes.byteLength, 64);
      assert.ok(
        chunk.bytes.every((byte) => byte === read % 256),
        `chunk ${read} holds its own bytes`,
      );
      read += 1;
      // The slow reader: the instance must wait for credit meanwhile.
      await new Promise((resolve) => setTimeout(resolve, read % 20 === 0 ? 20 : 1));
      const unread = (probe.received.get(streamId()) ?? 0) - read;
      mostUnread = Math.max(mostUnread, unread);
      assert.ok(unread <= CREDIT_CHUNKS, `${unread} chunks received but unread: over the credit of ${CREDIT_CHUNKS}`);
    }
    const summary = await call.done;
    assert.equal(read, 200);
    assert.deepEqual(summary, { chunks: 200, usage: { chunks: 200 } });
    assert.equal(probe.received.get(streamId()), 200);
    assert.ok(mostUnread >= 1, 'the reader was slower than the instance');
    await scheduler.close();
    await supervisor.close();
  });

  // The host sets the stream's cancel event from its reader thread, so the test adapter's chunk
  // delay ends at once: the cancel does not wait for the step that is running.
  it('stops a stream at the host within 50 ms of cancel()', async () => {
    const { supervisor, scheduler, probe } = await build(1);
    const call = scheduler.openStream(
      'm',
      { resource: null, params: { chunks: 10, chunkBytes: 16, chunkDelayMs: 1_000 }, body: new Uint8Array() },
      { timeoutMs: 30_000 },
    );
    await waitFor(() => probe.received.size === 1, 'the stream started');
    // Let the host be inside its chunk delay.
    await new Promise((resolve) => setTimeout(resolve, 150));
    call.cancel();
    await assert.rejects(call.done, (err: ServiceError) => err.code === 'stream_cancelled');
    const streamId = [...probe.received.keys()][0]!;
    await waitFor(() => probe.endedAtMs.has(streamId), 'the host confirmed the cancel', 2_000);
    const ended = probe.endedAtMs.get(streamId)!;
    assert.equal(ended.end.ok ? 'ok' : ended.end.error.code, 'stream_cancelled');
    const tookMs = ended.atMs - probe.cancelledAtMs.get(streamId)!;
    assert.ok(tookMs < 50, `the cancel took ${tookMs.toFixed(1)} ms`);
    assert.ok((probe.received.get(streamId) ?? 0) < 10);
    await waitFor(() => scheduler.stats().streamsRunning === 0, "the stream's instance slot freed");
    await scheduler.close();
    await supervisor.close();
  });
});
