import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics } from '../../telemetry/metrics.js';
import { errors } from '../../core/error-catalog.js';
import { FakeClock, settle } from '../../../test/support/fake-clock.js';
import { decodeSum, FakeExecutor, type SeenSequenceBatch } from '../../../test/support/fake-executor.js';
import { createScheduler, type ModelPolicy, type SchedulerOptions, type SequenceResult } from '../index.js';

const samples = (...values: number[]) => Int16Array.from(values);
const item = (sessionId: string, seq: number, audio = samples(seq + 1), isLast = false) => ({ sessionId, seq, audio, isLast, options: {} });

function setup(policy: Partial<ModelPolicy> = {}, instances = ['a'], overrides: Partial<SchedulerOptions> = {}) {
  const clock = new FakeClock();
  const executor = new FakeExecutor({ m: instances });
  const metrics = createMetrics();
  const scheduler = createScheduler(
    {
      maxQueuedRequests: 1000,
      retryAfterMs: 1000,
      lengthBucketsMs: [5000],
      maxRunningBatchesPerInstance: 1,
      models: { m: { maxBatchSize: 8, preferredBatchSizes: [], maxQueueDelayMs: 0, ...policy } },
      ...overrides,
    },
    { executor, clock, log: createLogger({ level: 'silent' }), metrics },
  );
  /** Completes every running sequence batch as a running sum; returns how many. */
  const completeAll = () => {
    const running = executor.runningSequenceBatches();
    for (const b of running) executor.completeSequenceRunningSum(b);
    return running.length;
  };
  return { clock, executor, scheduler, metrics, completeAll };
}

const itemsOf = (b: SeenSequenceBatch) => b.batch.items.map((i) => `${i.sessionId}:${i.seq}:${i.state.kind}`);
const sumOf = (r: SequenceResult) => r.output.sum as number;

async function metricValue(metrics: ReturnType<typeof createMetrics>, name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return value?.value ?? 0;
}

describe('SequenceBatcher', () => {
  it('creates a session with its seq 0 item and rejects an unknown session with session_not_found', async () => {
    const { scheduler, completeAll } = setup();
    await assert.rejects(
      scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 1000 }),
      (e: Error & { code: string; kind: string }) => {
        assert.equal(e.code, 'session_not_found');
        assert.equal(e.kind, 'not_found');
        return true;
      },
    );
    const first = scheduler.submitSequenceItem('m', item('s', 0, samples(2, 3)), { timeoutMs: 1000 });
    await settle();
    assert.equal(scheduler.stats().models.m!.sessions, 1);
    assert.equal(completeAll(), 1);
    assert.deepEqual(await first, { sessionId: 's', seq: 0, output: { sum: 5 } });
  });

  it('batches items of different sessions together and runs the items of one session one at a time, in order', async () => {
    const { clock, executor, scheduler, completeAll } = setup({ maxQueueDelayMs: 10 });
    const results: Promise<SequenceResult>[] = [];
    for (let seq = 0; seq < 3; seq++) {
      for (const s of ['x', 'y']) results.push(scheduler.submitSequenceItem('m', item(s, seq), { timeoutMs: 10_000 }));
    }
    clock.advance(10);
    await settle();
    assert.deepEqual(executor.sequenceBatches.map(itemsOf), [['x:0:new', 'y:0:new']]);
    completeAll();
    await settle();
    assert.deepEqual(itemsOf(executor.sequenceBatches[1]!), ['x:1:resident', 'y:1:resident']);
    completeAll();
    await settle();
    completeAll();
    const sums = (await Promise.all(results)).map(sumOf);
    assert.deepEqual(sums, [1, 1, 3, 3, 6, 6]);
    for (const b of executor.sequenceBatches) {
      assert.equal(new Set(b.batch.items.map((i) => i.sessionId)).size, b.batch.items.length, 'one item per session per batch');
    }
  });

  it('sends a session to the instance that holds its state, and new sessions to the least-loaded instance', async () => {
    const { executor, scheduler, completeAll } = setup({}, ['a', 'b']);
    const s0 = scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    await settle();
    assert.equal(executor.sequenceBatches[0]!.instanceId, 'a');
    completeAll();
    await s0;
    // 's' is bound to a; 't' is new and goes to b (fewest bound sessions); 's' stays on a.
    void scheduler.submitSequenceItem('m', item('t', 0), { timeoutMs: 10_000 });
    void scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 10_000 });
    await settle();
    assert.deepEqual(
      executor.sequenceBatches
        .slice(1)
        .map((b) => [b.instanceId, itemsOf(b)])
        .sort(),
      [
        ['a', ['s:1:resident']],
        ['b', ['t:0:new']],
      ],
    );
  });

  it('moves a session whose instance left the ready set to another instance with its checkpoint attached', async () => {
    const { executor, scheduler, completeAll } = setup({}, ['a', 'b']);
    const s0 = scheduler.submitSequenceItem('m', item('s', 0, samples(7)), { timeoutMs: 10_000 });
    await settle();
    completeAll();
    await s0;
    executor.crash('a');
    const s1 = scheduler.submitSequenceItem('m', item('s', 1, samples(1)), { timeoutMs: 10_000 });
    await settle();
    const moved = executor.sequenceBatches[1]!;
    assert.equal(moved.instanceId, 'b');
    const state = moved.batch.items[0]!.state;
    assert.equal(state.kind, 'attached');
    assert.equal(state.kind === 'attached' && decodeSum(state.bytes), 7);
    completeAll();
    assert.equal(sumOf(await s1), 8);
  });

  it('reruns the items of a batch lost with its instance elsewhere from the checkpoint, applying each once', async () => {
    const { executor, scheduler, completeAll, metrics } = setup({}, ['a', 'b']);
    const s0 = scheduler.submitSequenceItem('m', item('s', 0, samples(5)), { timeoutMs: 10_000 });
    await settle();
    completeAll();
    await s0;
    const s1 = scheduler.submitSequenceItem('m', item('s', 1, samples(10)), { timeoutMs: 10_000 });
    const s2 = scheduler.submitSequenceItem('m', item('s', 2, samples(100)), { timeoutMs: 10_000 });
    await settle();
    assert.deepEqual(itemsOf(executor.sequenceBatches[1]!), ['s:1:resident']);
    executor.crash('a');
    await settle();
    assert.equal(executor.sequenceBatches[1]!.status, 'lost');
    assert.deepEqual([executor.sequenceBatches[2]!.instanceId, itemsOf(executor.sequenceBatches[2]!)], ['b', ['s:1:attached']]);
    completeAll();
    await settle();
    assert.deepEqual(itemsOf(executor.sequenceBatches[3]!), ['s:2:resident']);
    completeAll();
    assert.deepEqual([sumOf(await s1), sumOf(await s2)], [15, 115]);
    assert.equal(await metricValue(metrics, 'voxmux_scheduler_retries_total', { model: 'm' }), 1);
  });

  it('reruns the items of a lost batch each in a batch of its own, so an item that kills its instance fails alone', async () => {
    const { clock, executor, scheduler, completeAll } = setup({ maxQueueDelayMs: 10 }, ['a'], { maxRunningBatchesPerInstance: 4 });
    const firsts = ['p', 'q'].map((id) => scheduler.submitSequenceItem('m', item(id, 0, samples(1)), { timeoutMs: 10_000 }));
    clock.advance(10);
    await settle();
    completeAll();
    await Promise.all(firsts);
    executor.setReady('m', ['a', 'b']);
    const seconds = ['p', 'q'].map((id) => scheduler.submitSequenceItem('m', item(id, 1, samples(10)), { timeoutMs: 10_000 }));
    clock.advance(10);
    await settle();
    assert.deepEqual(itemsOf(executor.sequenceBatches[1]!), ['p:1:resident', 'q:1:resident']);
    executor.crash('a');
    await settle();
    const reruns = executor.runningSequenceBatches();
    assert.deepEqual(
      reruns.map((b) => [b.instanceId, itemsOf(b)]),
      [
        ['b', ['p:1:attached']],
        ['b', ['q:1:attached']],
      ],
    );
    completeAll();
    assert.deepEqual((await Promise.all(seconds)).map(sumOf), [11, 11]);
  });

  it('tells the instance to drop a state it made after the deadline passed, and runs the next item from the checkpoint', async () => {
    const { clock, executor, scheduler, completeAll } = setup({ sessionIdleTimeoutMs: 1000 });
    const s0 = scheduler.submitSequenceItem('m', item('s', 0, samples(5)), { timeoutMs: 10_000 });
    await settle();
    completeAll();
    await s0;
    const late = scheduler.submitSequenceItem('m', item('s', 1, samples(10)), { timeoutMs: 100 });
    await settle();
    clock.advance(100); // the deadline passes while the item runs on 'a'
    await assert.rejects(late, { code: 'deadline_exceeded' });
    completeAll(); // 'a' answers after all: it holds a state the session does not have
    await settle();
    assert.deepEqual(executor.endedSessions, [{ instanceId: 'a', sessionIds: ['s'] }]);
    const next = scheduler.submitSequenceItem('m', item('s', 2, samples(100)), { timeoutMs: 10_000 });
    await settle();
    assert.deepEqual(itemsOf(executor.sequenceBatches[2]!), ['s:2:attached']);
    completeAll();
    assert.equal(sumOf(await next), 105, 'the late item is not in the state');
  });

  it('reruns an item attached when the instance answers session_state_missing for resident state', async () => {
    const { executor, scheduler, completeAll } = setup();
    const s0 = scheduler.submitSequenceItem('m', item('s', 0, samples(4)), { timeoutMs: 10_000 });
    await settle();
    completeAll();
    await s0;
    executor.forgetResident('a');
    const s1 = scheduler.submitSequenceItem('m', item('s', 1, samples(1)), { timeoutMs: 10_000 });
    await settle();
    completeAll(); // answers session_state_missing
    await settle();
    assert.deepEqual(executor.sequenceBatches.map(itemsOf), [['s:0:new'], ['s:1:resident'], ['s:1:attached']]);
    completeAll();
    assert.equal(sumOf(await s1), 5);
  });

  it('fails an item on its per-item error and keeps the session usable with its state unchanged', async () => {
    const { executor, scheduler, completeAll, metrics } = setup();
    const s0 = scheduler.submitSequenceItem('m', item('s', 0, samples(3)), { timeoutMs: 10_000 });
    await settle();
    completeAll();
    await s0;
    const s1 = scheduler.submitSequenceItem('m', item('s', 1, samples(50)), { timeoutMs: 10_000 });
    await settle();
    const [seen] = executor.runningSequenceBatches();
    executor.completeSequence(seen!, [
      { requestId: seen!.batch.items[0]!.requestId, ok: false, error: errors.invalidAudio({ reason: 'noise' }) },
    ]);
    await assert.rejects(s1, { code: 'invalid_audio' });
    const s2 = scheduler.submitSequenceItem('m', item('s', 2, samples(1)), { timeoutMs: 10_000 });
    await settle();
    completeAll();
    assert.equal(sumOf(await s2), 4);
    assert.equal(await metricValue(metrics, 'voxmux_scheduler_sequence_items_total', { model: 'm', outcome: 'invalid_audio' }), 1);
  });

  it('returns the cached result for the last completed seq, the same promise for a pending one, and rejects gaps and old numbers', async () => {
    const { executor, scheduler, completeAll } = setup();
    const s0 = scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    await settle();
    completeAll();
    const first = await s0;
    assert.deepEqual(await scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 }), first);
    assert.equal(executor.sequenceBatches.length, 1, 'the cached result does not run again');
    const s1 = scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 10_000 });
    assert.equal(scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 10_000 }), s1);
    await assert.rejects(
      scheduler.submitSequenceItem('m', item('s', 4), { timeoutMs: 10_000 }),
      (e: Error & { code: string; details: unknown }) => {
        assert.equal(e.code, 'sequence_gap');
        assert.equal(e.message, 'Expected sequence number 2: got 4');
        assert.deepEqual(e.details, { sessionId: 's', expectedSeq: 2, seq: 4 });
        return true;
      },
    );
    await settle();
    completeAll();
    await s1;
    await assert.rejects(scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 }), {
      code: 'sequence_out_of_order',
      kind: 'invalid_argument',
    });
    assert.equal(executor.sequenceBatches.length, 2);
  });

  it('fails an item whose state is over MAX_STATE_BYTES and keeps the checkpoint', async () => {
    const { executor, scheduler, completeAll } = setup();
    const s0 = scheduler.submitSequenceItem('m', item('s', 0, samples(9)), { timeoutMs: 10_000 });
    await settle();
    completeAll();
    await s0;
    const s1 = scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 10_000 });
    await settle();
    const [seen] = executor.runningSequenceBatches();
    executor.completeSequence(seen!, [
      { requestId: seen!.batch.items[0]!.requestId, ok: true, output: {}, state: new Uint8Array((1 << 20) + 1) },
    ]);
    await assert.rejects(s1, { code: 'state_too_large', kind: 'internal' });
    const s2 = scheduler.submitSequenceItem('m', item('s', 2, samples(1)), { timeoutMs: 10_000 });
    await settle();
    const next = executor.runningSequenceBatches()[0]!.batch.items[0]!.state;
    assert.equal(next.kind, 'attached', 'the instance state is not trusted after an unrecorded run');
    completeAll();
    assert.equal(sumOf(await s2), 10);
  });

  it('expires an idle session after sessionIdleTimeoutMs on the clock, tells its instance and answers session_expired later', async () => {
    const { clock, executor, scheduler, completeAll, metrics } = setup({ sessionIdleTimeoutMs: 1000 });
    const s0 = scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    await settle();
    clock.advance(500);
    completeAll();
    await s0;
    clock.advance(999);
    assert.equal(scheduler.stats().models.m!.sessions, 1);
    clock.advance(1);
    assert.equal(scheduler.stats().models.m!.sessions, 0);
    assert.deepEqual(executor.endedSessions, [{ instanceId: 'a', sessionIds: ['s'] }]);
    assert.equal(await metricValue(metrics, 'voxmux_scheduler_sessions_expired_total', { model: 'm' }), 1);
    await assert.rejects(scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 10_000 }), {
      code: 'session_expired',
      kind: 'not_found',
    });
  });

  it('does not expire a session while an item of it is queued or running', async () => {
    const { clock, scheduler, completeAll } = setup({ sessionIdleTimeoutMs: 1000 });
    const s0 = scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 60_000 });
    await settle();
    clock.advance(5000);
    assert.equal(scheduler.stats().models.m!.sessions, 1);
    completeAll();
    await s0;
    clock.advance(1000);
    assert.equal(scheduler.stats().models.m!.sessions, 0);
  });

  it('ends a session after its queued items finish and tells the instance holding it', async () => {
    const { executor, scheduler, completeAll } = setup();
    const s0 = scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    const s1 = scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 10_000 });
    let isEnded = false;
    const ended = scheduler.endSession('m', 's').then(() => (isEnded = true));
    await assert.rejects(scheduler.submitSequenceItem('m', item('s', 2), { timeoutMs: 10_000 }), { code: 'session_not_found' });
    await settle();
    completeAll();
    await settle();
    assert.equal(isEnded, false);
    completeAll();
    await Promise.all([s0, s1, ended]);
    assert.deepEqual(executor.endedSessions, [{ instanceId: 'a', sessionIds: ['s'] }]);
    assert.equal(scheduler.stats().sessions, 0);
  });

  it('drops a queued item at its deadline or when its caller aborts, and refuses items beyond maxQueuedRequests', async () => {
    const { clock, executor, scheduler, completeAll } = setup({}, ['a'], { maxQueuedRequests: 2 });
    const s0 = scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    await settle(); // s:0 runs; the instance is busy
    const s1 = scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 100 });
    const controller = new AbortController();
    const t0 = scheduler.submitSequenceItem('m', item('t', 0), { timeoutMs: 10_000, signal: controller.signal });
    await assert.rejects(scheduler.submitSequenceItem('m', item('u', 0), { timeoutMs: 10_000 }), { code: 'queue_full' });
    controller.abort();
    await assert.rejects(t0, { code: 'client_disconnected' });
    clock.advance(100);
    await assert.rejects(s1, { code: 'deadline_exceeded' });
    assert.equal(scheduler.stats().models.m!.queued, 0);
    completeAll();
    await s0;
    await settle();
    assert.equal(executor.sequenceBatches.length, 1, 'dropped items never run');
    // The dropped seq 1 is consumed: its outcome is replayed, and the session continues at 2.
    await assert.rejects(scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 10_000 }), { code: 'deadline_exceeded' });
    const s2 = scheduler.submitSequenceItem('m', item('s', 2), { timeoutMs: 10_000 });
    await settle();
    completeAll();
    assert.equal(sumOf(await s2), 1 + 3);
  });

  it('dispatches high-priority sessions first when a batch cannot take every session', async () => {
    const { executor, scheduler, completeAll } = setup({ maxBatchSize: 2 });
    const a0 = scheduler.submitSequenceItem('m', item('busy', 0), { timeoutMs: 10_000 });
    await settle(); // the instance is busy with 'busy'
    for (const s of ['n1', 'n2']) void scheduler.submitSequenceItem('m', item(s, 0), { timeoutMs: 10_000 });
    void scheduler.submitSequenceItem('m', item('h1', 0), { timeoutMs: 10_000, priority: 'high' });
    completeAll();
    await a0;
    await settle();
    assert.deepEqual(itemsOf(executor.sequenceBatches[1]!), ['h1:0:new', 'n1:0:new']);
  });

  it('waits maxQueueDelayMs for a fuller batch unless dispatchWhenIdle and the instance idles', async () => {
    const { clock, executor, scheduler } = setup({ maxQueueDelayMs: 10 });
    void scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    await settle();
    assert.equal(executor.sequenceBatches.length, 0);
    clock.advance(10);
    await settle();
    assert.equal(executor.sequenceBatches.length, 1);
    const idle = setup({ maxQueueDelayMs: 10, dispatchWhenIdle: true });
    void idle.scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    await settle();
    assert.equal(idle.executor.sequenceBatches.length, 1);
  });

  it('runs 50 sessions of 20 items over 3 instances with one crashed midway: every sum as undisturbed, in order, each item applied once', async () => {
    const { executor, scheduler, completeAll } = setup({ maxBatchSize: 8 }, ['a', 'b', 'c'], { maxRunningBatchesPerInstance: 2 });
    const sessions = Array.from({ length: 50 }, (_, i) => `s${i}`);
    const audioOf = (s: number, seq: number) => samples(s + 1, seq * 3, 7);
    const results = new Map<string, Promise<SequenceResult>[]>();
    for (let seq = 0; seq < 20; seq++) {
      sessions.forEach((id, s) => {
        const list = results.get(id) ?? [];
        list.push(scheduler.submitSequenceItem('m', item(id, seq, audioOf(s, seq), seq === 19), { timeoutMs: 1_000_000 }));
        results.set(id, list);
      });
    }
    let rounds = 0;
    let hasCrashed = false;
    for (;;) {
      await settle();
      if (!hasCrashed && rounds === 6) {
        assert.ok(executor.runningSequenceBatches().some((b) => b.instanceId === 'b'));
        executor.crash('b');
        hasCrashed = true;
        await settle();
      }
      if (completeAll() === 0) break;
      rounds += 1;
    }
    assert.ok(hasCrashed);
    // Sums equal the undisturbed expectation.
    for (const [s, id] of sessions.entries()) {
      let expected = 0;
      const sums = (await Promise.all(results.get(id)!)).map(sumOf);
      sums.forEach((sum, seq) => {
        expected += audioOf(s, seq).reduce((a, b) => a + b, 0);
        assert.equal(sum, expected, `${id}:${seq}`);
      });
    }
    // Each (session, seq) ran exactly once, not counting runs lost with their instance, and in order.
    const runs = new Map<string, number>();
    const order = new Map<string, number[]>();
    for (const b of executor.sequenceBatches) {
      if (b.status !== 'completed') continue;
      for (const i of b.batch.items) {
        const key = `${i.sessionId}:${i.seq}`;
        // A resident rerun after session_state_missing is a refused run, not an applied one.
        runs.set(key, (runs.get(key) ?? 0) + 1);
        order.set(i.sessionId, [...(order.get(i.sessionId) ?? []), i.seq]);
      }
    }
    assert.equal(runs.size, 50 * 20);
    assert.ok([...runs.values()].every((n) => n === 1));
    for (const seqs of order.values())
      assert.deepEqual(
        seqs,
        [...seqs].sort((x, y) => x - y),
      );
    assert.ok(executor.sequenceBatches.some((b) => b.status === 'lost'));
    assert.deepEqual({ queued: scheduler.stats().queued, running: scheduler.stats().running }, { queued: 0, running: 0 });
  });

  it('counts queued and running items and sessions in stats()', async () => {
    const { scheduler } = setup({}, ['a']);
    void scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    void scheduler.submitSequenceItem('m', item('s', 1), { timeoutMs: 10_000 });
    void scheduler.submitSequenceItem('m', item('t', 0), { timeoutMs: 10_000 });
    await settle();
    const stats = scheduler.stats();
    assert.deepEqual(
      { queued: stats.models.m!.queued, running: stats.models.m!.running, sessions: stats.models.m!.sessions },
      { queued: 2, running: 1, sessions: 2 },
    );
  });

  it('keeps the requests queued and running gauges equal to stats() when a delayed sequence batch is dispatched by its timer', async () => {
    const { clock, scheduler, metrics, executor } = setup({ maxQueueDelayMs: 10 }, ['a']);
    void scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    await settle();
    assert.equal(executor.runningSequenceBatches().length, 0, 'the batch waits for its delay');
    assert.equal(await metricValue(metrics, 'voxmux_scheduler_requests_queued', { model: 'm' }), 1);
    clock.advance(10);
    await settle();
    assert.equal(executor.runningSequenceBatches().length, 1);
    const stats = scheduler.stats().models.m!;
    assert.deepEqual(
      {
        queued: await metricValue(metrics, 'voxmux_scheduler_requests_queued', { model: 'm' }),
        running: await metricValue(metrics, 'voxmux_scheduler_requests_running', { model: 'm' }),
      },
      { queued: stats.queued, running: stats.running },
    );
    assert.deepEqual({ queued: stats.queued, running: stats.running }, { queued: 0, running: 1 });
  });

  it('keeps the requests gauges equal to stats() when a sequence batch is dispatched as an instance becomes ready', async () => {
    const { scheduler, metrics, executor } = setup({}, ['a']);
    executor.setReady('m', []);
    void scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    await settle();
    assert.equal(await metricValue(metrics, 'voxmux_scheduler_requests_queued', { model: 'm' }), 1);
    executor.setReady('m', ['a']);
    await settle();
    assert.equal(executor.runningSequenceBatches().length, 1);
    assert.deepEqual(
      {
        queued: await metricValue(metrics, 'voxmux_scheduler_requests_queued', { model: 'm' }),
        running: await metricValue(metrics, 'voxmux_scheduler_requests_running', { model: 'm' }),
      },
      { queued: 0, running: 1 },
    );
  });

  it("observes each sequence item's queue wait in voxmux_scheduler_queue_wait_seconds, as it counts them in the queued gauge", async () => {
    const { clock, scheduler, metrics, completeAll } = setup({ maxQueueDelayMs: 10 }, ['a']);
    const first = scheduler.submitSequenceItem('m', item('s', 0), { timeoutMs: 10_000 });
    clock.advance(4);
    const second = scheduler.submitSequenceItem('m', item('t', 0), { timeoutMs: 10_000 });
    clock.advance(6);
    await settle();
    assert.equal(completeAll(), 1);
    await Promise.all([first, second]);
    const wait = (await metrics.queueWait.get()).values.filter((v) => v.labels.model === 'm');
    const valueOf = (suffix: string) => wait.find((v) => v.metricName === `voxmux_scheduler_queue_wait_seconds${suffix}`)?.value;
    assert.equal(valueOf('_count'), 2);
    assert.ok(Math.abs((valueOf('_sum') ?? NaN) - 0.016) < 1e-9, String(valueOf('_sum')));
  });
});
