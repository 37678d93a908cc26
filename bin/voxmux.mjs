#!/usr/bin/env node
// The voxmux command: `voxmux serve [flags]` runs the server, `voxmux bench ...` the load-ramp tool.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
if (!existsSync(dist)) {
  process.stderr.write('voxmux is not built: run `npm run build` in its folder first\n');
  process.exit(1);
}
const [command = 'serve', ...rest] = process.argv.slice(2);
if (command === 'serve') {
  const { main } = await import('../dist/app/main.js');
  process.exit(await main(rest));
} else if (command === 'bench') {
  const { runBenchCli } = await import('../dist/bench/cli.js');
  process.exit(await runBenchCli(rest));
} else if (command === '--help' || command === 'help' || command === '-h') {
  process.stdout.write('usage: voxmux serve [--host H] [--port N] [--config FILE] [--set path=value] [--print-config]\n       voxmux bench transcribe|compare ... (see docs/bench.md)\n');
} else {
  process.stderr.write(`voxmux: unknown command '${command}' (expected serve or bench)\n`);
  process.exit(2);
}
