/**
 * huggingface_hub's own cache (HF_HUB_CACHE, default $HF_HOME/hub), read only: files that
 * huggingface_hub downloaded need not come again. Its layout (huggingface_hub file_download.py):
 * `models--<owner>--<name>/` (`datasets--...` for a dataset) holds `refs/<revision>` (the commit
 * the revision named), `blobs/<etag>` (the content, named by its sha256 for LFS files and its git
 * blob id for the others) and `snapshots/<commit>/<path>`, symlinks into `blobs/`.
 */
import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { RepoFile, RepoSnapshot } from './hub-client.js';
import { PullError } from './pull-error.js';
import type { RepoRef } from './repo-ref.js';

const COMMIT = /^[0-9a-f]{40}$/;
const SHA256 = /^[0-9a-f]{64}$/;

/** The cache folder of a repository: `models--<owner>--<name>` (repo_folder_name). */
export function toHfRepoDir(hfCacheDir: string, ref: Pick<RepoRef, 'repoType' | 'repoId'>): string {
  return join(hfCacheDir, `${ref.repoType}s--${ref.repoId.split('/').join('--')}`);
}

/** Where the cache keeps a file of a commit (a symlink into `blobs/`, or a copy where symlinks are not supported). */
export function toHfCachedPath(hfCacheDir: string, ref: RepoRef, file: { commit: string; path: string }): string {
  return join(toHfRepoDir(hfCacheDir, ref), 'snapshots', file.commit, ...file.path.split('/'));
}

function toReadError(err: unknown, path: string): PullError {
  return new PullError('disk_error', `Could not read ${path} in huggingface_hub's cache: ${(err as Error).message}`, { cause: err });
}

function isMissing(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** The files under `dir`, as '/'-separated paths relative to it; symlinks included, without following folders' links. */
async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...(await listFiles(join(dir, entry.name), path)));
    else if (entry.isFile() || entry.isSymbolicLink()) out.push(path);
  }
  return out;
}

/** A cached file with its size, and its hash where the blob's name gives it; undefined for a broken link. */
async function toCachedFile(snapshotDir: string, path: string): Promise<RepoFile | undefined> {
  const full = join(snapshotDir, ...path.split('/'));
  try {
    const info = await stat(full);
    if (!info.isFile()) return undefined;
    const blob = basename(await realpath(full));
    return {
      path,
      sizeBytes: info.size,
      ...(SHA256.test(blob) ? { sha256: blob } : COMMIT.test(blob) ? { gitOid: blob } : {}),
    };
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw toReadError(err, full);
  }
}

/**
 * The commit a revision names in the cache and the files the cache holds of it (not necessarily
 * every file of the commit: huggingface_hub downloads files one by one); undefined where the cache
 * has no snapshot of it.
 * @throws disk_error where the cache cannot be read
 */
export async function readHfCacheSnapshot(hfCacheDir: string, ref: RepoRef): Promise<(RepoSnapshot & { commit: string }) | undefined> {
  const repoDir = toHfRepoDir(hfCacheDir, ref);
  let commit = ref.revision;
  if (!COMMIT.test(commit)) {
    const refPath = join(repoDir, 'refs', ...ref.revision.split('/'));
    try {
      commit = (await readFile(refPath, 'utf8')).trim();
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw toReadError(err, refPath);
    }
    if (!COMMIT.test(commit)) return undefined;
  }
  const snapshotDir = join(repoDir, 'snapshots', commit);
  let paths: string[];
  try {
    paths = await listFiles(snapshotDir);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw toReadError(err, snapshotDir);
  }
  const files = (await Promise.all(paths.map((path) => toCachedFile(snapshotDir, path)))).filter((f) => f !== undefined);
  return { commit, files };
}
