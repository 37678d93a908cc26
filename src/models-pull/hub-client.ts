/**
 * The Hugging Face Hub's HTTP API, as huggingface_hub uses it (file_download.py, hf_api.py):
 * - `GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true` gives the commit (`sha`) and
 *   every file (`siblings`) with its size, git blob id and, for LFS files, their sha256;
 * - `GET {endpoint}/{repo}/resolve/{commit}/{path}` gives the bytes, directly (small files, whose
 *   ETag is their git blob id) or through a redirect to a CDN (LFS files, whose X-Linked-Etag is
 *   their sha256). The token goes to the Hub's own host only: a redirect to another host (the CDN's
 *   signed URL) is followed without it, as huggingface_hub does.
 * Errors carry the Hub's X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { HttpResponse, HubTransport } from './hub-http.js';
import { toNetworkError } from './hub-http.js';
import { PullError } from './pull-error.js';
import { toRepoName, toRepoPageUrl, toResolveUrl, toRevisionApiUrl, type RepoRef } from './repo-ref.js';
import { parseRetryAfterMs } from './retry-policy.js';

export interface HubClientOptions {
  /** Such as https://huggingface.co, without a trailing slash. */
  endpoint: string;
  /** Sent as `Authorization: Bearer` to the Hub's host; empty or absent sends none. */
  token?: string | undefined;
  /** How messages name the token, such as 'the token saved in ~/.cache/huggingface/token'. @default 'HF_TOKEN' */
  tokenName?: string | undefined;
  userAgent: string;
  /** @default 10 */
  maxRedirects?: number;
}

export interface RepoFile {
  /** The path in the repository, '/'-separated. */
  path: string;
  sizeBytes?: number;
  /** LFS files: the sha256 of the content. */
  sha256?: string;
  /** The git blob id (sha1 of `blob <size>\0` and the content) of a file stored in git. */
  gitOid?: string;
}

export interface RepoSnapshot {
  /** The commit the revision names; absent where the endpoint gave none. */
  commit?: string;
  files: RepoFile[];
}

export interface FileResponse {
  /** 200: the whole file; 206: from `rangeStartBytes`; 416: the range asked for is past the end. */
  status: 200 | 206 | 416;
  body: AsyncIterable<Buffer>;
  discard(): void;
  /** Where the first byte of the body sits in the file (0 for a 200). */
  rangeStartBytes: number;
  /** The file's whole size, where the answer tells it. */
  sizeBytes?: number;
  /** X-Linked-Etag, or the ETag of a file the Hub served itself, unquoted. */
  etag?: string;
  /** X-Repo-Commit. */
  commit?: string;
  /** The URL the bytes came from, after redirects. */
  url: URL;
}

export interface HubClient {
  /** @throws unauthorized, forbidden, not_found, hub_error, network_error, bad_response */
  readSnapshot(ref: RepoRef, signal?: AbortSignal): Promise<RepoSnapshot>;
  /**
   * Opens a file's bytes from `offsetBytes` on (a Range request when above 0).
   * @throws unauthorized, forbidden, not_found, hub_error, network_error, bad_response
   */
  openFile(ref: RepoRef, file: { version: string; path: string; offsetBytes: number }, signal?: AbortSignal): Promise<FileResponse>;
}

const MAX_API_BODY_BYTES = 64 * 1024 * 1024;
const MAX_ERROR_BODY_BYTES = 64 * 1024;
const SHA256 = /^[0-9a-f]{64}$/;
const GIT_OID = /^[0-9a-f]{40}$/;

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** An ETag without its weak prefix and quotes (huggingface_hub _normalize_etag). */
export function normalizeEtag(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  return value.replace(/^W\//, '').replace(/^"|"$/g, '');
}

function toNonNegativeInteger(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d+$/.test(value.trim())) return undefined;
  return Number(value.trim());
}

/** `Content-Range: bytes START-END/TOTAL` (TOTAL may be `*`). */
export function parseContentRange(value: string | undefined): { startBytes: number; totalBytes?: number } | undefined {
  const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(value?.trim() ?? '');
  if (match === null) return undefined;
  return { startBytes: Number(match[1]), ...(match[3] === '*' ? {} : { totalBytes: Number(match[3]) }) };
}

async function readBody(response: HttpResponse, maxBytes: number, url: URL): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of response.body) {
      total += chunk.length;
      if (total > maxBytes) {
        response.discard();
        throw new PullError('bad_response', `The answer from ${url.host} is larger than ${maxBytes} bytes`);
      }
      chunks.push(chunk);
    }
  } catch (err) {
    throw toNetworkError(err, url);
  }
  return Buffer.concat(chunks);
}

/** The server's own words, from X-Error-Message or a JSON body's `error`. */
function serverMessageOf(headers: IncomingHttpHeaders, body: Buffer): string | undefined {
  const fromHeader = header(headers, 'x-error-message');
  if (fromHeader !== undefined && fromHeader !== '') return fromHeader;
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { error?: unknown };
    if (typeof parsed.error === 'string' && parsed.error !== '') return parsed.error;
  } catch {
    // not JSON: no message
  }
  return undefined;
}

export interface HubErrorContext {
  endpoint: string;
  ref: RepoRef;
  /** The file asked for; absent for the repository's listing. */
  path?: string;
  hasToken: boolean;
  /** How messages name the token that was sent. @default 'HF_TOKEN' */
  tokenName?: string | undefined;
  nowWallMs: number;
}

/** A Hub error answer as a PullError whose message says what to do. */
export function toHubError(
  answer: { status: number; headers: IncomingHttpHeaders; body: Buffer; url: URL },
  context: HubErrorContext,
): PullError {
  const { status, headers } = answer;
  const { ref, hasToken } = context;
  const tokenName = context.tokenName ?? 'HF_TOKEN';
  const repo = toRepoName(ref);
  const errorCode = header(headers, 'x-error-code');
  const serverMessage = serverMessageOf(headers, answer.body);
  const said = serverMessage === undefined ? '' : ` (the Hub said: ${serverMessage})`;
  const host = new URL(context.endpoint).host;
  // A refusal from the host a redirect led to (the CDN) says nothing about the token, which never
  // goes there: most often its signed URL has expired, and the next attempt asks the Hub for a fresh one.
  if (answer.url.host !== host && (status === 401 || status === 403 || status === 404)) {
    return new PullError(
      'hub_error',
      `${answer.url.host} answered ${status} for ${context.path ?? answer.url.pathname} of ${repo}, where the Hub redirected${serverMessage === undefined ? '' : ` (it said: ${serverMessage})`}`,
      { isTransient: status !== 404 },
    );
  }
  if (errorCode === 'GatedRepo') {
    const page = toRepoPageUrl(context.endpoint, ref);
    return hasToken
      ? new PullError(
          'forbidden',
          `${repo} is a gated repository and the account of ${tokenName} has no access yet: accept its conditions at ${page}${said}`,
        )
      : new PullError(
          'unauthorized',
          `${repo} is a gated repository: accept its conditions at ${page}, then set HF_TOKEN to an access token of that account${said}`,
        );
  }
  switch (status) {
    case 401:
      if (!hasToken) {
        return new PullError(
          'unauthorized',
          `${repo} was not found on ${host}, or it is private or gated (401 without a token): check the name, or set HF_TOKEN to an access token that may read it${said}`,
        );
      }
      if (serverMessage?.includes('Invalid credentials') === true || serverMessage?.includes('Invalid user token') === true) {
        return new PullError(
          'unauthorized',
          `${host} refused ${tokenName} as invalid: create an access token at ${context.endpoint}/settings/tokens${said}`,
        );
      }
      return new PullError(
        'unauthorized',
        `${repo} could not be read with ${tokenName} (401): check the name, and that the token may read the repository${said}`,
      );
    case 403:
      return new PullError(
        'forbidden',
        hasToken
          ? `${tokenName} may not read ${repo} (403): use an access token with read access to it${said}`
          : `${host} refused access to ${repo} (403): set HF_TOKEN to an access token with read access to it${said}`,
      );
    case 404:
      if (errorCode === 'RevisionNotFound') {
        return new PullError('not_found', `Revision '${ref.revision}' of ${repo} was not found: check the branch, tag or commit${said}`);
      }
      if (context.path !== undefined && errorCode !== 'RepoNotFound') {
        return new PullError('not_found', `File '${context.path}' was not found in ${repo} at revision ${ref.revision}${said}`);
      }
      return new PullError(
        'not_found',
        `Repository ${repo} was not found on ${host}: check the name${hasToken ? '' : ' (a private repository needs HF_TOKEN)'}${ref.repoType === 'model' ? '; a dataset is named datasets/<owner>/<name>' : ''}${said}`,
      );
    default: {
      const isTransient = status === 408 || status === 429 || status >= 500;
      const retryAfterMs = parseRetryAfterMs(header(headers, 'retry-after'), context.nowWallMs);
      return new PullError('hub_error', `${answer.url.host} answered ${status} for ${answer.url.pathname}${said}`, {
        isTransient,
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      });
    }
  }
}

interface RawSibling {
  rfilename?: unknown;
  size?: unknown;
  blobId?: unknown;
  lfs?: { sha256?: unknown; size?: unknown } | null;
}

/** The revision API's JSON as a RepoSnapshot. @throws bad_response */
export function toRepoSnapshot(json: unknown, what: string): RepoSnapshot {
  const bad = (detail: string) => new PullError('bad_response', `The Hub's file list for ${what} is not usable: ${detail}`);
  if (typeof json !== 'object' || json === null) throw bad('expected a JSON object');
  const { sha, siblings } = json as { sha?: unknown; siblings?: unknown };
  if (!Array.isArray(siblings)) throw bad('expected a siblings array');
  const files = (siblings as RawSibling[]).map((s): RepoFile => {
    if (typeof s?.rfilename !== 'string') throw bad('expected each sibling to have an rfilename');
    const lfsSize = typeof s.lfs?.size === 'number' ? s.lfs.size : undefined;
    const size = typeof s.size === 'number' ? s.size : lfsSize;
    const sha256 = typeof s.lfs?.sha256 === 'string' && SHA256.test(s.lfs.sha256) ? s.lfs.sha256 : undefined;
    const gitOid = s.lfs == null && typeof s.blobId === 'string' && GIT_OID.test(s.blobId) ? s.blobId : undefined;
    return {
      path: s.rfilename,
      ...(size === undefined || !Number.isSafeInteger(size) || size < 0 ? {} : { sizeBytes: size }),
      ...(sha256 === undefined ? {} : { sha256 }),
      ...(gitOid === undefined ? {} : { gitOid }),
    };
  });
  return { ...(typeof sha === 'string' && GIT_OID.test(sha) ? { commit: sha } : {}), files };
}

export function createHubClient(options: HubClientOptions, deps: { transport: HubTransport; wallMs: () => number }): HubClient {
  const { endpoint } = options;
  const hubHost = new URL(endpoint).host;
  const maxRedirects = options.maxRedirects ?? 10;
  const hasToken = options.token !== undefined && options.token !== '';
  const tokenName = options.tokenName;
  const baseHeaders: Record<string, string> = {
    'user-agent': options.userAgent,
    // The real bytes: sizes and Range offsets then count what is written to disk.
    'accept-encoding': 'identity',
    ...(hasToken ? { authorization: `Bearer ${options.token}` } : {}),
  };

  interface Followed {
    response: HttpResponse;
    url: URL;
    /** Headers of the Hub's own answers along the way (the redirect carries the LFS file's). */
    hubHeaders: IncomingHttpHeaders;
  }

  /** GETs `url`, following redirects; the token is dropped once a redirect leaves the Hub's host. */
  const follow = async (url: URL, extraHeaders: Record<string, string>, signal: AbortSignal | undefined): Promise<Followed> => {
    let current = url;
    const headers: Record<string, string> = { ...baseHeaders, ...extraHeaders };
    let hubHeaders: IncomingHttpHeaders = {};
    for (let redirects = 0; ; redirects++) {
      const response = await deps.transport.get(current, { headers, ...(signal === undefined ? {} : { signal }) });
      if (current.host === hubHost) hubHeaders = { ...hubHeaders, ...response.headers };
      const location = header(response.headers, 'location');
      if (![301, 302, 303, 307, 308].includes(response.status) || location === undefined) return { response, url: current, hubHeaders };
      await readBody(response, MAX_ERROR_BODY_BYTES, current);
      if (redirects >= maxRedirects) throw new PullError('bad_response', `More than ${maxRedirects} redirects from ${url.href}`);
      const next = new URL(location, current);
      if (current.protocol === 'https:' && next.protocol !== 'https:') {
        throw new PullError('bad_response', `Refused a redirect from https to ${next.protocol} (${next.host})`);
      }
      // A CDN's signed URL needs no token, and must not see it.
      if (next.host !== hubHost) delete headers.authorization;
      current = next;
    }
  };

  const fail = async (followed: Followed, context: Omit<HubErrorContext, 'nowWallMs'>): Promise<never> => {
    const body = await readBody(followed.response, MAX_ERROR_BODY_BYTES, followed.url).catch(() => Buffer.alloc(0));
    throw toHubError(
      { status: followed.response.status, headers: followed.response.headers, body, url: followed.url },
      { ...context, nowWallMs: deps.wallMs() },
    );
  };

  return {
    async readSnapshot(ref, signal) {
      const url = toRevisionApiUrl(endpoint, ref);
      const followed = await follow(url, { accept: 'application/json' }, signal);
      if (followed.response.status !== 200) return fail(followed, { endpoint, ref, hasToken, tokenName });
      const body = await readBody(followed.response, MAX_API_BODY_BYTES, followed.url);
      let json: unknown;
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch {
        throw new PullError('bad_response', `The Hub's file list for ${toRepoName(ref)} is not JSON (from ${followed.url.href})`);
      }
      return toRepoSnapshot(json, `${toRepoName(ref)}@${ref.revision}`);
    },

    async openFile(ref, file, signal) {
      const url = toResolveUrl(endpoint, ref, file.version, file.path);
      const followed = await follow(url, file.offsetBytes > 0 ? { range: `bytes=${file.offsetBytes}-` } : {}, signal);
      const { response, hubHeaders } = followed;
      const status = response.status;
      if (status !== 200 && status !== 206 && status !== 416)
        return fail(followed, { endpoint, ref, path: file.path, hasToken, tokenName });
      // The ETag of a redirect to a CDN, or of a CDN's answer, is not the Hub's hash of the file.
      const isServedByHub = followed.url.host === hubHost;
      const etag = normalizeEtag(header(hubHeaders, 'x-linked-etag') ?? (isServedByHub ? header(hubHeaders, 'etag') : undefined));
      const commit = header(hubHeaders, 'x-repo-commit');
      const linkedSize = toNonNegativeInteger(header(hubHeaders, 'x-linked-size'));
      const contentRange = parseContentRange(header(response.headers, 'content-range'));
      const isIdentity = (header(response.headers, 'content-encoding') ?? 'identity') === 'identity';
      const contentLength = isIdentity ? toNonNegativeInteger(header(response.headers, 'content-length')) : undefined;
      let rangeStartBytes = 0;
      let sizeBytes = linkedSize;
      if (status === 206) {
        if (contentRange === undefined) {
          response.discard();
          throw new PullError('bad_response', `${followed.url.host} answered 206 without a readable Content-Range`, { isTransient: true });
        }
        rangeStartBytes = contentRange.startBytes;
        sizeBytes ??= contentRange.totalBytes;
      } else if (status === 200) {
        sizeBytes ??= contentLength;
      }
      return {
        status,
        body: response.body,
        discard: response.discard,
        rangeStartBytes,
        ...(sizeBytes === undefined ? {} : { sizeBytes }),
        ...(etag === undefined || etag === '' ? {} : { etag }),
        ...(commit === undefined ? {} : { commit }),
        url: followed.url,
      };
    },
  };
}
