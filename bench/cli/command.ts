/**
 * The skeleton every `voxmux bench` subcommand is built on: a command declares its name, usage,
 * flags and a `run` function; the skeleton answers `--help`, parses the flags strictly, resolves
 * the output directory, makes the main work interruptible and maps failures to exit codes.
 *
 * Exit codes: 0 done; 1 no request succeeded; 2 bad arguments or server unreachable;
 * 130 interrupted (results so far are still written). See bench-error.ts.
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { systemClock, type Clock } from '../../src/core/clock.js';
import { isBenchError, usageError } from './bench-error.js';
import type { ClientMonitor } from './client-monitor.js';
import type { SpawnBench } from './bench-processes.js';
import type { SpawnSampler } from './gpu-sampler.js';
import { runInterruptibly } from './interruptible.js';
import { canCreateDirectory } from './output-dir.js';
import type { TextSink } from './progress.js';

export interface BenchIo {
  stdout: TextSink;
  stderr: TextSink;
  /** Whether stdout is a terminal: the progress line is redrawn in place only then. */
  isTTY: boolean;
}

/** Seams for tests; the defaults are the real ones. */
export interface BenchCliDeps {
  fetch?: typeof globalThis.fetch;
  clock?: Clock;
  /** Replaces the nvidia-smi spawner. */
  spawnGpuSampler?: SpawnSampler;
  clientMonitor?: ClientMonitor;
  /** Replaces the spawner of the bench's own processes (a load spread over several). */
  spawnBench?: SpawnBench;
  /** Directory that relative paths and the default output directory are resolved against. */
  cwd?: string;
  /** Aborting it interrupts a run, as SIGINT does. */
  signal?: AbortSignal;
  /** Installs a SIGINT handler for the duration of a run. @default true */
  shouldHandleSignals?: boolean;
}

/** A flag as node:util's parseArgs declares it. */
export interface FlagSpec {
  type: 'string' | 'boolean';
  multiple?: boolean;
  short?: string;
}

export type FlagSpecs = Record<string, FlagSpec>;

/** The parsed values of `F`: every flag is optional; repeatable flags are arrays. */
export type FlagValues<F extends FlagSpecs> = {
  [K in keyof F]?: F[K]['type'] extends 'boolean'
    ? F[K]['multiple'] extends true
      ? boolean[]
      : boolean
    : F[K]['multiple'] extends true
      ? string[]
      : string;
};

export interface CommandContext<F extends FlagSpecs> {
  values: FlagValues<F>;
  positionals: string[];
  /** The command's arguments as given (after the command name), for the run's provenance. */
  args: readonly string[];
  io: BenchIo;
  deps: BenchCliDeps;
  cwd: string;
  clock: Clock;
  /**
   * `--out` resolved against the working directory, or `bench/out/<defaultName>`; a usage error
   * when it could not be created, so that nothing is sent before a run's results could be written.
   */
  outputDir(out: string | undefined, defaultName: string): Promise<string>;
  /** Runs `work` with a signal that aborts on Ctrl-C or on the caller's signal (deps.signal). */
  interruptibly<T>(onInterrupt: () => void, work: (signal: AbortSignal) => Promise<T>): Promise<T>;
}

export interface CommandSpec<F extends FlagSpecs> {
  name: string;
  /** Printed for `--help` or `-h`. */
  usage: string;
  flags: F;
  /** Whether arguments other than flags are accepted (files). @default false */
  hasPositionals?: boolean;
  /** The line printed after a usage error. @default 'Run voxmux bench --help for usage' */
  helpHint?: string;
  /** The command's work; returns the exit code. Failures are thrown as BenchErrors. */
  run(context: CommandContext<F>): Promise<number>;
}

export interface Command {
  name: string;
  usage: string;
  /** Parses `args` (the arguments after the command name), runs the command and returns its exit code. */
  run(args: readonly string[], io: BenchIo, deps: BenchCliDeps): Promise<number>;
}

const HELP_HINT = 'Run voxmux bench --help for usage';

export function defineCommand<const F extends FlagSpecs>(spec: CommandSpec<F>): Command {
  return {
    name: spec.name,
    usage: spec.usage,
    run: (args, io, deps) =>
      runReportingErrors(
        io,
        async () => {
          if (isHelpRequested(args)) {
            io.stdout.write(spec.usage);
            return 0;
          }
          const { values, positionals } = parseArgs({
            args: [...args],
            options: spec.flags,
            allowPositionals: spec.hasPositionals === true,
            strict: true,
          });
          const cwd = deps.cwd ?? process.cwd();
          return spec.run({
            values: values as FlagValues<F>,
            positionals,
            args,
            io,
            deps,
            cwd,
            clock: deps.clock ?? systemClock,
            outputDir: (out, defaultName) =>
              resolveOutputDir(out === undefined ? join(cwd, 'bench', 'out', defaultName) : resolve(cwd, out)),
            interruptibly: (onInterrupt, work) =>
              runInterruptibly(
                {
                  ...(deps.signal === undefined ? {} : { signal: deps.signal }),
                  ...(deps.shouldHandleSignals === undefined ? {} : { shouldHandleSignals: deps.shouldHandleSignals }),
                  onInterrupt,
                },
                work,
              ),
          });
        },
        spec.helpHint,
      ),
  };
}

/**
 * Runs `work`, turning the bench's own failures into their exit codes with the message on stderr:
 * BenchErrors, and parseArgs' errors for unknown or malformed flags (usage, 2). Anything else is a
 * bug and is rethrown.
 */
export async function runReportingErrors(io: BenchIo, work: () => Promise<number>, helpHint = HELP_HINT): Promise<number> {
  try {
    return await work();
  } catch (err) {
    if (isBenchError(err)) {
      io.stderr.write(`${err.message}\n`);
      if (err.code === 'usage') io.stderr.write(`${helpHint}\n`);
      return err.exitCode;
    }
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')) {
      io.stderr.write(`${(err as Error).message}\n${helpHint}\n`);
      return 2;
    }
    throw err;
  }
}

/** `--help` or `-h` anywhere before a `--` terminator: help wins over every other flag. */
function isHelpRequested(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}

async function resolveOutputDir(dir: string): Promise<string> {
  if (!(await canCreateDirectory(dir))) throw usageError(`Expected --out to name a writable directory: got '${dir}'`);
  return dir;
}
