import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import type { Clock } from '../../src/core/clock.js';
import { createSeededRandom, startStep, type StepOptions, type StepSamples } from './load-driver.js';
import { summarizeRep } from './report.js';
import { RequestAbort, type RequestContext, type RequestOutcome, type Workload } from './workload.js';

const info = { kind: 'test', endpoint: 'memory:', model: 'm', isStreaming: false, inputCount: 1, settings: {} };

/** A server double with `slots` parallel slots and a FIFO queue; each request holds a slot for `serviceMs`. */
function slotServer(clock: Clock, options: { slots: number; serviceMs: number; failWith?: string }) {
  let busy = 0;
  let maxInFlight = 0;
  let inFlight = 0;
  const queue: Array<() => void> = [];
  const release = (): void => {
    busy -= 1;
    queue.shift()?.();
  };
  const workload: Workload = {
    info,
    makeRequest(ctx: RequestContext): Promise<RequestOutcome> {
      const startMs = clock.nowMs();
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return new Promise((resolve) => {
        let timer: { cancel(): void } | undefined;
        let isDone = false;
        const finish = (outcome: Partial<RequestOutcome>): void => {
          if (isDone) return;
          isDone = true;
          inFlight -= 1;
          resolve({ startMs, endMs: clock.nowMs(), audioSeconds: 2, ...outcome });
        };
        const begin = (): void => {
          busy += 1;
          timer = clock.setTimeout(() => {
            release();
            finish(options.failWith === undefined ? {} : { status: 500, errorCode: options.failWith });
          }, options.serviceMs);
        };
        ctx.signal.addEventListener('abort', () => {
          if (timer !== undefined) {
            timer.cancel();
            release();
          } else {
            queue.splice(queue.indexOf(begin), 1);
          }
          const reason: unknown = ctx.signal.reason;
          finish({ errorCode: reason instanceof RequestAbort ? reason.reason : 'aborted' });
        });
        if (busy < options.slots) begin();
        else queue.push(begin);
      });
    },
  };
  return { workload, maxInFlight: () => maxInFlight };
}

/** Never answers: only the timeout or an interruption ends a request. */
function hangingWorkload(clock: Clock): Workload {
  return {
    info,
    makeRequest(ctx) {
      const startMs = clock.nowMs();
      return new Promise((resolve) => {
        ctx.signal.addEventListener('abort', () => {
          const reason: unknown = ctx.signal.reason;
          resolve({ startMs, endMs: clock.nowMs(), errorCode: reason instanceof RequestAbort ? reason.reason : 'aborted' });
        });
      });
    },
  };
}

const base: StepOptions = {
  mode: 'closed',
  level: 1,
  warmupMs: 0,
  durationMs: 1000,
  timeoutMs: 10_000,
  maxRequests: 100_000,
  maxOutstanding: 1000,
  seed: 1,
};

async function drive(clock: FakeClock, done: Promise<StepSamples>, tickMs = 5): Promise<StepSamples> {
  let isDone = false;
  void done.then(() => {
    isDone = true;
  });
  await settle();
  for (let i = 0; i < 1_000_000 && !isDone; i += 1) {
    clock.advance(tickMs);
    await settle();
  }
  return done;
}

const client = { cpuPercent: 0, eventLoopDelayP99Ms: 0 };

describe('startStep closed loop', () => {
  it('keeps `level` requests outstanding and issues none after the window', async () => {
    const clock = new FakeClock();
    const server = slotServer(clock, { slots: 100, serviceMs: 100 });
    const step = startStep({ ...base, level: 2 }, { workload: server.workload, clock });
    const samples = await drive(clock, step.done);
    assert.equal(samples.issued, 20);
    assert.equal(samples.outcomes.length, 20);
    assert.equal(server.maxInFlight(), 2);
    assert.ok(samples.outcomes.every((o) => o.startMs < samples.windowEndMs));
    const rep = summarizeRep(samples, { rep: 1, client }).result;
    assert.equal(rep.requests, 20);
    assert.equal(rep.requestsPerSecond, 20);
    assert.equal(rep.audioSecondsPerSecond, 40);
    assert.equal(rep.latencyMs?.p50, 100);
  });

  it("measures min(c, N)/S against N slots of service time S, and Little's law holds", async () => {
    for (const concurrency of [1, 2, 4, 8]) {
      const clock = new FakeClock();
      const server = slotServer(clock, { slots: 2, serviceMs: 100 });
      const step = startStep({ ...base, level: concurrency, warmupMs: 500, durationMs: 2000 }, { workload: server.workload, clock });
      const rep = summarizeRep(await drive(clock, step.done), { rep: 1, client }).result;
      const expectedRps = Math.min(concurrency, 2) / 0.1;
      assert.ok(Math.abs(rep.requestsPerSecond - expectedRps) / expectedRps <= 0.05, `c=${concurrency}: ${rep.requestsPerSecond} req/s`);
      // Little's law for the closed loop: concurrency = throughput x mean latency.
      const littles = (rep.requestsPerSecond * (rep.latencyMs?.mean ?? 0)) / 1000;
      assert.ok(Math.abs(littles - concurrency) / concurrency <= 0.05, `c=${concurrency}: L=${littles}`);
    }
  });

  it('stops issuing at maxRequests', async () => {
    const clock = new FakeClock();
    const server = slotServer(clock, { slots: 100, serviceMs: 10 });
    const step = startStep({ ...base, level: 2, maxRequests: 5 }, { workload: server.workload, clock });
    const samples = await drive(clock, step.done);
    assert.equal(samples.issued, 5);
    assert.ok(clock.nowMs() < 1000);
  });

  it('aborts a request after timeoutMs and records it as a timeout', async () => {
    const clock = new FakeClock();
    const step = startStep({ ...base, timeoutMs: 300 }, { workload: hangingWorkload(clock), clock });
    const samples = await drive(clock, step.done);
    assert.equal(samples.issued, 4);
    assert.deepEqual(
      samples.outcomes.map((o) => [o.startMs, o.endMs, o.errorCode]),
      [
        [0, 300, 'timeout'],
        [300, 600, 'timeout'],
        [600, 900, 'timeout'],
        [900, 1200, 'timeout'],
      ],
    );
    const rep = summarizeRep(samples, { rep: 1, client }).result;
    assert.equal(rep.requests, 3);
    assert.deepEqual(rep.errorsByCode, { timeout: 3 });
    assert.equal(rep.late.requests, 1);
    assert.equal(rep.requestsPerSecond, 0);
  });

  it('abandons requests still in flight abandonAfterMs after the window, and waits for them without it', async () => {
    const clock = new FakeClock();
    const step = startStep({ ...base, level: 3, abandonAfterMs: 200 }, { workload: hangingWorkload(clock), clock });
    const samples = await drive(clock, step.done);
    assert.deepEqual(
      samples.outcomes.map((o) => [o.startMs, o.endMs, o.errorCode]),
      [
        [0, 1200, 'abandoned'],
        [0, 1200, 'abandoned'],
        [0, 1200, 'abandoned'],
      ],
    );
    const rep = summarizeRep(samples, { rep: 1, client }).result;
    assert.equal(rep.requests, 0, 'abandoned requests are not measured');
    assert.deepEqual(rep.late.errorsByCode, { abandoned: 3 });

    const waiting = new FakeClock();
    const patient = startStep({ ...base, level: 3, timeoutMs: 5000 }, { workload: hangingWorkload(waiting), clock: waiting });
    const waited = await drive(waiting, patient.done);
    assert.deepEqual(
      waited.outcomes.map((o) => [o.endMs, o.errorCode]),
      [
        [5000, 'timeout'],
        [5000, 'timeout'],
        [5000, 'timeout'],
      ],
    );
  });

  it('ends promptly when interrupted, aborting requests in flight', async () => {
    const clock = new FakeClock();
    const controller = new AbortController();
    const step = startStep(
      { ...base, level: 3, durationMs: 60_000 },
      { workload: hangingWorkload(clock), clock, signal: controller.signal },
    );
    clock.advance(50);
    await settle();
    assert.equal(step.progress().inFlight, 3);
    controller.abort();
    await settle();
    const samples = await step.done;
    assert.equal(samples.isInterrupted, true);
    assert.equal(samples.issued, 3);
    assert.deepEqual(
      samples.outcomes.map((o) => o.errorCode),
      ['interrupted', 'interrupted', 'interrupted'],
    );
    assert.equal(samples.windowEndMs, 50);
    const rep = summarizeRep(samples, { rep: 1, client }).result;
    assert.equal(rep.windowMs, 50);
    assert.equal(rep.requests, 0, 'interrupted requests are not measured');
    assert.deepEqual(rep.late.errorsByCode, { interrupted: 3 });
  });
});

describe('startStep open loop', () => {
  it('offers Poisson arrivals at the given rate, reproducibly for a seed', async () => {
    const counts: number[] = [];
    const starts: number[][] = [];
    for (const seed of [7, 7, 8]) {
      const clock = new FakeClock();
      const server = slotServer(clock, { slots: 1000, serviceMs: 20 });
      const step = startStep({ ...base, mode: 'open', level: 100, durationMs: 2000, seed }, { workload: server.workload, clock });
      const samples = await drive(clock, step.done, 1);
      counts.push(samples.issued);
      starts.push(samples.outcomes.map((o) => o.startMs));
      // Latency counts from the scheduled arrival.
      assert.ok(samples.outcomes.every((o) => Math.abs(o.endMs - o.startMs - 20) <= 1));
    }
    assert.deepEqual(starts[0], starts[1]);
    assert.notDeepEqual(starts[0], starts[2]);
    for (const count of counts) assert.ok(count > 150 && count < 250, `arrivals ${count}`);
  });

  it('drops arrivals beyond maxOutstanding instead of queueing them in the client', async () => {
    const clock = new FakeClock();
    const server = slotServer(clock, { slots: 1000, serviceMs: 1000 });
    const step = startStep(
      { ...base, mode: 'open', level: 50, durationMs: 2000, maxOutstanding: 5, seed: 3 },
      { workload: server.workload, clock },
    );
    const samples = await drive(clock, step.done, 1);
    assert.equal(server.maxInFlight(), 5);
    assert.ok(samples.droppedArrivals > 50, `dropped ${samples.droppedArrivals}`);
    assert.equal(samples.issued, samples.outcomes.length);
  });

  it('shows queueing collapse above capacity: throughput caps at N/S while latency grows', async () => {
    const clock = new FakeClock();
    const server = slotServer(clock, { slots: 2, serviceMs: 100 });
    const step = startStep({ ...base, mode: 'open', level: 40, durationMs: 3000, seed: 11 }, { workload: server.workload, clock });
    const rep = summarizeRep(await drive(clock, step.done, 2), { rep: 1, client }).result;
    assert.ok(Math.abs(rep.requestsPerSecond - 20) <= 1.5, `${rep.requestsPerSecond} req/s`);
    assert.ok((rep.latencyMs?.p95 ?? 0) > 1000, `p95 ${rep.latencyMs?.p95}`);
    assert.ok(rep.late.requests > 20);
  });
});

describe('createSeededRandom', () => {
  it('is deterministic for a seed and uniform on [0, 1)', () => {
    const a = createSeededRandom(42);
    const b = createSeededRandom(42);
    const values = Array.from({ length: 10_000 }, () => a());
    assert.deepEqual(
      values.slice(0, 5),
      Array.from({ length: 5 }, () => b()),
    );
    assert.ok(values.every((v) => v >= 0 && v < 1));
    const mean = values.reduce((s, v) => s + v, 0) / values.length;
    assert.ok(Math.abs(mean - 0.5) < 0.02);
  });
});
