import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkPlacement, cpuThreadsFor, GPU_INSTANCE_THREAD_CAPS, placeInstances } from './placement.js';

const base = { instances: 2, instancesPerGpu: 0, gpus: [] as number[], mpsActiveThreadPercentages: [] as number[] };

describe('placeInstances', () => {
  it('leaves instances unpinned on a node without GPUs', () => {
    assert.deepEqual(placeInstances(base, []), [
      { gpu: undefined, mpsActiveThreadPercentage: undefined },
      { gpu: undefined, mpsActiveThreadPercentage: undefined },
    ]);
  });

  it('spreads instances round-robin over every GPU of the node by default', () => {
    assert.deepEqual(
      placeInstances({ ...base, instances: 5 }, [0, 1, 2, 3]).map((p) => p.gpu),
      [0, 1, 2, 3, 0],
    );
  });

  it('gives MPS shares by the index on the GPU, not over all the instances (docs/operations.md)', () => {
    const placed = placeInstances({ ...base, instances: 5, mpsActiveThreadPercentages: [25, 75] }, [0, 1]);
    assert.deepEqual(
      placed.map((p) => [p.gpu, p.mpsActiveThreadPercentage]),
      [
        [0, 25],
        [1, 25],
        [0, 75],
        [1, 75],
        [0, 25],
      ],
    );
  });

  it('places instancesPerGpu on each of the model GPUs with MPS shares by index on the GPU', () => {
    const placed = placeInstances({ ...base, instancesPerGpu: 4, gpus: [2, 3], mpsActiveThreadPercentages: [25] }, [0, 1, 2, 3]);
    assert.equal(placed.length, 8);
    assert.deepEqual(
      placed.map((p) => p.gpu),
      [2, 3, 2, 3, 2, 3, 2, 3],
    );
    assert.ok(placed.every((p) => p.mpsActiveThreadPercentage === 25));
  });

  it('cycles differing MPS shares within each GPU', () => {
    const placed = placeInstances({ ...base, instancesPerGpu: 2, mpsActiveThreadPercentages: [60, 40] }, [0, 1]);
    assert.deepEqual(
      placed.map((p) => [p.gpu, p.mpsActiveThreadPercentage]),
      [
        [0, 60],
        [1, 60],
        [0, 40],
        [1, 40],
      ],
    );
  });

  it('falls back to instances when instancesPerGpu is set but there are no GPUs', () => {
    assert.equal(placeInstances({ ...base, instances: 3, instancesPerGpu: 4 }, []).length, 3);
  });

  it('ignores instancesPerGpu on a node without GPUs, also when the model lists GPUs', () => {
    // docs/config.md, models.<name>.instancesPerGpu: "Ignored on a node without GPUs." checkPlacement
    // accepts a model's gpus on such a node, and placement then pins instancesPerGpu x gpus instances
    // to GPUs the node does not have (CUDA_VISIBLE_DEVICES, a GPU the budget counts as held).
    const placed = placeInstances({ ...base, instances: 2, instancesPerGpu: 4, gpus: [0] }, []);
    assert.equal(placed.length, 2);
    assert.ok(placed.every((p) => p.gpu === undefined));
  });

  it('reports model GPUs the node does not have', () => {
    assert.deepEqual(checkPlacement('asr', { ...base, gpus: [0, 7] }, [0, 1]), [
      "models.asr.gpus: GPU 7 is not one of this node's GPUs (0, 1)",
    ]);
    assert.deepEqual(checkPlacement('asr', { ...base, gpus: [7] }, []), []);
  });
});

describe('cpuThreadsFor', () => {
  it('shares the cores evenly among GPU-pinned instances, at least one thread each', () => {
    assert.equal(cpuThreadsFor(0, true, 9, 16), 1);
    assert.equal(cpuThreadsFor(0, true, 4, 16), 4);
    assert.equal(cpuThreadsFor(0, true, 3, 16), 5);
    assert.equal(cpuThreadsFor(0, true, 40, 16), 1);
  });

  it('takes a configured count as it is, and leaves unpinned instances to the libraries', () => {
    assert.equal(cpuThreadsFor(6, true, 9, 16), 6);
    assert.equal(cpuThreadsFor(2, false, 0, 16), 2);
    assert.equal(cpuThreadsFor(0, false, 0, 16), undefined);
    assert.equal(cpuThreadsFor(0, false, 3, 16), undefined);
  });

  it("caps a GPU-pinned instance's share at its adapter's cap, and a configured count overrides the cap", () => {
    assert.equal(cpuThreadsFor(0, true, 1, 16, GPU_INSTANCE_THREAD_CAPS.sortformer), 1);
    assert.equal(cpuThreadsFor(0, true, 2, 16, 4), 4);
    assert.equal(cpuThreadsFor(0, true, 8, 16, 4), 2);
    assert.equal(cpuThreadsFor(3, true, 1, 16, 1), 3);
    assert.equal(cpuThreadsFor(0, false, 0, 16, 1), undefined);
  });
});
