/**
 * The house rules dependency-cruiser cannot see: who may read the environment, spawn, print and
 * listen, in the server (src/) and the bench (bench/cli/).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') && !name.endsWith('.test.ts') ? [relative(root, path)] : [];
  });
}

const files = [...sources(join(root, 'src')), ...sources(join(root, 'bench', 'cli'))].map((path) => ({
  path,
  text: readFileSync(join(root, path), 'utf8'),
}));

function offenders(pattern: RegExp, allowed: (path: string) => boolean): string[] {
  return files.filter((f) => pattern.test(f.text) && !allowed(f.path)).map((f) => f.path);
}

describe('house rules', () => {
  it('reads process.env only in config/env.ts', () => {
    assert.deepEqual(
      offenders(/process\.env\b/, (p) => p === 'src/config/env.ts'),
      [],
    );
  });

  it('starts processes only in supervisor/spawn.ts, gateway/audio/ffmpeg.ts, bench/cli/gpu-sampler.ts and bench/cli/bench-processes.ts', () => {
    const allowed = new Set([
      'src/supervisor/spawn.ts',
      'src/gateway/audio/ffmpeg.ts',
      'bench/cli/gpu-sampler.ts',
      'bench/cli/bench-processes.ts',
    ]);
    assert.deepEqual(
      offenders(/from 'node:child_process'|require\('child_process'\)/, (p) => allowed.has(p)),
      [],
    );
  });

  it('uses console only under bench/cli/', () => {
    assert.deepEqual(
      offenders(/\bconsole\.(log|info|warn|error|debug)\(/, (p) => p.startsWith('bench/cli/')),
      [],
    );
  });

  it("calls listen() only in the entry points: app/main.ts (and the gateway threads' socket it opens) and a gateway thread", () => {
    const allowed = new Set(['src/app/main.ts', 'src/app/gateway-threads/listen-socket.ts', 'src/app/gateway-threads/thread-main.ts']);
    assert.deepEqual(
      offenders(/\.listen\(\{/, (p) => allowed.has(p)),
      [],
    );
  });

  it('declares metrics only in telemetry/metrics.ts', () => {
    assert.deepEqual(
      offenders(/new (Counter|Gauge|Histogram|Summary)\(/, (p) => p === 'src/telemetry/metrics.ts'),
      [],
    );
  });
});
