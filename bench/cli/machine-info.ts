/**
 * Where a run happened: the client machine and the git commit of the working tree. The commit is
 * read from the .git files directly, so the bench needs no git binary and no child process.
 */
import { readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';

export interface MachineInfo {
  platform: string;
  release: string;
  arch: string;
  cpuModel: string;
  cpuCores: number;
  memoryBytes: number;
  nodeVersion: string;
}

export function readMachineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    platform: os.platform(),
    release: os.release(),
    arch: os.arch(),
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cpuCores: cpus.length,
    memoryBytes: os.totalmem(),
    nodeVersion: process.version,
  };
}

/**
 * The commit checked out in the repository that contains `startDir`, or undefined when there is
 * no repository or no commit yet. Handles a `.git` file (worktrees, submodules), detached HEAD,
 * loose refs and packed refs.
 */
export async function readGitCommit(startDir: string): Promise<string | undefined> {
  const gitDir = await findGitDir(resolve(startDir));
  if (gitDir === undefined) return undefined;
  const head = (await readOptional(join(gitDir, 'HEAD')))?.trim();
  if (head === undefined) return undefined;
  if (/^[0-9a-f]{40,64}$/.test(head)) return head;
  const ref = /^ref:\s*(\S+)$/.exec(head)?.[1];
  if (ref === undefined) return undefined;
  const commonText = (await readOptional(join(gitDir, 'commondir')))?.trim();
  const commonDir = commonText === undefined ? gitDir : resolve(gitDir, commonText);
  for (const dir of [gitDir, commonDir]) {
    const loose = (await readOptional(join(dir, ref)))?.trim();
    if (loose !== undefined && /^[0-9a-f]{40,64}$/.test(loose)) return loose;
  }
  const packed = await readOptional(join(commonDir, 'packed-refs'));
  for (const line of packed?.split('\n') ?? []) {
    const [sha, name] = line.trim().split(' ');
    if (name === ref && sha !== undefined && /^[0-9a-f]{40,64}$/.test(sha)) return sha;
  }
  return undefined;
}

async function findGitDir(startDir: string): Promise<string | undefined> {
  let dir = startDir;
  for (;;) {
    const candidate = join(dir, '.git');
    const info = await stat(candidate).catch(() => undefined);
    if (info?.isDirectory() === true) return candidate;
    if (info?.isFile() === true) {
      const pointer = /^gitdir:\s*(.+)$/m.exec((await readOptional(candidate)) ?? '')?.[1]?.trim();
      if (pointer !== undefined) return isAbsolute(pointer) ? pointer : resolve(dir, pointer);
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** What every results file records about its run. */
export interface RunProvenance {
  /** The command line, secrets already replaced. */
  command: string[];
  gitCommit?: string;
  machine: MachineInfo;
  startedAt: string;
  endedAt: string;
}

export async function readRunProvenance(options: {
  cwd: string;
  command: string[];
  startedAtMs: number;
  endedAtMs: number;
  /** The commit to record, where the repository's own metadata would name another (a tree copied without it). */
  gitCommit?: string;
}): Promise<RunProvenance> {
  const gitCommit = options.gitCommit ?? (await readGitCommit(options.cwd));
  return {
    command: options.command,
    ...(gitCommit === undefined ? {} : { gitCommit }),
    machine: readMachineInfo(),
    startedAt: new Date(options.startedAtMs).toISOString(),
    endedAt: new Date(options.endedAtMs).toISOString(),
  };
}
