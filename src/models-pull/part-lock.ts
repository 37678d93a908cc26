/**
 * `<file>.part.lock`: one pull at a time writes a file's `.part`. Two pulls into one folder (two
 * terminals, or replicas sharing a volume) would otherwise append to the same `.part` in turns.
 * The lock names its host and process. It is taken over when it is stale: on this host, when its
 * process is gone (a pull stopped by Ctrl-C leaves it); from another host, when its modification
 * time is older than `staleAfterMs` (the holder touches it while bytes arrive).
 */
import { open, readFile, rm, stat, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';
import { PullError } from './pull-error.js';

export const LOCK_SUFFIX = '.lock';

export interface PartLock {
  /** Marks the lock as alive; cheap enough to call on every write (it touches the file at most once a minute). */
  touch(wallMs: number): Promise<void>;
  release(): Promise<void>;
}

export interface PartLockOptions {
  /** A lock from another host not touched for this long is taken over. @default 600000 */
  staleAfterMs?: number;
  /** @default 60000 */
  touchIntervalMs?: number;
}

interface LockOwner {
  host: string;
  pid: number;
}

function isProcessAlive(pid: number): boolean {
  try {
    // Signal 0 sends nothing: it only asks whether the process exists.
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: unknown }).code === 'EPERM';
  }
}

async function readOwner(lockPath: string): Promise<LockOwner | undefined> {
  try {
    const parsed = JSON.parse(await readFile(lockPath, 'utf8')) as Partial<LockOwner>;
    return typeof parsed.host === 'string' && typeof parsed.pid === 'number' ? { host: parsed.host, pid: parsed.pid } : undefined;
  } catch {
    return undefined;
  }
}

function toLockError(err: unknown, lockPath: string): PullError {
  const code = (err as { code?: unknown }).code;
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return new PullError('disk_full', `No space left for the lock file ${lockPath} (${code}): free some space and run the command again`, {
      cause: err,
    });
  }
  return new PullError('disk_error', `Could not create the lock file ${lockPath}: ${(err as Error).message}`, { cause: err });
}

/**
 * Takes the lock of `partPath`.
 * @throws locked when another live pull holds it; disk_full or disk_error where the lock file cannot be written
 */
export async function takePartLock(partPath: string, nowWallMs: number, options: PartLockOptions = {}): Promise<PartLock> {
  const lockPath = partPath + LOCK_SUFFIX;
  const staleAfterMs = options.staleAfterMs ?? 600_000;
  const touchIntervalMs = options.touchIntervalMs ?? 60_000;
  const self: LockOwner = { host: hostname(), pid: process.pid };
  for (let tries = 0; ; tries++) {
    try {
      const handle = await open(lockPath, 'wx');
      try {
        await handle.writeFile(JSON.stringify(self));
      } catch (err) {
        // A lock without its owner would read as another host's and block the next pull for
        // staleAfterMs: a full disk creates the file, then refuses its bytes.
        await handle.close().catch(() => undefined);
        await rm(lockPath, { force: true }).catch(() => undefined);
        throw toLockError(err, lockPath);
      }
      await handle.close();
      break;
    } catch (err) {
      if (err instanceof PullError) throw err;
      if ((err as { code?: unknown }).code !== 'EEXIST') throw toLockError(err, lockPath);
      const owner = await readOwner(lockPath);
      const ageMs = nowWallMs - (await stat(lockPath).catch(() => ({ mtimeMs: 0 }))).mtimeMs;
      const isOwnHost = owner?.host === self.host;
      const isStale = isOwnHost ? owner!.pid === self.pid || !isProcessAlive(owner!.pid) : ageMs > staleAfterMs;
      // A second refusal means another pull took over the same stale lock first.
      if (!isStale || tries > 0) {
        throw new PullError(
          'locked',
          `Another pull${owner === undefined ? '' : ` (process ${owner.pid} on ${owner.host})`} is downloading into ${partPath}: wait for it to end, or delete ${lockPath} if no pull is running`,
        );
      }
      await rm(lockPath, { force: true });
    }
  }
  let touchedWallMs = nowWallMs;
  return {
    async touch(wallMs) {
      if (wallMs - touchedWallMs < touchIntervalMs) return;
      touchedWallMs = wallMs;
      const at = new Date(wallMs);
      await utimes(lockPath, at, at).catch(() => undefined);
    },
    async release() {
      await rm(lockPath, { force: true });
    },
  };
}
