/**
 * `<repo-id>[@revision]` as the command takes it, and the Hub URLs of a repository. A dataset is
 * named `datasets/<owner>/<name>`, as in the Hub's own URLs.
 */
import { usageError } from './pull-error.js';

export type RepoType = 'model' | 'dataset';

export interface RepoRef {
  repoType: RepoType;
  /** `owner/name` (or a bare `name`, as the Hub's oldest repositories have). */
  repoId: string;
  /** A branch, tag or commit. */
  revision: string;
}

export const DEFAULT_REVISION = 'main';

// The Hub's own rule (huggingface_hub validate_repo_id): word characters, '-' and '.', not at
// either end of a part, no '--' or '..', at most 96 characters.
const REPO_ID = /^(?:\b[\w.-]+\b\/)?\b[\w.-]+\b$/;
const REPO_ID_MAX_CHARS = 96;

/** Parses `owner/name`, `owner/name@revision` or `datasets/owner/name[@revision]`. */
export function parseRepoRef(text: string): RepoRef {
  const at = text.indexOf('@');
  const name = at === -1 ? text : text.slice(0, at);
  const revision = at === -1 ? DEFAULT_REVISION : text.slice(at + 1);
  const isDataset = name.startsWith('datasets/');
  const repoId = isDataset ? name.slice('datasets/'.length) : name;
  if (!REPO_ID.test(repoId) || repoId.length > REPO_ID_MAX_CHARS || repoId.includes('--') || repoId.includes('..')) {
    throw usageError(`Expected a Hub repository id such as nvidia/parakeet-tdt-0.6b-v2: got '${name}'`);
  }
  if (revision === '' || revision.includes('..') || /[\s\\]/.test(revision)) {
    throw usageError(`Expected a branch, tag or commit after '@': got '${revision}'`);
  }
  return { repoType: isDataset ? 'dataset' : 'model', repoId, revision };
}

/** How the command line names the repository: `owner/name`, or `datasets/owner/name`. */
export function toRepoName(ref: Pick<RepoRef, 'repoType' | 'repoId'>): string {
  return ref.repoType === 'dataset' ? `datasets/${ref.repoId}` : ref.repoId;
}

/** The repository's page, `{endpoint}/owner/name` (where a gated repository's conditions are accepted). */
export function toRepoPageUrl(endpoint: string, ref: Pick<RepoRef, 'repoType' | 'repoId'>): string {
  return `${endpoint}/${toRepoName(ref)}`;
}

/** `GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true`: the commit and every file with its size and LFS hash. */
export function toRevisionApiUrl(endpoint: string, ref: RepoRef): URL {
  const kind = ref.repoType === 'dataset' ? 'datasets' : 'models';
  return new URL(`${endpoint}/api/${kind}/${ref.repoId}/revision/${encodeURIComponent(ref.revision)}?blobs=true`);
}

/** `GET {endpoint}/{repo}/resolve/{revision}/{path}`: the file's bytes, usually through a redirect to a CDN. */
export function toResolveUrl(endpoint: string, ref: Pick<RepoRef, 'repoType' | 'repoId'>, revision: string, path: string): URL {
  const encodedPath = path.split('/').map(encodeURIComponent).join('/');
  return new URL(`${endpoint}/${toRepoName(ref)}/resolve/${encodeURIComponent(revision)}/${encodedPath}`);
}

/** The endpoint without a trailing slash; only http and https. `source` names where it came from in a usage error. */
export function normalizeEndpoint(text: string, source = 'the Hub endpoint'): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw usageError(`Expected ${source} to be an http or https URL: got '${text}'`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw usageError(`Expected ${source} to be an http or https URL: got '${text}'`);
  }
  if (url.search !== '' || url.hash !== '') throw usageError(`Expected ${source} without a query or fragment: got '${text}'`);
  return url.href.replace(/\/+$/, '');
}
