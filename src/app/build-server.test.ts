import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gpuHealth } from './build-server.js';

describe('gpuHealth', () => {
  it('takes a GPU whose instances are all down out of rotation and names it', () => {
    const health = gpuHealth(
      [0, 1, 2],
      [
        { instanceId: 'a', gpu: 0, state: 'ready' },
        { instanceId: 'b', gpu: 1, state: 'crashed' },
        { instanceId: 'c', gpu: 1, state: 'restarting' },
        { instanceId: 'd', gpu: 0, state: 'crashed' },
      ],
    );
    assert.deepEqual(health, {
      '0': { isHealthy: true, instances: ['a', 'd'] },
      '1': { isHealthy: false, instances: ['b', 'c'] },
      '2': { isHealthy: true, instances: [] },
    });
  });

  it('is empty on a node without GPUs', () => {
    assert.deepEqual(gpuHealth([], [{ instanceId: 'a', gpu: null, state: 'ready' }]), {});
  });
});
