/** The Executor contract, run against the FakeExecutor the scheduler's tests use. */
import { FakeExecutor } from '../support/fake-executor.js';
import { describeExecutorContract, type ContractModel, type ExecutorHarness } from './executor.contract.js';

function fakeHarness(models: Record<string, ContractModel>): ExecutorHarness {
  const executor = new FakeExecutor(Object.fromEntries(Object.keys(models).map((model) => [model, []])));
  const modelOf = new Map<string, string>();
  const finishedBatches = new Map<string, number>();
  const crashed = new Set<string>();
  let driven = 0;
  return {
    executor,
    start() {
      for (const [model, spec] of Object.entries(models)) {
        const ids = Array.from({ length: spec.instances ?? 1 }, (_, i) => `${model}-${i}`);
        for (const id of ids) {
          modelOf.set(id, model);
          const voices = spec.voices ?? [];
          executor.setCatalog(
            model,
            id,
            voices.map((name) => ({
              name,
              kind: 'voice',
              language: 'en-US',
              sampleRate: 16_000,
              gender: null,
              description: `Fake voice ${name}`,
            })),
          );
        }
        executor.setReady(model, ids);
      }
      return Promise.resolve();
    },
    drive() {
      // An instance crashes when a batch starts after crashAfterBatches finished ones, as the real
      // host's test engine does; crash() also fails the batches queued behind that one.
      for (; driven < executor.batches.length; driven++) {
        const { instanceId } = executor.batches[driven]!;
        if (crashed.has(instanceId)) continue;
        const finished = finishedBatches.get(instanceId) ?? 0;
        const crashAfter = models[modelOf.get(instanceId) ?? '']?.crashAfterBatches;
        if (crashAfter !== undefined && finished >= crashAfter) {
          crashed.add(instanceId);
          executor.crash(instanceId);
          continue;
        }
        executor.complete(driven);
        finishedBatches.set(instanceId, finished + 1);
      }
    },
    expectedText: (audio) => `samples=${audio.length}`,
    close: () => Promise.resolve(),
  };
}

describeExecutorContract('FakeExecutor', fakeHarness);
