/**
 * One file of a pull: its bytes go to `<file>.part`, which is renamed to the file's name only once
 * the whole file has arrived and its hash matches the Hub's (sha256 for LFS files, the git blob id
 * for the others). A `.part` left by an interrupted run of the same commit is resumed with a Range
 * request; a server that ignores the Range (200), or answers another range, gets the file again
 * from the start. Transient failures are retried under the RetryPolicy; a failure during the body
 * keeps the bytes that arrived, and the next attempt asks for the rest.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { copyFile, link, mkdir, open, realpath, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Clock } from '../core/clock.js';
import { PART_SUFFIX } from './cache-layout.js';
import type { FileResponse, HubClient, RepoFile } from './hub-client.js';
import { toNetworkError } from './hub-http.js';
import { takePartLock } from './part-lock.js';
import { isPullError, PullError } from './pull-error.js';
import type { PullProgress } from './pull-progress.js';
import type { RepoRef } from './repo-ref.js';
import { decideRetry, type RetryPolicy } from './retry-policy.js';

export interface FileTask {
  ref: RepoRef;
  /** The commit to resolve, or the revision where the Hub gave no commit. */
  version: string;
  /** Whether `version` is a commit: only then is a `.part` from an earlier run known to hold the same file. */
  isPinned: boolean;
  file: RepoFile;
  localPath: string;
}

export interface DownloadDeps {
  hub: HubClient;
  clock: Clock;
  progress: PullProgress;
  policy: RetryPolicy;
  signal?: AbortSignal;
}

export type VerifiedBy = 'sha256' | 'git blob id' | 'size' | 'nothing';

export interface DownloadResult {
  sizeBytes: number;
  /** Bytes received in this run. */
  receivedBytes: number;
  verifiedBy: VerifiedBy;
}

/** Bytes gathered before a write: fewer, larger writes than one per socket chunk. */
const WRITE_BYTES = 1024 * 1024;
const SHA256 = /^[0-9a-f]{64}$/;
const GIT_OID = /^[0-9a-f]{40}$/;

/** A file system failure as disk_full or disk_error, naming the path. */
export function toDiskError(err: unknown, path: string): PullError {
  if (isPullError(err)) return err;
  const code = (err as { code?: unknown } | undefined)?.code;
  const codeText = typeof code === 'string' ? code : 'unknown';
  if (codeText === 'ENOSPC' || codeText === 'EDQUOT') {
    return new PullError('disk_full', `No space left for ${path} (${codeText}): free some space and run the command again; it resumes`, {
      cause: err,
    });
  }
  const detail = err instanceof Error ? err.message : String(err);
  return new PullError('disk_error', `Could not write ${path}: ${detail}`, { cause: err });
}

async function onDisk<T>(path: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (err) {
    throw toDiskError(err, path);
  }
}

/** The size of a file, or undefined when there is none. */
export async function sizeOnDisk(path: string): Promise<number | undefined> {
  try {
    const info = await stat(path);
    return info.isFile() ? info.size : undefined;
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return undefined;
    throw toDiskError(err, path);
  }
}

/** What the content must hash to, and the running hash of the bytes so far. */
class ContentCheck {
  readonly verifiedBy: VerifiedBy;
  readonly #expected: string | undefined;
  readonly #hash: Hash | undefined;

  constructor(expected: { sha256?: string | undefined; gitOid?: string | undefined; sizeBytes?: number | undefined }) {
    if (expected.sha256 !== undefined) {
      this.verifiedBy = 'sha256';
      this.#expected = expected.sha256;
      this.#hash = createHash('sha256');
    } else if (expected.gitOid !== undefined && expected.sizeBytes !== undefined) {
      this.verifiedBy = 'git blob id';
      this.#expected = expected.gitOid;
      this.#hash = createHash('sha1').update(`blob ${expected.sizeBytes}\0`);
    } else {
      this.verifiedBy = expected.sizeBytes === undefined ? 'nothing' : 'size';
    }
  }

  update(bytes: Buffer): void {
    this.#hash?.update(bytes);
  }

  /** The hash of the content where it differs from the expected one; undefined when it matches or nothing is hashed. */
  mismatch(): { expected: string; actual: string } | undefined {
    if (this.#hash === undefined || this.#expected === undefined) return undefined;
    const actual = this.#hash.digest('hex');
    return actual === this.#expected ? undefined : { expected: this.#expected, actual };
  }
}

function delay(clock: Clock, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted === true) return reject(signal.reason as Error);
    const onAbort = () => {
      timer.cancel();
      reject(signal!.reason as Error);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export interface CachedFileTask {
  file: RepoFile;
  localPath: string;
  /** The file in huggingface_hub's cache, at the same commit (hf-cache.ts). */
  cachedPath: string;
}

export interface CachedFileResult {
  sizeBytes: number;
  verifiedBy: VerifiedBy;
  /** 'linked': a hard link to the cache's blob; 'copied' where the two folders are on different file systems. */
  how: 'linked' | 'copied';
}

/** Suffix of a file being linked or copied from huggingface_hub's cache, before it is checked. */
const CACHED_SUFFIX = '.from-cache';

/**
 * Puts in place a file that huggingface_hub's cache holds at the same commit: hard-linked to the
 * cache's blob where both are on one file system, else copied, then checked as a download is.
 * Under the file's `.part` lock, so that a pull downloading the same file meanwhile is not raced.
 * @returns undefined where the cache has no such file or its content does not check out (the
 *   caller downloads it then; the cache is left as it is)
 * @throws locked, disk_full, disk_error
 */
export async function placeCachedFile(
  task: CachedFileTask,
  deps: { clock: Clock; note: (line: string) => void },
): Promise<CachedFileResult | undefined> {
  const { file, localPath, cachedPath } = task;
  const partPath = localPath + PART_SUFFIX;
  const tmpPath = partPath + CACHED_SUFFIX;
  let source: string;
  try {
    // A hard link to the snapshot's symlink would be a link to the link: the blob is linked instead.
    source = await realpath(cachedPath);
  } catch {
    return undefined;
  }
  await onDisk(localPath, () => mkdir(dirname(localPath), { recursive: true }));
  const lock = await takePartLock(partPath, deps.clock.wallMs());
  try {
    await onDisk(tmpPath, () => rm(tmpPath, { force: true }));
    let how: CachedFileResult['how'] = 'linked';
    try {
      await link(source, tmpPath);
    } catch {
      how = 'copied';
      try {
        await copyFile(source, tmpPath);
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR') return undefined;
        throw toDiskError(err, tmpPath);
      }
    }
    const sizeBytes = (await onDisk(tmpPath, () => stat(tmpPath))).size;
    const where = `the copy in huggingface_hub's cache (${cachedPath})`;
    if (file.sizeBytes !== undefined && sizeBytes !== file.sizeBytes) {
      await rm(tmpPath, { force: true });
      deps.note(`${file.path}: ${where} is ${sizeBytes} bytes, not the Hub's ${file.sizeBytes}: downloading it`);
      return undefined;
    }
    const check = new ContentCheck({ sha256: file.sha256, gitOid: file.gitOid, sizeBytes: file.sizeBytes });
    await onDisk(tmpPath, async () => {
      for await (const chunk of createReadStream(tmpPath)) check.update(chunk as Buffer);
    });
    const mismatch = check.mismatch();
    if (mismatch !== undefined) {
      await rm(tmpPath, { force: true });
      deps.note(`${file.path}: ${where} has ${check.verifiedBy} ${mismatch.actual}, not the Hub's: downloading it`);
      return undefined;
    }
    await onDisk(localPath, () => rename(tmpPath, localPath));
    // A .part an interrupted download left is of no use once the whole file is in place.
    await onDisk(partPath, () => rm(partPath, { force: true }));
    deps.note(
      `${file.path}: ${how === 'linked' ? 'hard-linked' : 'copied'} from huggingface_hub's cache (${cachedPath}), ${check.verifiedBy} verified`,
    );
    return { sizeBytes, verifiedBy: check.verifiedBy, how };
  } finally {
    await rm(tmpPath, { force: true }).catch(() => undefined);
    await lock.release();
  }
}

/**
 * Downloads one file to `task.localPath`.
 * @throws checksum_mismatch, size_mismatch, disk_full, disk_error, network_error and the Hub's errors (hub-client.ts)
 */
export async function downloadFile(task: FileTask, deps: DownloadDeps): Promise<DownloadResult> {
  const { hub, clock, progress, policy, signal } = deps;
  const { file } = task;
  const partPath = task.localPath + PART_SUFFIX;
  const startedMs = clock.nowMs();
  await onDisk(partPath, () => mkdir(dirname(partPath), { recursive: true }));
  const lock = await takePartLock(partPath, clock.wallMs());
  let handle: FileHandle;
  try {
    // Another pull of the same commit may have completed the file since this one planned it: it
    // held the lock until its rename. huggingface_hub looks again under its lock in the same way.
    if (task.isPinned && file.sizeBytes !== undefined && (await sizeOnDisk(task.localPath)) === file.sizeBytes) {
      await lock.release();
      progress.message(`${file.path}: completed by another pull meanwhile`);
      return { sizeBytes: file.sizeBytes, receivedBytes: 0, verifiedBy: 'size' };
    }
    if (!task.isPinned) await onDisk(partPath, () => rm(partPath, { force: true }));
    handle = await onDisk(partPath, () => open(partPath, 'a'));
  } catch (err) {
    await lock.release();
    throw err;
  }
  let offset = (await onDisk(partPath, () => handle.stat())).size;
  const bytesFromEarlierRun = offset;
  let receivedBytes = 0;
  let failedAttempts = 0;
  let isRetriedAfterMismatch = false;
  let check: ContentCheck | undefined;
  let sizeBytes = file.sizeBytes;

  const truncate = async (reason: string | undefined): Promise<void> => {
    if (reason !== undefined && offset > 0) progress.fileRestarted(file.path, offset, reason);
    await onDisk(partPath, () => handle.truncate(0));
    offset = 0;
    check = undefined;
  };

  /** Waits before the next attempt, or throws `err` when the policy says to stop. */
  const retryOrThrow = async (err: unknown, url: URL | undefined): Promise<void> => {
    if (signal?.aborted === true) throw signal.reason as Error;
    if (!isPullError(err) && url === undefined) throw err;
    const failure = isPullError(err) ? err : toNetworkError(err, url!);
    failedAttempts++;
    const decision = decideRetry(policy, { failedAttempts, isTransient: failure.isTransient, retryAfterMs: failure.retryAfterMs });
    if (!decision.shouldRetry) {
      if (!failure.isTransient) throw failure;
      throw new PullError(
        failure.code,
        `${failure.message}: gave up on ${file.path} after ${failedAttempts} attempts; run the command again to resume`,
        {
          cause: failure,
        },
      );
    }
    progress.message(
      `${file.path}: ${failure.message}: trying again in ${(decision.delayMs / 1000).toFixed(1)} s (attempt ${failedAttempts + 1} of ${policy.maxAttempts})`,
    );
    await delay(clock, decision.delayMs, signal);
  };

  /** Sets what the content is checked against, and hashes the bytes already on disk. */
  const startCheck = async (response: FileResponse): Promise<ContentCheck> => {
    const etag = response.etag;
    if (file.sha256 !== undefined && etag !== undefined && SHA256.test(etag) && etag !== file.sha256) {
      response.discard();
      throw new PullError('bad_response', `The Hub lists ${file.path} with sha256 ${file.sha256} but serves it tagged ${etag}`);
    }
    const sha256 = file.sha256 ?? (etag !== undefined && SHA256.test(etag) ? etag : undefined);
    const gitOid = sha256 === undefined ? (file.gitOid ?? (etag !== undefined && GIT_OID.test(etag) ? etag : undefined)) : undefined;
    const created = new ContentCheck({ sha256, gitOid, sizeBytes });
    if (offset > 0) {
      await onDisk(partPath, async () => {
        for await (const chunk of createReadStream(partPath, { start: 0, end: offset - 1 })) created.update(chunk as Buffer);
      });
    }
    return created;
  };

  try {
    progress.fileStarted(file.path);
    for (;;) {
      if (sizeBytes !== undefined && offset > sizeBytes) await truncate(`the partial file is longer than the file (${sizeBytes} bytes)`);
      let response: FileResponse;
      try {
        response = await hub.openFile(task.ref, { version: task.version, path: file.path, offsetBytes: offset }, signal);
      } catch (err) {
        await retryOrThrow(err, undefined);
        continue;
      }
      if (file.sizeBytes !== undefined && response.sizeBytes !== undefined && response.sizeBytes !== file.sizeBytes) {
        response.discard();
        throw new PullError('size_mismatch', `The Hub lists ${file.path} as ${file.sizeBytes} bytes but serves ${response.sizeBytes}`);
      }
      sizeBytes ??= response.sizeBytes;
      if (response.status === 416) {
        response.discard();
        // The range starts at the end: the partial file is the whole file, if its size is the file's.
        if (sizeBytes === undefined || offset !== sizeBytes) {
          await truncate('the server has no bytes past the partial file');
          await retryOrThrow(
            new PullError('hub_error', `${response.url.host} answered 416 for a partial file`, { isTransient: true }),
            undefined,
          );
          continue;
        }
        check ??= await startCheck(response);
      } else {
        if (offset > 0 && response.status === 200) await truncate('the server ignored the Range request');
        if (response.status === 206 && response.rangeStartBytes !== offset) {
          response.discard();
          await truncate(`the server answered from byte ${response.rangeStartBytes} instead of ${offset}`);
          continue;
        }
        check ??= await startCheck(response);
        const pending: Buffer[] = [];
        let pendingBytes = 0;
        let receivedThisAttempt = 0;
        const flush = async (): Promise<void> => {
          if (pendingBytes === 0) return;
          const bytes = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
          pending.length = 0;
          pendingBytes = 0;
          await onDisk(partPath, () => handle.write(bytes));
          await lock.touch(clock.wallMs());
          check!.update(bytes);
          offset += bytes.length;
          receivedBytes += bytes.length;
          receivedThisAttempt += bytes.length;
          progress.bytesReceived(bytes.length);
          if (sizeBytes !== undefined && offset > sizeBytes) {
            response.discard();
            throw new PullError('size_mismatch', `${response.url.host} sent more than the ${sizeBytes} bytes of ${file.path}`);
          }
        };
        try {
          for await (const chunk of response.body) {
            pending.push(chunk);
            pendingBytes += chunk.length;
            if (pendingBytes >= WRITE_BYTES) await flush();
          }
          await flush();
        } catch (err) {
          if (isPullError(err) && !err.isTransient) throw err;
          await flush();
          // Bytes arrived: the link works, so the count of failures in a row starts again.
          if (receivedThisAttempt > 0) failedAttempts = 0;
          await retryOrThrow(err, response.url);
          continue;
        }
        if (sizeBytes !== undefined && offset < sizeBytes) {
          if (receivedThisAttempt > 0) failedAttempts = 0;
          const early = new PullError('network_error', `${response.url.host} ended ${file.path} at byte ${offset} of ${sizeBytes}`, {
            isTransient: true,
          });
          await retryOrThrow(early, undefined);
          continue;
        }
      }
      const mismatch = check.mismatch();
      if (mismatch === undefined) break;
      // Bytes from an earlier run may be what is wrong: those are dropped and the file comes again, once.
      if (bytesFromEarlierRun > 0 && !isRetriedAfterMismatch) {
        isRetriedAfterMismatch = true;
        await truncate(`the ${check.verifiedBy} does not match after resuming`);
        continue;
      }
      await handle.close().catch(() => undefined);
      await rm(partPath, { force: true }).catch(() => undefined);
      throw new PullError(
        'checksum_mismatch',
        `${file.path} arrived with ${check.verifiedBy} ${mismatch.actual}, not the Hub's ${mismatch.expected}: the file was deleted; run the command again`,
      );
    }
    await onDisk(partPath, () => handle.sync());
    await onDisk(partPath, () => handle.close());
    await onDisk(task.localPath, () => rename(partPath, task.localPath));
    const result = { sizeBytes: offset, receivedBytes, verifiedBy: check.verifiedBy };
    progress.fileFinished({ path: file.path, ...result, durationMs: clock.nowMs() - startedMs });
    return result;
  } finally {
    // Closing twice is harmless; a failed download keeps its .part for the next run.
    await handle.close().catch(() => undefined);
    await lock.release();
  }
}
