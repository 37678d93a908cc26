/** The voxmux command: `voxmux serve [flags]` runs the server; `voxmux bench ...` the load-ramp tool. */
import { runBenchCli } from '../bench/cli.js';
import { main } from './main.js';

export const USAGE = `usage: voxmux serve [--host H] [--port N] [--config FILE] [--log-level L] [--set path=value] [--print-config]
       voxmux bench transcribe|accuracy|compare ...   (docs/bench.md)
`;

export async function runCli(argv: readonly string[]): Promise<number> {
  const [command = 'serve', ...rest] = argv;
  switch (command) {
    case 'serve':
      return main(rest);
    case 'bench':
      return runBenchCli(rest);
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return 0;
    default:
      process.stderr.write(`voxmux: unknown command '${command}'\n${USAGE}`);
      return 2;
  }
}
