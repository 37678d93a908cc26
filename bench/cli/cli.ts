/**
 * `voxmux bench`: the load-ramp, accuracy and comparison tool's command line. It is a client of
 * the server's HTTP API and lives apart from the server: `voxmux` loads it only when `voxmux bench`
 * is run (bin/voxmux.mjs, or .bundle/voxmux-bench.mjs beside the server bundle).
 *
 *   voxmux bench transcribe --url URL --model M --audio FILE|DIR [options]
 *   voxmux bench speech --url URL --model M [--voice-prefix P --voice-count N --mix zipf] [options]
 *   voxmux bench accuracy --url URL --model M --manifest FILE [options]
 *   voxmux bench diarize --mode accuracy|load --url URL --model M [options]
 *   voxmux bench compare A.json B.json [...] [--out DIR]
 *   voxmux bench cost LOG [...] --gpu-hour-usd USD [options]   (also `voxmux cost`)
 *
 * Exit codes: 0 done; 1 no request succeeded; 2 bad arguments or server unreachable;
 * 130 interrupted (results so far are still written).
 */
import { accuracyCommand } from './accuracy-cli.js';
import { callCommand } from './call-cli.js';
import { usageError } from './bench-error.js';
import { runReportingErrors, type BenchCliDeps, type BenchIo, type Command } from './command.js';
import { compareCommand } from './compare-cli.js';
import { costCommand } from './cost-cli.js';
import { diarizeCommand } from './diarize-cli.js';
import { speechCommand } from './speech-cli.js';
import { BENCH_USAGE, transcribeCommand } from './transcribe-cli.js';

export type { BenchCliDeps, BenchIo } from './command.js';

const COMMANDS: readonly Command[] = [
  transcribeCommand,
  speechCommand,
  callCommand,
  accuracyCommand,
  diarizeCommand,
  compareCommand,
  costCommand,
];

export async function runBenchCli(argv: readonly string[], io?: Partial<BenchIo>, deps: BenchCliDeps = {}): Promise<number> {
  const out: BenchIo = {
    stdout: io?.stdout ?? process.stdout,
    stderr: io?.stderr ?? process.stderr,
    isTTY: io?.isTTY ?? (io?.stdout === undefined ? process.stdout.isTTY === true : false),
  };
  const [name, ...args] = argv;
  const command = COMMANDS.find((candidate) => candidate.name === name);
  if (command !== undefined) return command.run(args, out, deps);
  return runReportingErrors(out, async () => {
    switch (name) {
      case undefined:
        out.stderr.write(BENCH_USAGE);
        return 2;
      case 'help':
      case '--help':
      case '-h':
        out.stdout.write(BENCH_USAGE);
        return 0;
      default:
        throw usageError(`Unknown bench command '${name}': expected transcribe, speech, call, accuracy, diarize, compare or cost`);
    }
  });
}
