/**
 * The NVIDIA MPS control daemon, started with private pipe and log directories so voxmux never
 * touches a daemon someone else runs, and stopped on close. Instances reach it through
 * CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY.
 *
 * The daemon starts without the environment's CUDA_VISIBLE_DEVICES: MPS renumbers the GPUs that
 * variable lists from 0 and reads its clients' CUDA_VISIBLE_DEVICES in that numbering, while each
 * instance names its GPU by nvidia-smi's index (an instance pinned to GPU 2 under a daemon started
 * with "2,3" would ask for a third GPU the daemon does not have).
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../telemetry/logger.js';
import type { CommandResult, SpawnRequest } from './spawn.js';

export interface MpsOptions {
  controlPath: string;
  /** Empty: a fresh temporary folder. */
  directory: string;
}

export interface MpsDeps {
  runCommand: (request: SpawnRequest & { input?: string; timeoutMs: number }) => Promise<CommandResult>;
  baseEnv: Readonly<Record<string, string>>;
  log: Logger;
}

export interface MpsController {
  start(): Promise<void>;
  /** Environment every GPU instance needs to reach this daemon. */
  instanceEnv(): Readonly<Record<string, string>>;
  stop(): Promise<void>;
}

const COMMAND_TIMEOUT_MS = 15_000;

export function createMpsController(options: MpsOptions, deps: MpsDeps): MpsController {
  const root = options.directory !== '' ? options.directory : mkdtempSync(join(tmpdir(), 'voxmux-mps-'));
  const env = { CUDA_MPS_PIPE_DIRECTORY: join(root, 'pipe'), CUDA_MPS_LOG_DIRECTORY: join(root, 'log') };
  const daemonEnv: Record<string, string> = { ...deps.baseEnv, ...env };
  delete daemonEnv.CUDA_VISIBLE_DEVICES;
  let isRunning = false;
  return {
    async start() {
      mkdirSync(env.CUDA_MPS_PIPE_DIRECTORY, { recursive: true });
      mkdirSync(env.CUDA_MPS_LOG_DIRECTORY, { recursive: true });
      const result = await deps.runCommand({
        command: options.controlPath,
        args: ['-d'],
        env: daemonEnv,
        timeoutMs: COMMAND_TIMEOUT_MS,
      });
      if (result.exitCode !== 0) {
        throw new Error(`MPS control daemon failed to start (exit ${result.exitCode}): ${result.stderr.trim() || result.stdout.trim()}`);
      }
      isRunning = true;
      deps.log.info({ pipeDirectory: env.CUDA_MPS_PIPE_DIRECTORY }, 'mps daemon started');
    },
    instanceEnv: () => env,
    async stop() {
      if (!isRunning) return;
      isRunning = false;
      const result = await deps.runCommand({
        command: options.controlPath,
        args: [],
        input: 'quit\n',
        env: daemonEnv,
        timeoutMs: COMMAND_TIMEOUT_MS,
      });
      if (result.exitCode !== 0) deps.log.warn({ exitCode: result.exitCode, stderr: result.stderr.trim() }, 'mps daemon stop failed');
      else deps.log.info({}, 'mps daemon stopped');
    },
  };
}
