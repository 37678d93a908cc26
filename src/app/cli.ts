/**
 * The voxmux command: `voxmux serve [flags]` runs the server; `voxmux bench ...` the load-ramp and
 * accuracy tool, which lives apart from the server (bench/cli/). The server never imports it: the
 * entry point that starts the command (bin/voxmux.mjs, the bundle's entry) passes a loader that
 * imports it only when `voxmux bench` is run.
 */
import { main } from './main.js';

export const USAGE = `usage: voxmux serve [--host H] [--port N] [--config FILE] [--log-level L] [--set path=value] [--print-config]
       voxmux bench transcribe|accuracy|compare ...   (docs/bench.md)
`;

/** `voxmux bench`'s entry: its arguments in, the exit code out. */
export type BenchEntry = (argv: readonly string[]) => Promise<number>;

export interface CliDeps {
  /** Loads the bench; absent where the bench is not installed beside the server. */
  loadBench?: () => Promise<BenchEntry>;
}

export async function runCli(argv: readonly string[], deps: CliDeps = {}): Promise<number> {
  const [command = 'serve', ...rest] = argv;
  switch (command) {
    case 'serve':
      return main(rest);
    case 'bench': {
      if (deps.loadBench === undefined) {
        process.stderr.write('voxmux: the bench is not part of this installation\n');
        return 2;
      }
      const runBench = await deps.loadBench();
      return runBench(rest);
    }
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
