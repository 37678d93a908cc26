/**
 * The voxmux command: `voxmux serve [flags]` runs the server; `voxmux models pull ...` downloads
 * model files from the Hugging Face Hub (models-pull/); `voxmux bench ...` the load-ramp and
 * accuracy tool, and `voxmux cost ...` the operating-mode cost table, which live apart from the
 * server (bench/cli/). The server never imports the bench: the
 * entry point that starts the command (bin/voxmux.mjs, the bundle's entry) passes a loader that
 * imports it only when `voxmux bench` is run.
 *
 * `--help` (or `-h`) and `--version` work on every command and exit 0 with their text on stdout;
 * they win over every other argument before a `--` terminator. Help for the bench and its
 * subcommands is the bench's own; the version is answered here, without loading the bench.
 */
import { homedir } from 'node:os';
import { readModelsPullEnvironment } from '../config/env.js';
import { main } from './main.js';

export const USAGE = `usage: voxmux <command> [options]

commands:
  serve    run the speech server (the default command); voxmux serve --help for its options
  models   download model files from the Hugging Face Hub; voxmux models pull --help (docs/operations.md#model-files)
  bench    the load-ramp, accuracy and comparison tool; voxmux bench --help (docs/bench.md)
  cost     GPU cost of each operating mode from request logs; voxmux cost --help (docs/bench.md#cost)

options:
  -h, --help   print this help and exit
  --version    print the version and exit
`;

export const SERVE_USAGE = `usage: voxmux serve [options]

Listens on HOST:PORT, then starts every configured model instance. SIGTERM or SIGINT drains: new
calls get 503, running and queued requests finish; a second signal stops at once.

options:
  --host H           address to listen on (gateway.host; default 127.0.0.1)
  --port N           TCP port to listen on, 0 for a free one (gateway.port; default 8000)
  --config FILE      JSON configuration file (or VOXMUX_CONFIG); docs/config.md lists every setting
  --log-level L      fatal, error, warn, info, debug, trace or silent (telemetry.logLevel; default info)
  --log-format F     auto, json or pretty; auto is pretty on a terminal, JSON otherwise (telemetry.logFormat)
  --set path=value   any setting with an environment name in docs/config.md, such as --set scheduler.maxQueuedRequests=64; repeatable
  --print-config     print the resolved configuration (secrets redacted) and exit
  -h, --help         print this help and exit
  --version          print the version and exit

exit codes: 0 after a clean drain, 1 on a fatal error, 2 on bad arguments, 78 on invalid configuration
`;

/** `voxmux bench`'s entry: its arguments in, the exit code out. */
export type BenchEntry = (argv: readonly string[]) => Promise<number>;

export interface CliDeps {
  /** The package's version, printed by `--version`. */
  version: string;
  /** Loads the bench; absent where the bench is not installed beside the server. */
  loadBench?: () => Promise<BenchEntry>;
  /** Where usage, help and the version go. @default process.stdout */
  stdout?: { write(text: string): unknown };
  /** Where usage errors go. @default process.stderr */
  stderr?: { write(text: string): unknown };
  /** Runs the server; a seam for tests. @default main */
  serve?: (argv: readonly string[]) => Promise<number>;
  /** Runs `voxmux models ...`; a seam for tests. @default runModelsCli, with the environment and the home directory */
  models?: (argv: readonly string[]) => Promise<number>;
}

/** Whether `flags` holds one of `names` before a `--` terminator. */
export function hasFlag(flags: readonly string[], names: readonly string[]): boolean {
  const end = flags.indexOf('--');
  return (end === -1 ? flags : flags.slice(0, end)).some((arg) => names.includes(arg));
}

const HELP = ['--help', '-h'];
const VERSION = ['--version'];

export async function runCli(argv: readonly string[], deps: CliDeps): Promise<number> {
  const stdout = deps.stdout ?? process.stdout;
  const stderr = deps.stderr ?? process.stderr;
  const version = `voxmux ${deps.version}\n`;
  // A flag first means the default command, so `voxmux --port 9000` serves as `voxmux serve --port 9000` does.
  const isCommandGiven = argv[0] !== undefined && !argv[0].startsWith('-');
  const command = isCommandGiven ? argv[0]! : 'serve';
  const rest = isCommandGiven ? argv.slice(1) : argv;
  switch (command) {
    case 'serve':
      if (hasFlag(rest, HELP)) {
        // `voxmux --help` is the command's help; `voxmux serve --help` the server's.
        stdout.write(isCommandGiven ? SERVE_USAGE : USAGE);
        return 0;
      }
      if (hasFlag(rest, VERSION)) {
        stdout.write(version);
        return 0;
      }
      return (deps.serve ?? main)(rest);
    case 'bench':
    case 'cost': {
      if (hasFlag(rest, VERSION) && !hasFlag(rest, HELP)) {
        stdout.write(version);
        return 0;
      }
      if (deps.loadBench === undefined) {
        stderr.write(`voxmux: ${command === 'cost' ? 'voxmux cost' : 'the bench'} is not part of this installation\n`);
        return 2;
      }
      const runBench = await deps.loadBench();
      // `voxmux cost` lives with the bench (bench/cli/cost-cli.ts): it is `voxmux bench cost`.
      return runBench(command === 'cost' ? ['cost', ...rest] : rest);
    }
    case 'models': {
      if (hasFlag(rest, VERSION) && !hasFlag(rest, HELP)) {
        stdout.write(version);
        return 0;
      }
      const runModels =
        deps.models ??
        (async (args: readonly string[]) => {
          // Loaded only for this command: the server does not carry the download code's imports.
          const { runModelsCli } = await import('../models-pull/index.js');
          return runModelsCli(args, {
            version: deps.version,
            env: readModelsPullEnvironment(),
            homeDir: homedir(),
            cwd: process.cwd(),
            stdout,
            stderr: deps.stderr ?? process.stderr,
          });
        });
      return runModels(rest);
    }
    case 'help':
      stdout.write(USAGE);
      return 0;
    case 'version':
      stdout.write(version);
      return 0;
    default:
      stderr.write(`voxmux: unknown command '${command}'\n${USAGE}`);
      return 2;
  }
}
