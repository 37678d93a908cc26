/**
 * Where pulled files go: `<models folder>/<owner>/<name>/<commit>/<path in the repository>`
 * (`datasets/<owner>/<name>/...` for a dataset). The commit is the one the revision named when the
 * pull started, so a folder never mixes two versions of a repository, and a pull of the same
 * commit finds what an earlier one left: complete files to skip and `.part` files to resume.
 */
import { isAbsolute, join, resolve } from 'node:path';
import { PullError } from './pull-error.js';
import type { RepoRef } from './repo-ref.js';

/** The default models folder, under the home directory. */
export const DEFAULT_MODELS_DIR_PARTS = ['.cache', 'voxmux', 'models'] as const;

/** Suffix of a file being downloaded; renamed to the file's name once complete and verified. */
export const PART_SUFFIX = '.part';

export interface ModelsDirSources {
  /** `--dir`. */
  dir?: string;
  /** `VOXMUX_MODELS_DIR`. */
  envDir?: string;
  homeDir: string;
  cwd: string;
}

/** The models folder: `--dir`, else VOXMUX_MODELS_DIR, else ~/.cache/voxmux/models; relative paths from the working directory. */
export function resolveModelsDir(sources: ModelsDirSources): string {
  const chosen = [sources.dir, sources.envDir].find((d) => d !== undefined && d !== '');
  return chosen === undefined ? join(sources.homeDir, ...DEFAULT_MODELS_DIR_PARTS) : resolve(sources.cwd, chosen);
}

/** The folder of a repository, holding one folder per version: `<owner>/<name>` (`datasets/<owner>/<name>`). */
export function toRepoDir(modelsDir: string, ref: Pick<RepoRef, 'repoType' | 'repoId'>): string {
  return join(modelsDir, ...(ref.repoType === 'dataset' ? ['datasets'] : []), ...ref.repoId.split('/'));
}

/** The folder of one version of a repository: named by its commit, or by the revision where the Hub gave no commit. */
export function toSnapshotDir(modelsDir: string, ref: Pick<RepoRef, 'repoType' | 'repoId'>, version: string): string {
  return join(toRepoDir(modelsDir, ref), encodeURIComponent(version));
}

/**
 * Whether a path the Hub listed can be written under the snapshot folder as it is: relative,
 * '/'-separated, with no empty, '.' or '..' part, no backslash and no NUL.
 */
export function isSafeRepoPath(path: string): boolean {
  if (path === '' || isAbsolute(path) || path.includes('\\') || path.includes('\0')) return false;
  return path.split('/').every((part) => part !== '' && part !== '.' && part !== '..');
}

/** The local path of a repository file. @throws bad_response for a path that would leave the snapshot folder */
export function toLocalPath(snapshotDir: string, repoPath: string): string {
  if (!isSafeRepoPath(repoPath)) {
    throw new PullError('bad_response', `The Hub listed a file path that cannot be written safely: '${repoPath}'`);
  }
  return join(snapshotDir, ...repoPath.split('/'));
}
