// Makes a fresh clone runnable: installs the Debian packages voxmux needs (as root; otherwise it
// prints the exact command and stops) and the npm dependencies when they are missing or stale.
// Node built-ins only: it runs before `npm ci`.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const DEBIAN_PACKAGES = [
  'ffmpeg', // decodes FLAC, MP3, M4A/AAC, Ogg and WebM uploads
  'python3',
  'python3-numpy',
  'python3-torch',
  'python3-yaml',
  'python3-sentencepiece', // model hosts
  'python3-pytest', // host tests
  'python3-mypy',
  'python3-pyflakes', // host typecheck and lint
  'pocketsphinx',
  'pocketsphinx-en-us',
  'python3-pocketsphinx', // the CPU default ASR engine
  'flite', // synthesizes test speech
];

function missingPackages() {
  return DEBIAN_PACKAGES.filter((name) => {
    const r = spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' });
    return r.status !== 0 || !r.stdout.includes('install ok installed');
  });
}

const missing = missingPackages();
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
