// Makes a fresh clone runnable: installs the Debian packages voxmux needs (as root; otherwise it
// prints the exact command and stops) and the npm dependencies when they are missing or stale.
// Node built-ins only: it runs before `npm ci`.
//
//   node scripts/setup.mjs [--for serve|test] [--config FILE] [--list]
//
// --for serve (the default; `npm start`): what serving needs with the configured engines only: the
//   config file named by --config or VOXMUX_CONFIG (models.*.adapter), else the default config,
//   whose pocketsphinx engine needs no PyTorch.
// --for test (`npm test`): every engine's packages and the test tooling (pytest, mypy, pyflakes,
//   PyYAML, flite, nginx).
// --list: print the Debian packages the purpose needs, one a line, and exit without installing.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** What every model host needs, and ffmpeg, which decodes FLAC, MP3, M4A/AAC, Ogg and WebM uploads. */
const BASE_PACKAGES = ['ffmpeg', 'python3', 'python3-numpy'];
/** What each adapter's model host imports (docs/adapters.md). An adapter not listed needs nothing more. */
const ADAPTER_PACKAGES = {
  // flite runs in process (its library, not the flite program); eSpeak NG as the espeak-ng program.
  'debian-voices': [
    'libflite1',
    'espeak-ng',
    'espeak-ng-data',
    'festival',
    'festlex-cmu',
    'festlex-poslex',
    'festvox-us-slt-hts',
    'festvox-kallpc16k',
    'festvox-kdlpc16k',
  ],
  pocketsphinx: ['pocketsphinx', 'pocketsphinx-en-us', 'python3-pocketsphinx'],
  parakeet: ['python3-torch', 'python3-sentencepiece'],
  test: [],
  vits: ['python3-torch', 'libespeak-ng1'],
  // speaker diarization (issue 17): clustering from scikit-learn on CPU; Sortformer on PyTorch
  'classical-diarizer': ['python3-sklearn'],
  sortformer: ['python3-torch'],
  whisper: ['python3-torch'],
};
/** The default config's engines (src/config/schema.ts, DEFAULT_MODELS). */
const DEFAULT_ADAPTERS = ['pocketsphinx', 'debian-voices', 'classical-diarizer'];
/** Test tooling: host tests, typecheck and lint, the speech synthesizer of the accuracy tests, and the proxy of the multi-node tests. */
const TEST_PACKAGES = ['python3-pytest', 'python3-mypy', 'python3-pyflakes', 'python3-yaml', 'flite', 'nginx'];

/** The adapters a config file names; the default config's when there is no file or it names no models. */
function configuredAdapters(configPath) {
  if (configPath === undefined) return DEFAULT_ADAPTERS;
  let config;
  try {
    config = JSON.parse(readFileSync(configPath, 'utf8'));
  } catch (err) {
    // The server reports a config it cannot read (exit 78): install for the default engine meanwhile.
    process.stderr.write(`setup: cannot read ${configPath} (${err.message}): installing for the default engine\n`);
    return DEFAULT_ADAPTERS;
  }
  const models = config?.models;
  if (models === undefined || models === null || typeof models !== 'object') return DEFAULT_ADAPTERS;
  return Object.values(models).map((model) => String(model?.adapter ?? ''));
}

export function packagesFor(purpose, adapters) {
  const names = purpose === 'test' ? Object.keys(ADAPTER_PACKAGES) : adapters;
  const packages = [...BASE_PACKAGES, ...names.flatMap((name) => ADAPTER_PACKAGES[name] ?? [])];
  if (purpose === 'test') packages.push(...TEST_PACKAGES);
  return [...new Set(packages)];
}

function missingPackages(packages) {
  return packages.filter((name) => {
    const r = spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' });
    return r.status !== 0 || !r.stdout.includes('install ok installed');
  });
}

const { values } = parseArgs({
  options: { for: { type: 'string', default: 'serve' }, config: { type: 'string' }, list: { type: 'boolean', default: false } },
  strict: true,
});
if (values.for !== 'serve' && values.for !== 'test') {
  process.stderr.write(`setup: expected --for serve or test: got '${values.for}'\n`);
  process.exit(2);
}
const packages = packagesFor(values.for, configuredAdapters(values.config ?? process.env.VOXMUX_CONFIG));
if (values.list) {
  process.stdout.write(`${packages.join('\n')}\n`);
  process.exit(0);
}

const missing = missingPackages(packages);
if (missing.length > 0) {
  const install = `apt-get install -y --no-install-recommends ${missing.join(' ')}`;
  if (process.getuid?.() !== 0) {
    process.stderr.write(`voxmux needs Debian packages: ${missing.join(' ')}\nRun as root:\n  apt-get update && ${install}\n`);
    process.exit(1);
  }
  process.stderr.write(`installing Debian packages: ${missing.join(' ')}\n`);
  execFileSync('apt-get', ['update'], { stdio: 'inherit' });
  execFileSync('sh', ['-c', `DEBIAN_FRONTEND=noninteractive ${install}`], { stdio: 'inherit' });
}

const marker = join(root, 'node_modules', '.package-lock.json');
const lock = join(root, 'package-lock.json');
if (!existsSync(marker) || statSync(marker).mtimeMs < statSync(lock).mtimeMs) {
  process.stderr.write('installing npm dependencies (npm ci)\n');
  // onnxruntime-node ships its CPU binaries in the package; its install script would download the
  // CUDA ones, which voxmux does not use (voice activity detection runs on the CPU): skip it.
  execFileSync('npm', ['ci', '--no-audit', '--no-fund'], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' },
  });
}
