/**
 * Where the Python model host's package lives when the configuration does not say
 * (`supervisor.hostPath` empty).
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/**
 * The `host/` folder of this checkout, found from the directory of the running module: two levels
 * up from `src/supervisor/`, three from `dist/src/supervisor/`, one level up from the single-file bundle in
 * `.bundle/`. The nearest ancestor (up to 3 levels) holding `host/voxmux_host` wins; without one,
 * the source layout's path, which the instance's start error then names.
 */
export function findHostPath(moduleDir: string): string {
  for (let dir = moduleDir, depth = 0; depth < 4; dir = dirname(dir), depth++) {
    const candidate = join(dir, 'host');
    if (existsSync(join(candidate, 'voxmux_host'))) return candidate;
  }
  return resolve(moduleDir, '../../host');
}
