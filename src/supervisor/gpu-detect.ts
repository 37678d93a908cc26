/** Lists the node's GPUs with nvidia-smi; none when it is absent or fails (a CPU-only node). */
import type { CommandResult, SpawnRequest } from './spawn.js';

export async function detectGpus(
  runCommand: (request: SpawnRequest & { timeoutMs: number }) => Promise<CommandResult>,
  env: Readonly<Record<string, string>>,
): Promise<number[]> {
  const result = await runCommand({ command: 'nvidia-smi', args: ['--query-gpu=index', '--format=csv,noheader'], env, timeoutMs: 10_000 });
  if (result.exitCode !== 0) return [];
  return result.stdout
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => /^\d+$/.test(line))
    .map(Number);
}
