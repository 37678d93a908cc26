#!/usr/bin/env node
// The voxmux command (src/app/cli.ts), run from the build in dist/. The bench (bench/cli/, built
// into dist/bench/cli/) is imported only when `voxmux bench` is run.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

if (!existsSync(fileURLToPath(new URL('../dist/src/app/cli.js', import.meta.url)))) {
  process.stderr.write('voxmux is not built: run `npm run build` in its folder first\n');
  process.exit(1);
}
const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const { runCli } = await import('../dist/src/app/cli.js');
const loadBench = async () => (await import('../dist/bench/cli/cli.js')).runBenchCli;
process.exit(await runCli(process.argv.slice(2), { version, loadBench }));
