import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../config/load.js';
import { modelReadiness, readyMessage } from './ready-message.js';

describe('readyMessage (#16)', () => {
  it('names the URL and each model with its instances', () => {
    assert.equal(
      readyMessage('http://127.0.0.1:8000', [{ model: 'pocketsphinx-en-us', instances: 2, readyInstances: 2 }]),
      'voxmux ready on http://127.0.0.1:8000: pocketsphinx-en-us (2 instances)',
    );
    assert.equal(
      readyMessage('http://[::1]:9000', [
        { model: 'a', instances: 1, readyInstances: 1 },
        { model: 'b', instances: 0, readyInstances: 0 },
      ]),
      'voxmux ready on http://[::1]:9000: a (1 instance), b (0 instances)',
    );
  });

  it('says how many instances are ready when some failed to start', () => {
    assert.equal(
      readyMessage('http://h:1', [{ model: 'm', instances: 3, readyInstances: 1 }]),
      'voxmux ready on http://h:1: m (1 of 3 instances ready)',
    );
  });
});

describe('modelReadiness', () => {
  it("counts each configured model's ready instances from the supervisor's snapshot", () => {
    const config = loadConfig({ file: { models: { a: { adapter: 'test', instances: 2 }, b: { adapter: 'test', instances: 1 } } } });
    assert.deepEqual(
      modelReadiness(config, [
        { model: 'a', state: 'ready' },
        { model: 'a', state: 'crashed' },
        { model: 'b', state: 'ready' },
      ]),
      [
        { model: 'a', instances: 2, readyInstances: 1 },
        { model: 'b', instances: 1, readyInstances: 1 },
      ],
    );
  });
});

describe('modelReadiness with instancesPerGpu', () => {
  it("says every instance is ready for the README's GPU config on one GPU (instancesPerGpu 1: one instance), not '1 of 2'", () => {
    const config = loadConfig({
      file: { supervisor: { gpus: [0] }, models: { parakeet: { adapter: 'parakeet', instancesPerGpu: 1 } } },
    });
    // The supervisor places 1 GPU x instancesPerGpu 1 = one instance, and it is ready.
    const models = modelReadiness(config, [{ model: 'parakeet', state: 'ready' }]);
    assert.equal(readyMessage('http://127.0.0.1:8000', models), 'voxmux ready on http://127.0.0.1:8000: parakeet (1 instance)');
  });
});
