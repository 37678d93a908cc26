/**
 * `<file>.part.lock`: one pull at a time writes a file's `.part`. Two pulls into one folder (two
 * terminals, or replicas sharing a volume) would otherwise append to the same `.part` in turns.
 * The lock names its host and process. It is taken over when it is stale: on this host, when its
 * process is gone (a pull stopped by Ctrl-C leaves it); from another host, when its modification
 * time is older than `staleAfterMs` (the holder touches it while bytes arrive). Taking over is
 * atomic: of two pulls that find one stale lock at once, one only gets it (takePartLock).
 */
import * as nodeFs from 'node:fs/promises';
import { hostname } from 'node:os';
import { PullError } from './pull-error.js';

export const LOCK_SUFFIX = '.lock';

/** The locks this process holds: a lock naming this process's pid is stale unless listed here. */
const HELD_LOCK_PATHS = new Set<string>();
let asideCount = 0;

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
  /** The file operations; tests interleave two takeovers through it. @default node:fs/promises */
  fs?: LockFileSystem;
}

export type LockFileSystem = Pick<typeof nodeFs, 'open' | 'readFile' | 'rm' | 'stat' | 'utimes' | 'rename' | 'link'>;

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

async function readOwner(fs: LockFileSystem, lockPath: string): Promise<LockOwner | undefined> {
  try {
    const parsed = JSON.parse(await fs.readFile(lockPath, 'utf8')) as Partial<LockOwner>;
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
  const fs = options.fs ?? nodeFs;
  let asidePath: string | undefined;
  try {
    for (let tries = 0; ; tries++) {
      try {
        const handle = await fs.open(lockPath, 'wx');
        try {
          await handle.writeFile(JSON.stringify(self));
        } catch (err) {
          // A lock without its owner would read as another host's and block the next pull for
          // staleAfterMs: a full disk creates the file, then refuses its bytes.
          await handle.close().catch(() => undefined);
          await fs.rm(lockPath, { force: true }).catch(() => undefined);
          throw toLockError(err, lockPath);
        }
        await handle.close();
        break;
      } catch (err) {
        if (err instanceof PullError) throw err;
        if ((err as { code?: unknown }).code !== 'EEXIST') throw toLockError(err, lockPath);
        const lockedError = (owner: LockOwner | undefined) =>
          new PullError(
            'locked',
            `Another pull${owner === undefined ? '' : ` (process ${owner.pid} on ${owner.host})`} is downloading into ${partPath}: wait for it to end, or delete ${lockPath} if no pull is running`,
          );
        // The file judged is known by its inode: a takeover moves aside only that file, never a
        // lock that another pull created since.
        const judged = await fs.stat(lockPath).catch(() => undefined);
        if (judged === undefined) {
          if (tries > 0) throw lockedError(undefined);
          continue;
        }
        const owner = await readOwner(fs, lockPath);
        const ageMs = nowWallMs - judged.mtimeMs;
        const isOwnHost = owner?.host === self.host;
        // A lock naming this process is left by an earlier process of the same pid (a container's
        // pid 1), unless this process holds it now.
        const isStale = isOwnHost
          ? (owner!.pid === self.pid && !HELD_LOCK_PATHS.has(lockPath)) || !isProcessAlive(owner!.pid)
          : ageMs > staleAfterMs;
        // A second refusal means another pull took over the same stale lock first.
        if (!isStale || tries > 0) throw lockedError(owner);
        // Two pulls may find the same lock stale at once. Each renames it to a name of its own: the
        // rename succeeds for one of them only, and the other finds the lock gone (ENOENT) or, where
        // the first has already created its own lock, moves a file other than the one it judged.
        asidePath = `${lockPath}.stale-${self.pid}-${asideCount++}`;
        try {
          await fs.rename(lockPath, asidePath);
        } catch (renameErr) {
          if ((renameErr as { code?: unknown }).code === 'ENOENT') throw lockedError(undefined);
          throw toLockError(renameErr, lockPath);
        }
        const moved = await fs.stat(asidePath).catch(() => undefined);
        if (moved === undefined || moved.ino !== judged.ino || moved.dev !== judged.dev || moved.mtimeMs !== judged.mtimeMs) {
          // The other pull's fresh lock: it goes back where it was (link fails rather than replace
          // a lock created meanwhile).
          await fs.link(asidePath, lockPath).catch(() => undefined);
          throw lockedError(undefined);
        }
      }
    }
  } finally {
    // The stale lock is kept aside until this pull's own lock exists: while it exists, the file
    // system cannot give its inode to a new lock, which would then pass for the one judged.
    if (asidePath !== undefined) await fs.rm(asidePath, { force: true }).catch(() => undefined);
  }
  HELD_LOCK_PATHS.add(lockPath);
  let touchedWallMs = nowWallMs;
  return {
    async touch(wallMs) {
      if (wallMs - touchedWallMs < touchIntervalMs) return;
      touchedWallMs = wallMs;
      const at = new Date(wallMs);
      await fs.utimes(lockPath, at, at).catch(() => undefined);
    },
    async release() {
      HELD_LOCK_PATHS.delete(lockPath);
      await fs.rm(lockPath, { force: true });
    },
  };
}
