#!/usr/bin/env node
// The voxmux command (src/app/cli.ts), run from the build in dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

if (!existsSync(fileURLToPath(new URL('../dist/app/cli.js', import.meta.url)))) {
  process.stderr.write('voxmux is not built: run `npm run build` in its folder first\n');
  process.exit(1);
}
const { runCli } = await import('../dist/app/cli.js');
process.exit(await runCli(process.argv.slice(2)));
