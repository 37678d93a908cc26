/**
 * A load spread over several processes of the bench itself, for loads that one Node process cannot
 * send without becoming the bottleneck (thousands of sessions): each process runs the same command
 * on its share and writes its own results, which the caller merges. The processes share the
 * caller's process group, so a terminal's Ctrl-C reaches each once; an abort of the caller's own
 * (its signal, not SIGINT) is passed on to them as SIGINT. A caller killed outright (SIGKILL, or
 * SIGTERM, which the bench does not handle) leaves them to finish their load and write their parts.
 */
import { spawn, type ChildProcess } from 'node:child_process';

/** Starts `voxmux bench <args>` as a process of its own. */
export type SpawnBench = (args: readonly string[]) => ChildProcess;

/** The real one: this same program (the `voxmux` command or its bundle) with the same Node flags. */
export const spawnBenchProcess: SpawnBench = (args) => {
  const entry = process.argv[1];
  if (entry === undefined) throw new Error('spawnBenchProcess: no script path in process.argv');
  return spawn(process.execPath, [...process.execArgv, entry, 'bench', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
};

export interface BenchProcessResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The end of its stdout and stderr together, for a failure's message. */
  outputTail: string;
}

const OUTPUT_TAIL_CHARS = 4000;

/**
 * Runs one process per argument list and resolves when all have ended. `isSigint()` says whether
 * the abort came from a terminal's Ctrl-C, which the processes have already seen.
 */
export async function runBenchProcesses(
  argsList: readonly (readonly string[])[],
  p: { spawn: SpawnBench; signal: AbortSignal; isSigint: () => boolean },
): Promise<BenchProcessResult[]> {
  const children = argsList.map((args) => p.spawn(args));
  const onAbort = () => {
    if (p.isSigint()) return;
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  };
  p.signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await Promise.all(
      children.map(
        (child) =>
          new Promise<BenchProcessResult>((resolve) => {
            let output = '';
            const keep = (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS));
            child.stdout?.on('data', keep);
            child.stderr?.on('data', keep);
            child.once('error', (err) => resolve({ exitCode: null, signal: null, outputTail: `${output}${err.message}` }));
            child.once('close', (exitCode, signal) => resolve({ exitCode, signal, outputTail: output }));
          }),
      ),
    );
  } finally {
    p.signal.removeEventListener('abort', onAbort);
  }
}
