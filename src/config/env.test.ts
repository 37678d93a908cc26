import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { readProcessEnvironment } from './env.js';

const KEYS = ['MALLOC_MMAP_THRESHOLD_', 'VOXMUX_GATEWAY_MALLOC', 'VOXMUX_ENV_TEST_OTHER'];
const saved = Object.fromEntries(KEYS.map((key) => [key, process.env[key]]));

describe('readProcessEnvironment', () => {
  afterEach(() => {
    for (const key of KEYS) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
  });

  it('drops the malloc settings the launcher gave the gateway alone, and their marker, from what instances inherit', () => {
    process.env.MALLOC_MMAP_THRESHOLD_ = '65536';
    process.env.VOXMUX_GATEWAY_MALLOC = 'MALLOC_MMAP_THRESHOLD_';
    process.env.VOXMUX_ENV_TEST_OTHER = 'kept';
    const env = readProcessEnvironment();
    assert.equal(env.MALLOC_MMAP_THRESHOLD_, undefined);
    assert.equal(env.VOXMUX_GATEWAY_MALLOC, undefined);
    assert.equal(env.VOXMUX_ENV_TEST_OTHER, 'kept');
  });

  it("keeps a user's own malloc setting (no marker: the launcher set nothing)", () => {
    process.env.MALLOC_MMAP_THRESHOLD_ = '131072';
    delete process.env.VOXMUX_GATEWAY_MALLOC;
    assert.equal(readProcessEnvironment().MALLOC_MMAP_THRESHOLD_, '131072');
  });
});
