/**
 * Starts `voxmux serve` from the build (bin/voxmux.mjs) for a bench script and waits until
 * /health/ready answers 200. The returned function stops it with SIGTERM and waits for its exit.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface StartVoxmuxOptions {
  config: unknown;
  port: number;
  /** Where the config file is written. */
  workDir: string;
  /** Flags for node itself, before the script (e.g. --cpu-prof). */
  nodeArgs?: string[];
  env?: NodeJS.ProcessEnv;
  readyTimeoutMs?: number;
}

export async function startVoxmux(options: StartVoxmuxOptions): Promise<() => Promise<void>> {
  const file = join(options.workDir, `config-${options.port}.json`);
  writeFileSync(file, JSON.stringify(options.config));
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), 'bin/voxmux.mjs', 'serve', '--port', String(options.port), '--config', file, '--log-level', 'warn'],
    { stdio: 'inherit', env: options.env ?? process.env },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${options.port}/health/ready`)).status === 200) break;
    } catch {
      // starting
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`voxmux was not ready within ${options.readyTimeoutMs ?? 60_000} ms`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return async () => {
    child.kill('SIGTERM');
    await exited;
  };
}
