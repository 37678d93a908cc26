/**
 * The only file that starts processes (house style). Instances get two extra pipes: fd 3 carries
 * frames down, fd 4 frames up (docs/protocol.md), so a library printing to stdout cannot corrupt
 * the protocol.
 */
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';

export interface SpawnRequest {
  command: string;
  args: readonly string[];
  env: Readonly<Record<string, string>>;
  cwd?: string;
}

export interface InstanceChild {
  readonly pid: number | undefined;
  readonly down: Writable;
  readonly up: Readable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  kill(signal: NodeJS.Signals): void;
  onExit(listener: (exitCode: number | null, signal: NodeJS.Signals | null) => void): void;
  onError(listener: (err: Error) => void): void;
}

export type SpawnInstance = (request: SpawnRequest) => InstanceChild;

export const spawnInstance: SpawnInstance = (request) => {
  const child: ChildProcess = spawnChild(request.command, [...request.args], {
    env: { ...request.env },
    cwd: request.cwd,
    stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
  });
  const stdio = child.stdio as unknown as [null, Readable, Readable, Writable, Readable];
  return {
    get pid() {
      return child.pid;
    },
    down: stdio[3],
    up: stdio[4],
    stdout: stdio[1],
    stderr: stdio[2],
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    onExit: (listener) => child.once('exit', listener),
    onError: (listener) => child.once('error', listener),
  };
};

export interface CommandResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a short helper command to completion (the MPS control daemon's start and quit). */
export function runCommand(request: SpawnRequest & { input?: string; timeoutMs: number }): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = spawnChild(request.command, [...request.args], {
      env: { ...request.env },
      cwd: request.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: request.timeoutMs,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', (err) => resolve({ exitCode: null, stdout, stderr: stderr + err.message }));
    child.once('close', (exitCode) => resolve({ exitCode, stdout, stderr }));
    child.stdin.end(request.input ?? '');
  });
}
