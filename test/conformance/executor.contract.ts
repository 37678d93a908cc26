/**
 * The Executor contract: what the scheduler may rely on from any Executor (src/scheduler/executor.ts).
 * One suite, run against the FakeExecutor and against the real supervisor, so that the double the
 * scheduler's tests use cannot drift from the implementation it stands in for.
 *
 * The harness hides how each implementation makes instances ready and finishes batches: the fake's
 * batches wait until the harness completes them in `drive()`, the supervisor's finish by themselves.
 * Every case therefore sends its batches first, then calls `drive()`, then awaits them.
 */
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { ServiceError } from '../../src/core/errors.js';
import type { BatchItemOutcome, Executor, TranscriptionRequest } from '../../src/scheduler/index.js';

export interface ContractModel {
  /** Instances of the model. @default 1 */
  instances?: number;
  /**
   * Each instance crashes when a batch starts after it has finished this many batches; the batches
   * it holds then are lost with it. Unset: it never crashes.
   */
  crashAfterBatches?: number;
  /** Each instance declares these voices in its catalogue when it loads. @default none */
  voices?: readonly string[];
}

export interface ExecutorHarness {
  readonly executor: Executor;
  /** Makes every instance of every model ready; resolves when they are. */
  start(): Promise<void>;
  /** Lets every batch sent so far run to its end (finish, or crash as `crashAfterBatches` says). */
  drive(): void;
  /** The text of an ok result for this audio. */
  expectedText(audio: Int16Array): string;
  /** Stops every instance; called after each case, passed or failed. */
  close(): Promise<void>;
}

/** Builds the executor with the given models; none of their instances is ready until `start()`. */
export type MakeHarness = (models: Record<string, ContractModel>) => ExecutorHarness;

export type ContractCase =
  | 'unknown-model'
  | 'starting-then-ready'
  | 'ready-instances-per-model'
  | 'listeners'
  | 'batch-outcomes'
  | 'concurrent-batches'
  | 'crash-fails-unfinished-batches'
  | 'crash-rejects-later-batches'
  | 'catalog';

export interface ContractOptions {
  /** Cases an implementation is known to fail, each with the reason: they run, and are reported as todo. */
  todo?: Partial<Record<ContractCase, string>>;
}

const SAMPLE_RATE_HZ = 16_000;
const CASE_TIMEOUT_MS = 10_000;

type Request = TranscriptionRequest & { requestId: string };

/** Distinct, deterministic 16-bit audio per seed. */
function request(requestId: string, samples: number, seed: number): Request {
  const audio = new Int16Array(samples);
  for (let i = 0; i < samples; i++) audio[i] = Math.round(Math.sin((i + seed * 97) * 0.013 * seed) * 16_000);
  return { requestId, audio, language: null, prompt: null, wordTimestamps: false };
}

function codeOf(err: unknown): string | undefined {
  return (err as Partial<ServiceError>).code;
}

export function describeExecutorContract(name: string, makeHarness: MakeHarness, options: ContractOptions = {}): void {
  function open(t: TestContext, models: Record<string, ContractModel>): ExecutorHarness {
    const harness = makeHarness(models);
    t.after(() => harness.close());
    return harness;
  }

  function contractCase(key: ContractCase, title: string, fn: (t: TestContext) => void | Promise<void>): void {
    it(title, { timeout: CASE_TIMEOUT_MS, todo: options.todo?.[key] }, fn);
  }

  function assertEchoes(harness: ExecutorHarness, outcomes: readonly BatchItemOutcome[], requests: readonly Request[]): void {
    assert.deepEqual(
      outcomes.map((o) => o.requestId),
      requests.map((r) => r.requestId),
    );
    outcomes.forEach((outcome, i) => {
      const audio = requests[i]!.audio;
      assert.ok(outcome.ok, `request ${outcome.requestId} failed: ${outcome.ok ? '' : outcome.error.code}`);
      assert.equal(outcome.result.text, harness.expectedText(audio));
      assert.ok(Math.abs(outcome.result.durationS - audio.length / SAMPLE_RATE_HZ) < 1e-9, `durationS ${outcome.result.durationS}`);
    });
  }

  describe(`Executor contract: ${name}`, () => {
    contractCase('unknown-model', 'reports a model it does not run as unavailable, with no ready instances', (t) => {
      const { executor } = open(t, { m: {} });
      assert.equal(executor.availability('not-a-model'), 'unavailable');
      assert.deepEqual(executor.readyInstances('not-a-model'), []);
    });

    contractCase('starting-then-ready', 'reports a model as starting before its instance is ready, and ready once it is', async (t) => {
      const harness = open(t, { m: {} });
      const { executor } = harness;
      assert.equal(executor.availability('m'), 'starting');
      assert.deepEqual(executor.readyInstances('m'), []);
      await harness.start();
      assert.equal(executor.availability('m'), 'ready');
      assert.equal(executor.readyInstances('m').length, 1);
    });

    contractCase('ready-instances-per-model', 'lists every ready instance of a model, and only instances of that model', async (t) => {
      const harness = open(t, { m: { instances: 2 }, n: {} });
      const { executor } = harness;
      await harness.start();
      const m = executor.readyInstances('m').map((v) => v.instanceId);
      const n = executor.readyInstances('n').map((v) => v.instanceId);
      assert.equal(new Set(m).size, 2, `instances of m: ${m.join(', ')}`);
      assert.equal(n.length, 1);
      assert.ok(!m.includes(n[0]!), 'an instance listed for two models');
      assert.equal(executor.availability('m'), 'ready');
      assert.equal(executor.availability('n'), 'ready');
    });

    contractCase('listeners', 'calls instance listeners when an instance becomes ready, and not once they are removed', async (t) => {
      const harness = open(t, { m: {} });
      const { executor } = harness;
      const readyCountsSeen: number[] = [];
      let removedCalls = 0;
      executor.onInstancesChanged(() => readyCountsSeen.push(executor.readyInstances('m').length));
      const remove = executor.onInstancesChanged(() => (removedCalls += 1));
      remove();
      await harness.start();
      assert.ok(readyCountsSeen.includes(1), `ready counts seen by the listener: [${readyCountsSeen.join(', ')}]`);
      assert.equal(removedCalls, 0);
    });

    contractCase(
      'batch-outcomes',
      'resolves a batch with one outcome per request, in request order, under the request ids given',
      async (t) => {
        const harness = open(t, { m: {} });
        const { executor } = harness;
        await harness.start();
        const instanceId = executor.readyInstances('m')[0]!.instanceId;
        const requests = [request('z-first', 480, 1), request('a-second', 160, 2), request('m-third', 320, 3)];
        const running = executor.runBatch(instanceId, { batchId: 'b1', requests });
        harness.drive();
        assertEchoes(harness, await running, requests);
      },
    );

    contractCase(
      'concurrent-batches',
      'resolves every batch sent to one instance while earlier ones still run, each with its own results',
      async (t) => {
        const harness = open(t, { m: {} });
        const { executor } = harness;
        await harness.start();
        const instanceId = executor.readyInstances('m')[0]!.instanceId;
        const batches = [0, 1, 2].map((b) => [
          request(`b${b}-r0`, 160 * (b + 1), 10 * b + 1),
          request(`b${b}-r1`, 80 * (b + 2), 10 * b + 2),
        ]);
        const running = batches.map((requests, b) => executor.runBatch(instanceId, { batchId: `b${b}`, requests }));
        harness.drive();
        const outcomes = await Promise.all(running);
        outcomes.forEach((o, b) => assertEchoes(harness, o, batches[b]!));
      },
    );

    contractCase(
      'crash-fails-unfinished-batches',
      'fails every unfinished batch with instance_crashed when its instance crashes, and drops the instance from the ready set',
      async (t) => {
        const harness = open(t, { m: { crashAfterBatches: 1 } });
        const { executor } = harness;
        await harness.start();
        const instanceId = executor.readyInstances('m')[0]!.instanceId;
        const first = [request('before', 160, 1)];
        const finished = executor.runBatch(instanceId, { batchId: 'before', requests: first });
        harness.drive();
        assertEchoes(harness, await finished, first);

        const readySeen: string[][] = [];
        executor.onInstancesChanged(() => readySeen.push(executor.readyInstances('m').map((v) => v.instanceId)));
        const lost = [
          executor.runBatch(instanceId, { batchId: 'lost-1', requests: [request('lost-1', 160, 2)] }),
          executor.runBatch(instanceId, { batchId: 'lost-2', requests: [request('lost-2', 160, 3)] }),
        ];
        harness.drive();
        const settled = await Promise.allSettled(lost);
        assert.deepEqual(
          settled.map((s) => (s.status === 'rejected' ? codeOf(s.reason) : 'resolved')),
          ['instance_crashed', 'instance_crashed'],
        );
        assert.ok(!executor.readyInstances('m').some((v) => v.instanceId === instanceId), 'the crashed instance is still listed as ready');
        assert.ok(
          readySeen.some((ids) => !ids.includes(instanceId)),
          'no listener call saw the instance leave the ready set',
        );
        assert.notEqual(executor.availability('m'), 'ready');
      },
    );

    contractCase(
      'catalog',
      "lists the union of a model's instances' catalogues by name, none before an instance loaded, and none for other models",
      async (t) => {
        const harness = open(t, { m: { instances: 2, voices: ['alba', 'bruce'] }, n: {} });
        const { executor } = harness;
        assert.deepEqual(executor.catalog('m'), []);
        await harness.start();
        const entries = executor.catalog('m');
        assert.deepEqual(
          entries.map((e) => e.name),
          ['alba', 'bruce'],
        );
        for (const entry of entries) {
          assert.equal(entry.kind, 'voice');
          assert.ok(Number.isInteger(entry.sampleRate) && entry.sampleRate > 0, `sampleRate ${entry.sampleRate}`);
          assert.equal(typeof entry.language, 'string');
          assert.ok(entry.gender === null || typeof entry.gender === 'string');
        }
        assert.deepEqual(executor.catalog('n'), []);
        assert.deepEqual(executor.catalog('not-a-model'), []);
      },
    );

    contractCase('crash-rejects-later-batches', 'rejects a batch sent to an instance after it crashed with instance_crashed', async (t) => {
      const harness = open(t, { m: { crashAfterBatches: 0 } });
      const { executor } = harness;
      await harness.start();
      const instanceId = executor.readyInstances('m')[0]!.instanceId;
      const lost = executor.runBatch(instanceId, { batchId: 'lost', requests: [request('lost', 160, 1)] });
      harness.drive();
      await assert.rejects(lost, { code: 'instance_crashed' });
      const late = executor.runBatch(instanceId, { batchId: 'late', requests: [request('late', 160, 2)] });
      harness.drive();
      await assert.rejects(late, { code: 'instance_crashed' });
    });
  });
}
