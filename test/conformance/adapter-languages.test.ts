/**
 * An adapter's languages are declared once per side: by its model host module in Python (the
 * module constant LANGUAGE, which the host enforces and reports in transcripts) and by
 * ADAPTER_LANGUAGES in src/app/build-server.ts (what /v1/models and verbose_json say before any
 * instance has loaded). This test keeps the two the same: every adapter the host registry knows
 * (host/voxmux_host/registry.py) is in the table with its module's LANGUAGE, or absent from it
 * when its module declares none (the test engine). It reads the Python source and does not
 * import it, so that no engine's dependencies (torch, pocketsphinx) are needed.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { ADAPTER_LANGUAGES } from '../../src/app/build-server.js';

const PACKAGE_DIR = fileURLToPath(new URL('../../host/voxmux_host', import.meta.url));

/** Adapter name → the module its factory imports (relative to the package), from registry.py. */
function registeredModules(): Map<string, string> {
  const source = readFileSync(join(PACKAGE_DIR, 'registry.py'), 'utf8');
  const factories = new Map<string, string>();
  for (const m of source.matchAll(/^def (\w+)\(\)[^\n]*:\n\s+from \.([\w.]+) import /gm)) factories.set(m[1]!, m[2]!);
  const table = /^ADAPTERS[^=]*= \{([^}]*)\}/m.exec(source)?.[1] ?? '';
  const modules = new Map<string, string>();
  for (const m of table.matchAll(/'([\w-]+)': (\w+),/g)) {
    const module = factories.get(m[2]!);
    assert.ok(module !== undefined, `no factory ${m[2]} with a relative import in registry.py`);
    modules.set(m[1]!, module);
  }
  return modules;
}

/** The module-level LANGUAGE constant of a host module, if it has one. */
function moduleLanguage(module: string): string | undefined {
  const source = readFileSync(join(PACKAGE_DIR, `${module.replaceAll('.', '/')}.py`), 'utf8');
  return /^LANGUAGE = ['"]([a-z]{2,3})['"]$/m.exec(source)?.[1];
}

/** A multilingual adapter's LANGUAGES tuple, from the module its adapter module imports it from (whisper). */
function moduleLanguages(module: string): string[] | undefined {
  const source = readFileSync(join(PACKAGE_DIR, `${module.replaceAll('.', '/')}.py`), 'utf8');
  const from = /^from \.(\w+) import [^\n]*\bLANGUAGES\b/m.exec(source)?.[1];
  if (from === undefined) return undefined;
  const sibling = join(PACKAGE_DIR, ...module.split('.').slice(0, -1), `${from}.py`);
  const tuple = /^LANGUAGES: Tuple\[str, \.\.\.\] = \(([^)]*)\)/m.exec(readFileSync(sibling, 'utf8'))?.[1];
  return tuple === undefined ? undefined : [...tuple.matchAll(/"([a-z]{2,3})"/g)].map((m) => m[1]!);
}

describe('adapter languages, in the host modules and in the gateway', () => {
  const modules = registeredModules();

  it('reads the host registry (parakeet, pocketsphinx, whisper, test at least)', () => {
    for (const name of ['parakeet', 'pocketsphinx', 'whisper', 'test'])
      assert.ok(modules.has(name), `${name} in ${[...modules.keys()].join(', ')}`);
  });

  it('declares for each adapter the language its host module enforces, and none for an adapter that declares none', () => {
    const fromHost: Record<string, string[]> = {};
    for (const [name, module] of modules) {
      const language = moduleLanguage(module);
      const languages = moduleLanguages(module);
      if (language !== undefined) fromHost[name] = [language];
      else if (languages !== undefined) fromHost[name] = languages;
    }
    assert.deepEqual(Object.fromEntries(Object.entries(ADAPTER_LANGUAGES).map(([name, languages]) => [name, [...languages]])), fromHost);
  });
});
