/**
 * `npm start` installs what serving the configured engines needs, and `npm test` what the suite
 * needs (#16): scripts/setup.mjs --list prints the Debian packages each would install.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const SETUP = fileURLToPath(new URL('../../scripts/setup.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'voxmux-setup-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function listed(args: string[], env: Record<string, string> = {}): string[] {
  const r = spawnSync(process.execPath, [SETUP, ...args, '--list'], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '', ...env } });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim().split('\n');
}

function configFile(config: unknown): string {
  const path = join(dir, `${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(config));
  return path;
}

const SPEECH_VOICES = [
  'libflite1',
  'espeak-ng',
  'espeak-ng-data',
  'festival',
  'festlex-cmu',
  'festvox-us-slt-hts',
  'festvox-kallpc16k',
  'festvox-kdlpc16k',
];
const TEST_TOOLING = ['python3-pytest', 'python3-mypy', 'python3-pyflakes', 'python3-yaml', 'flite', 'nginx'];

describe('scripts/setup.mjs (#16)', () => {
  it('installs for serving the default config (pocketsphinx, the Debian voices, the CPU diarizer) without PyTorch or test tooling', () => {
    const packages = listed([]);
    assert.deepEqual(packages.slice(0, 6), [
      'ffmpeg',
      'python3',
      'python3-numpy',
      'pocketsphinx',
      'pocketsphinx-en-us',
      'python3-pocketsphinx',
    ]);
    assert.deepEqual(packages.slice(6).sort(), [...SPEECH_VOICES, 'festlex-poslex', 'python3-sklearn'].sort());
    for (const name of ['python3-torch', ...TEST_TOOLING]) assert.ok(!packages.includes(name), name);
  });

  it('installs the engines a config file names, from --config or VOXMUX_CONFIG', () => {
    const parakeet = configFile({ models: { big: { adapter: 'parakeet' }, fake: { adapter: 'test' } } });
    const expected = ['ffmpeg', 'python3', 'python3-numpy', 'python3-torch', 'python3-sentencepiece'];
    assert.deepEqual(listed(['--config', parakeet]), expected);
    assert.deepEqual(listed([], { VOXMUX_CONFIG: parakeet }), expected);
    assert.deepEqual(listed(['--config', configFile({ gateway: { port: 1 } })]), listed([]), 'no models: the default ones');
  });

  it('installs the Debian voices for a config that names the debian-voices adapter', () => {
    const packages = listed(['--config', configFile({ models: { speech: { adapter: 'debian-voices' } } })]);
    assert.deepEqual(packages.slice(0, 3), ['ffmpeg', 'python3', 'python3-numpy']);
    for (const name of SPEECH_VOICES) assert.ok(packages.includes(name), name);
    assert.ok(!packages.includes('flite'), 'the flite library, not the program');
  });

  it('installs scikit-learn for classical-diarizer and PyTorch for sortformer (#17)', () => {
    const cpu = configFile({ models: { diarize: { adapter: 'classical-diarizer' } } });
    assert.deepEqual(listed(['--config', cpu]), ['ffmpeg', 'python3', 'python3-numpy', 'python3-sklearn']);
    const gpu = configFile({ models: { diarize: { adapter: 'sortformer' } } });
    assert.deepEqual(listed(['--config', gpu]), ['ffmpeg', 'python3', 'python3-numpy', 'python3-torch']);
  });

  it('installs PyTorch and the espeak-ng library for vits', () => {
    const vits = configFile({ models: { speech: { adapter: 'vits' } } });
    assert.deepEqual(listed(['--config', vits]), ['ffmpeg', 'python3', 'python3-numpy', 'python3-torch', 'libespeak-ng1']);
  });

  it('installs every engine and the test tooling for tests', () => {
    const packages = listed(['--for', 'test']);
    for (const name of ['python3-torch', 'python3-pocketsphinx', 'pocketsphinx-en-us', ...SPEECH_VOICES, ...TEST_TOOLING])
      assert.ok(packages.includes(name), name);
  });

  it('rejects an unknown purpose with exit code 2', () => {
    const r = spawnSync(process.execPath, [SETUP, '--for', 'prod', '--list'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
  });
});
