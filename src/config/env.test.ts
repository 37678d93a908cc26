import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { readModelsPullEnvironment, readProcessEnvironment } from './env.js';

const KEYS = [
  'MALLOC_MMAP_THRESHOLD_',
  'VOXMUX_GATEWAY_MALLOC',
  'VOXMUX_ENV_TEST_OTHER',
  'HF_HUB_OFFLINE',
  'TRANSFORMERS_OFFLINE',
  'HF_HUB_CACHE',
  'HUGGINGFACE_HUB_CACHE',
];
const saved = Object.fromEntries(KEYS.map((key) => [key, process.env[key]]));

function restore(): void {
  for (const key of KEYS) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
}

describe('readProcessEnvironment', () => {
  afterEach(restore);

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

describe('readModelsPullEnvironment', () => {
  afterEach(restore);

  function read(values: Record<string, string | undefined>): ReturnType<typeof readModelsPullEnvironment> {
    for (const key of KEYS) delete process.env[key];
    for (const [key, value] of Object.entries(values)) if (value !== undefined) process.env[key] = value;
    return readModelsPullEnvironment();
  }

  it("reads huggingface_hub's legacy names where the new ones are unset or empty: TRANSFORMERS_OFFLINE, HUGGINGFACE_HUB_CACHE", () => {
    const legacy = read({ TRANSFORMERS_OFFLINE: '1', HUGGINGFACE_HUB_CACHE: '/legacy/hub' });
    assert.deepEqual([legacy.hfHubOffline, legacy.hfHubCache], ['1', '/legacy/hub']);
    const empty = read({ HF_HUB_OFFLINE: '', TRANSFORMERS_OFFLINE: 'yes', HF_HUB_CACHE: '', HUGGINGFACE_HUB_CACHE: '/legacy/hub' });
    assert.deepEqual([empty.hfHubOffline, empty.hfHubCache], ['yes', '/legacy/hub']);
  });

  it('lets the new names win, even HF_HUB_OFFLINE=0 over TRANSFORMERS_OFFLINE=1, as huggingface_hub does', () => {
    const both = read({ HF_HUB_OFFLINE: '0', TRANSFORMERS_OFFLINE: '1', HF_HUB_CACHE: '/new/hub', HUGGINGFACE_HUB_CACHE: '/legacy/hub' });
    assert.deepEqual([both.hfHubOffline, both.hfHubCache], ['0', '/new/hub']);
    const none = read({});
    assert.deepEqual([none.hfHubOffline, none.hfHubCache], [undefined, undefined]);
  });
});
