/**
 * A Hugging Face Hub on loopback for `voxmux models pull` tests, with a second server as its CDN.
 * The Hub answers the revision API (`/api/models/{repo}/revision/{revision}?blobs=true`) and
 * `resolve` URLs: files stored in git directly (ETag: git blob id), LFS files by a 302 to the CDN
 * (X-Linked-Etag: sha256, X-Linked-Size), both with X-Repo-Commit. Errors carry X-Error-Code and a
 * JSON `error`, as the Hub's do. Every request is recorded with its headers, and per-file faults
 * (5xx answers, a connection dropped midway, a Range ignored, wrong bytes) are set by the test.
 */
import { createHash } from 'node:crypto';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeFile {
  content: Buffer;
  /** Stored with LFS: served through the CDN, tagged with its sha256. */
  isLfs?: boolean;
}

export interface FakeRepo {
  commit: string;
  /** By path in the repository. */
  files: Record<string, FakeFile>;
  /** Readable only with the Hub's token. */
  isPrivate?: boolean;
  /** Files readable only with the Hub's token (the listing is public). */
  isGated?: boolean;
  /** Names that resolve to `commit`, besides `main` and the commit itself. */
  revisions?: string[];
}

export interface FileFaults {
  /** Statuses answered (by the server that serves the bytes) before the file is served. */
  statuses?: number[];
  /** This many requests send `dropAfterBytes` bytes of the body, then drop the connection. */
  drops?: number;
  dropAfterBytes?: number;
  /** Answer 200 with the whole file whatever the Range. */
  isRangeIgnored?: boolean;
  /** Served instead of the content (same tags). */
  wrongContent?: Buffer;
}

export interface RecordedRequest {
  server: 'hub' | 'cdn';
  url: string;
  headers: IncomingHttpHeaders;
}

export function sha256Of(content: Buffer): string {
  return createHash('sha256').update(content).digest('hex');
}

export function gitOidOf(content: Buffer): string {
  return createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
}

/** A 40-hex commit id from a seed. */
export function commitOf(seed: string): string {
  return createHash('sha1').update(seed).digest('hex');
}

function listen(server: http.Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

export class FakeHub {
  readonly requests: RecordedRequest[] = [];
  /** Per path in the repository. */
  readonly faults = new Map<string, FileFaults>();
  /** Statuses answered by the revision API before it answers. */
  apiStatuses: number[] = [];
  /** Called with each request's URL before it is answered: a test's stand-in for what happens meanwhile. */
  onRequest: ((url: string) => void) | undefined = undefined;
  /** Leave `sha` out of the revision API's answer, as a mirror might. */
  isCommitHidden = false;
  readonly #repos: Record<string, FakeRepo>;
  readonly #token: string | undefined;
  readonly #hub: http.Server;
  readonly #cdn: http.Server;
  #endpoint = '';
  #cdnOrigin = '';

  constructor(repos: Record<string, FakeRepo>, token: string | undefined) {
    this.#repos = repos;
    this.#token = token;
    this.#hub = http.createServer((req, res) => this.#onHub(req, res));
    this.#cdn = http.createServer((req, res) => this.#onCdn(req, res));
  }

  static async start(options: { repos: Record<string, FakeRepo>; token?: string }): Promise<FakeHub> {
    const hub = new FakeHub(options.repos, options.token);
    hub.#endpoint = await listen(hub.#hub);
    hub.#cdnOrigin = await listen(hub.#cdn);
    return hub;
  }

  get endpoint(): string {
    return this.#endpoint;
  }

  get cdnOrigin(): string {
    return this.#cdnOrigin;
  }

  requestsTo(server: 'hub' | 'cdn'): RecordedRequest[] {
    return this.requests.filter((r) => r.server === server);
  }

  async close(): Promise<void> {
    for (const server of [this.#hub, this.#cdn]) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  #fail(res: ServerResponse, status: number, errorCode: string | undefined, message: string): void {
    res.writeHead(status, {
      'content-type': 'application/json',
      ...(errorCode === undefined ? {} : { 'x-error-code': errorCode }),
      'x-error-message': message,
    });
    res.end(JSON.stringify({ error: message }));
  }

  /** Whether the request may read `repo`; answers the refusal itself when not. */
  #isAllowed(req: IncomingMessage, res: ServerResponse, repo: FakeRepo | undefined, isFileRequest: boolean): boolean {
    const auth = req.headers.authorization;
    if (auth !== undefined && auth !== `Bearer ${this.#token}`) {
      this.#fail(res, 401, undefined, 'Invalid credentials in Authorization header');
      return false;
    }
    const isAuthenticated = auth !== undefined;
    if (repo === undefined || (repo.isPrivate === true && !isAuthenticated)) {
      // The Hub does not tell a missing repository from a private one to a client without a token.
      if (isAuthenticated) this.#fail(res, 404, 'RepoNotFound', 'Repository not found');
      else this.#fail(res, 401, 'RepoNotFound', 'Invalid username or password.');
      return false;
    }
    if (repo.isGated === true && isFileRequest && !isAuthenticated) {
      this.#fail(res, 401, 'GatedRepo', 'Access to this model is restricted: you must be authenticated to access it');
      return false;
    }
    return true;
  }

  #findRevision(repo: FakeRepo, revision: string): boolean {
    return revision === 'main' || revision === repo.commit || (repo.revisions ?? []).includes(revision);
  }

  #onHub(req: IncomingMessage, res: ServerResponse): void {
    this.requests.push({ server: 'hub', url: req.url ?? '', headers: req.headers });
    this.onRequest?.(req.url ?? '');
    const url = new URL(req.url ?? '/', this.#endpoint);
    const api = /^\/api\/(models|datasets)\/(.+)\/revision\/([^/]+)$/.exec(url.pathname);
    if (api !== null) {
      const status = this.apiStatuses.shift();
      if (status !== undefined) return this.#fail(res, status, undefined, 'Service temporarily unavailable');
      const repoName = api[1] === 'datasets' ? `datasets/${api[2]}` : api[2]!;
      const repo = this.#repos[repoName];
      if (!this.#isAllowed(req, res, repo, false)) return;
      const revision = decodeURIComponent(api[3]!);
      if (!this.#findRevision(repo!, revision)) return this.#fail(res, 404, 'RevisionNotFound', `Invalid rev id: ${revision}`);
      const siblings = Object.entries(repo!.files).map(([path, file]) => ({
        rfilename: path,
        size: file.content.length,
        blobId: file.isLfs === true ? commitOf(`pointer ${path}`) : gitOidOf(file.content),
        ...(file.isLfs === true ? { lfs: { sha256: sha256Of(file.content), size: file.content.length, pointerSize: 134 } } : {}),
      }));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: repoName,
          ...(this.isCommitHidden ? {} : { sha: repo!.commit }),
          private: repo!.isPrivate === true,
          siblings,
        }),
      );
      return;
    }
    const resolve = /^\/((?:datasets\/)?[^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    if (resolve === null) return this.#fail(res, 404, undefined, 'Not Found');
    const repo = this.#repos[resolve[1]!];
    if (!this.#isAllowed(req, res, repo, true)) return;
    const revision = decodeURIComponent(resolve[2]!);
    if (!this.#findRevision(repo!, revision)) return this.#fail(res, 404, 'RevisionNotFound', `Invalid rev id: ${revision}`);
    const path = resolve[3]!.split('/').map(decodeURIComponent).join('/');
    const file = repo!.files[path];
    if (file === undefined) return this.#fail(res, 404, 'EntryNotFound', `${path} does not exist on "${revision}"`);
    if (file.isLfs === true) {
      const sha = sha256Of(file.content);
      res.writeHead(302, {
        location: `${this.#cdnOrigin}/blobs/${sha}?path=${encodeURIComponent(path)}&signature=x`,
        etag: `"${sha}"`,
        'x-linked-etag': `"${sha}"`,
        'x-linked-size': String(file.content.length),
        'x-repo-commit': repo!.commit,
      });
      res.end();
      return;
    }
    this.#serve(req, res, path, file, { etag: `"${gitOidOf(file.content)}"`, 'x-repo-commit': repo!.commit });
  }

  #onCdn(req: IncomingMessage, res: ServerResponse): void {
    this.requests.push({ server: 'cdn', url: req.url ?? '', headers: req.headers });
    const url = new URL(req.url ?? '/', this.#cdnOrigin);
    const path = url.searchParams.get('path') ?? '';
    const file = Object.values(this.#repos)
      .map((repo) => repo.files[path])
      .find((f) => f !== undefined && `/blobs/${sha256Of(f.content)}` === url.pathname);
    if (file === undefined) {
      res.writeHead(403, { 'content-type': 'text/plain' });
      res.end('AccessDenied');
      return;
    }
    // A CDN's own ETag is not the file's sha256: the client must not take it for one.
    this.#serve(req, res, path, file, { etag: `"cdn-${createHash('md5').update(file.content).digest('hex')}"` });
  }

  /** The file's bytes, from the Range's start where there is one, with the faults set for it. */
  #serve(req: IncomingMessage, res: ServerResponse, path: string, file: FakeFile, headers: Record<string, string>): void {
    const faults = this.faults.get(path) ?? {};
    const status = faults.statuses?.shift();
    if (status !== undefined) return this.#fail(res, status, undefined, 'Internal Error');
    const content = faults.wrongContent ?? file.content;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = range === null || faults.isRangeIgnored === true ? 0 : Number(range[1]);
    if (start >= content.length && start > 0) {
      res.writeHead(416, { 'content-range': `bytes */${content.length}` });
      res.end();
      return;
    }
    const body = content.subarray(start);
    res.writeHead(start > 0 ? 206 : 200, {
      ...headers,
      'content-type': 'application/octet-stream',
      'content-length': String(body.length),
      'accept-ranges': 'bytes',
      ...(start > 0 ? { 'content-range': `bytes ${start}-${content.length - 1}/${content.length}` } : {}),
    });
    if ((faults.drops ?? 0) > 0) {
      faults.drops = faults.drops! - 1;
      const sent = body.subarray(0, faults.dropAfterBytes ?? Math.floor(body.length / 2));
      // The bytes reach the socket before it is destroyed: the client gets exactly these, then a reset.
      res.write(sent, () => res.socket?.destroy());
      return;
    }
    res.end(body);
  }
}
