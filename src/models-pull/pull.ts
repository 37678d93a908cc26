/**
 * A whole pull: read the revision's commit and file list, choose the files, skip those already
 * complete in the commit's folder, check the free space, then download the rest a few at a time.
 * The first failure stops the others; their `.part` files stay, and the next run resumes them.
 */
import { mkdir, statfs } from 'node:fs/promises';
import type { Clock } from '../core/clock.js';
import { findAdapterProfile, suggestModelConfig, type ConfigSuggestion, type KnownAdapter } from './adapter-profiles.js';
import { PART_SUFFIX, toLocalPath, toSnapshotDir } from './cache-layout.js';
import {
  downloadFile,
  placeCachedFile,
  sizeOnDisk,
  toDiskError,
  type CachedFileResult,
  type DownloadResult,
  type VerifiedBy,
} from './download-file.js';
import { readHfCacheSnapshot, toHfCachedPath } from './hf-cache.js';
import { hasSelection, selectFiles, type FileSelection } from './file-selection.js';
import { createHubClient, type HubClient, type RepoFile, type RepoSnapshot } from './hub-client.js';
import type { HubTransport } from './hub-http.js';
import { isPullError, PullError, usageError } from './pull-error.js';
import { createPullProgress, formatBytes, type TextSink } from './pull-progress.js';
import { toRepoName, type RepoRef } from './repo-ref.js';
import { DEFAULT_RETRY_POLICY, decideRetry, type RetryPolicy } from './retry-policy.js';
import { readRevisionRecord, saveRevisionRecord } from './revision-record.js';

export interface PullOptions {
  ref: RepoRef;
  selection: FileSelection;
  /** The models folder (cache-layout.ts resolveModelsDir). */
  modelsDir: string;
  /** The Hub, without a trailing slash. */
  endpoint: string;
  token?: string | undefined;
  /** How messages name the token. @default 'HF_TOKEN' */
  tokenName?: string | undefined;
  userAgent: string;
  /** Files downloaded at once. @default 4 */
  concurrency?: number;
  /** @default DEFAULT_RETRY_POLICY */
  retryPolicy?: RetryPolicy;
  /**
   * HF_HUB_OFFLINE: send nothing; succeed only where an earlier pull left the revision's selected
   * files complete (revision-record.ts tells which commit and files those are).
   */
  isOffline?: boolean;
  /**
   * huggingface_hub's cache (HF_HUB_CACHE): a file it holds at the pulled commit is hard-linked or
   * copied from there, once its hash checks out, instead of downloaded.
   */
  hfCacheDir?: string | undefined;
}

export interface PullDeps {
  transport: HubTransport;
  clock: Clock;
  /** Where progress and notes go (stderr). */
  progressOut: TextSink;
  isTTY: boolean;
  /** The terminal's width, where progressOut is one. */
  columns?: number | undefined;
  /** Free bytes of the file system holding `dir`; undefined when unknown. @default statfs */
  freeBytes?: (dir: string) => Promise<number | undefined>;
  signal?: AbortSignal;
}

/** 'linked' and 'copied': from huggingface_hub's cache. */
export type PulledFileStatus = 'downloaded' | 'skipped' | 'linked' | 'copied';

export interface PulledFileResult {
  /** The path in the repository. */
  path: string;
  localPath: string;
  sizeBytes: number | undefined;
  status: PulledFileStatus;
  /** How a downloaded, linked or copied file was checked. */
  verifiedBy?: VerifiedBy;
}

export interface PullResult {
  /** `owner/name`, or `datasets/owner/name`. */
  repo: string;
  revision: string;
  /** The commit the revision named; absent where the Hub gave none (the folder is then named after the revision). */
  commit?: string;
  snapshotDir: string;
  files: PulledFileResult[];
  /** The adapter that loads this repository, where it is one voxmux knows. */
  adapter?: KnownAdapter;
  config?: ConfigSuggestion;
}

async function statfsFreeBytes(dir: string): Promise<number | undefined> {
  try {
    const info = await statfs(dir);
    return info.bavail * info.bsize;
  } catch {
    return undefined;
  }
}

function delay(clock: Clock, ms: number): Promise<void> {
  return new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
}

/** Runs `run` over `items`, `concurrency` at a time; the first failure aborts the rest and is thrown. */
async function runPool<T>(
  items: readonly T[],
  concurrency: number,
  run: (item: T, signal: AbortSignal) => Promise<void>,
  outer?: AbortSignal,
) {
  const controller = new AbortController();
  const onOuterAbort = () => controller.abort(outer!.reason);
  outer?.addEventListener('abort', onOuterAbort, { once: true });
  let next = 0;
  let firstError: unknown;
  const lane = async (): Promise<void> => {
    while (next < items.length && !controller.signal.aborted) {
      const item = items[next++]!;
      try {
        await run(item, controller.signal);
      } catch (err) {
        if (firstError === undefined) {
          firstError = err;
          controller.abort(err);
        }
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, lane));
  } finally {
    outer?.removeEventListener('abort', onOuterAbort);
  }
  if (firstError !== undefined) throw firstError;
}

/** The revision's commit and files from the Hub, retried under the policy. */
async function readHubSnapshot(
  task: { hub: HubClient; ref: RepoRef; policy: RetryPolicy },
  deps: { clock: Clock; note: (line: string) => void; signal: AbortSignal | undefined },
): Promise<RepoSnapshot> {
  const { hub, ref, policy } = task;
  for (let failedAttempts = 1; ; failedAttempts++) {
    try {
      return await hub.readSnapshot(ref, deps.signal);
    } catch (err) {
      if (!isPullError(err)) throw err;
      const decision = decideRetry(policy, { failedAttempts, isTransient: err.isTransient, retryAfterMs: err.retryAfterMs });
      if (!decision.shouldRetry) {
        if (!err.isTransient) throw err;
        throw new PullError(err.code, `${err.message}: gave up after ${failedAttempts} attempts`, { cause: err });
      }
      deps.note(
        `${err.message}: trying again in ${(decision.delayMs / 1000).toFixed(1)} s (attempt ${failedAttempts + 1} of ${policy.maxAttempts})`,
      );
      await delay(deps.clock, decision.delayMs);
    }
  }
}

/**
 * The commit and files an earlier pull recorded for the revision, else those huggingface_hub's
 * cache holds of it (`isPartial`: maybe not every file of the commit).
 * @throws offline where neither has the revision; disk_error
 */
async function readOfflineSnapshot(
  options: Pick<PullOptions, 'modelsDir' | 'hfCacheDir' | 'ref'>,
): Promise<{ snapshot: RepoSnapshot & { commit: string }; isPartial: boolean }> {
  const { modelsDir, hfCacheDir, ref } = options;
  const record = await readRevisionRecord(modelsDir, ref);
  if (record.isFound) return { snapshot: record.snapshot, isPartial: false };
  const cached = hfCacheDir === undefined ? undefined : await readHfCacheSnapshot(hfCacheDir, ref);
  if (cached !== undefined) return { snapshot: cached, isPartial: true };
  throw new PullError(
    'offline',
    `HF_HUB_OFFLINE is set and no pull of ${toRepoName(ref)}@${ref.revision} into ${modelsDir} recorded its ${record.commit === undefined ? 'commit' : `files (commit ${record.commit})`}` +
      `${hfCacheDir === undefined ? '' : `, nor has huggingface_hub's cache (${hfCacheDir}) a snapshot of it`}: unset HF_HUB_OFFLINE to download it`,
  );
}

function hasContentHash(file: RepoFile): boolean {
  return file.sha256 !== undefined || (file.gitOid !== undefined && file.sizeBytes !== undefined);
}

/**
 * Pulls the selected files of a Hub repository into the models folder.
 * @throws usage, unauthorized, forbidden, not_found, checksum_mismatch, size_mismatch, disk_full, disk_error, network_error, hub_error, bad_response, offline
 * @example
 * const result = await pullModel(
 *   { ref: parseRepoRef('nvidia/parakeet-tdt-0.6b-v2'), selection: { files: [], include: [], exclude: [] },
 *     modelsDir, endpoint: 'https://huggingface.co', userAgent: 'voxmux/0.1.0' },
 *   { transport: createHubTransport(), clock: systemClock, progressOut: process.stderr, isTTY: true },
 * );
 */
export async function pullModel(options: PullOptions, deps: PullDeps): Promise<PullResult> {
  const { ref, endpoint } = options;
  const { clock, progressOut } = deps;
  const policy = options.retryPolicy ?? DEFAULT_RETRY_POLICY;
  const repo = toRepoName(ref);
  const note = (line: string) => progressOut.write(`${line}\n`);
  const hub = createHubClient(
    { endpoint, token: options.token, tokenName: options.tokenName, userAgent: options.userAgent },
    { transport: deps.transport, wallMs: () => clock.wallMs() },
  );

  const isOffline = options.isOffline === true;
  let snapshot: RepoSnapshot;
  let isListingPartial = false;
  if (isOffline) {
    const offline = await readOfflineSnapshot(options);
    snapshot = offline.snapshot;
    isListingPartial = offline.isPartial;
  } else {
    snapshot = await readHubSnapshot({ hub, ref, policy }, { clock, note, signal: deps.signal });
  }

  const profile = findAdapterProfile(ref);
  let selection = options.selection;
  if (!hasSelection(selection) && profile !== undefined) {
    if (profile.selectionHint !== undefined) throw usageError(profile.selectionHint);
    selection = { ...selection, include: profile.defaultInclude };
    note(`${repo}: the files the ${profile.adapter} adapter reads (--include '*' pulls every file)`);
  }
  // huggingface_hub's cache may lack files of the commit: a named one it lacks is reported below
  // with the other missing files.
  const listed = new Set(snapshot.files.map((f) => f.path));
  const listing = isListingPartial
    ? [...snapshot.files, ...selection.files.filter((p) => !listed.has(p)).map((path) => ({ path }))]
    : snapshot.files;
  const { selected, missing } = selectFiles(listing, selection);
  if (missing.length > 0) {
    throw new PullError('not_found', `${repo}@${ref.revision} has no file ${missing.map((p) => `'${p}'`).join(', ')}`);
  }
  if (selected.length === 0) {
    throw new PullError(
      isListingPartial ? 'offline' : 'not_found',
      `No file of ${repo}@${ref.revision} ${isListingPartial ? "in huggingface_hub's cache (HF_HUB_OFFLINE is set) " : ''}matches ` +
        [...selection.include.map((g) => `--include '${g}'`), ...selection.exclude.map((g) => `--exclude '${g}'`)].join(' '),
    );
  }

  const isPinned = snapshot.commit !== undefined;
  const version = snapshot.commit ?? ref.revision;
  if (!isPinned) note(`${endpoint} gave no commit for ${ref.revision}: the files go under the revision's name and are downloaded whole`);
  const snapshotDir = toSnapshotDir(options.modelsDir, ref, version);
  const planned = await Promise.all(
    selected.map(async (file: RepoFile) => {
      const localPath = toLocalPath(snapshotDir, file.path);
      const existingBytes = isPinned ? await sizeOnDisk(localPath) : undefined;
      // Offline, a file the Hub listed without a size is taken as it is: nothing can check it.
      const isComplete = existingBytes !== undefined && (existingBytes === file.sizeBytes || (isOffline && file.sizeBytes === undefined));
      const partBytes = isPinned && !isComplete ? ((await sizeOnDisk(localPath + PART_SUFFIX)) ?? 0) : 0;
      return { file, localPath, isComplete, partBytes };
    }),
  );
  if (!isOffline) {
    try {
      await mkdir(snapshotDir, { recursive: true });
    } catch (err) {
      throw toDiskError(err, snapshotDir);
    }
    if (snapshot.commit !== undefined)
      await saveRevisionRecord(options.modelsDir, { ref, snapshot: { ...snapshot, commit: snapshot.commit } });
  }
  const placed = new Map<string, CachedFileResult>();
  const hfCacheDir = options.hfCacheDir;
  if (hfCacheDir !== undefined && isPinned) {
    // Online, only a file whose hash the Hub gives is taken from the cache: its size alone does
    // not tell it from another version of the file.
    const candidates = planned.filter((p) => !p.isComplete && (isOffline || hasContentHash(p.file)));
    await runPool(
      candidates,
      options.concurrency ?? 4,
      async (item) => {
        const cachedPath = toHfCachedPath(hfCacheDir, ref, { commit: version, path: item.file.path });
        const result = await placeCachedFile({ file: item.file, localPath: item.localPath, cachedPath }, { clock, note });
        if (result !== undefined) placed.set(item.file.path, result);
      },
      deps.signal,
    );
  }
  const toDownload = planned.filter((p) => !p.isComplete && !placed.has(p.file.path));
  if (isOffline) {
    if (toDownload.length > 0) {
      throw new PullError(
        'offline',
        `HF_HUB_OFFLINE is set and ${toDownload.length} of ${planned.length} files of ${repo}@${ref.revision} (commit ${version}) are not complete in ${snapshotDir}: ` +
          `${toDownload.map((p) => `'${p.file.path}'`).join(', ')}; unset HF_HUB_OFFLINE to download them`,
      );
    }
    note(
      `${repo}@${ref.revision} (commit ${version}): HF_HUB_OFFLINE is set: ${planned.length} of ${planned.length} files in place, nothing sent`,
    );
  }
  const isEverySizeKnown = toDownload.every((p) => p.file.sizeBytes !== undefined);
  const bytesToDownload = isEverySizeKnown
    ? toDownload.reduce((sum, p) => sum + Math.max(0, p.file.sizeBytes! - p.partBytes), 0)
    : undefined;

  if (bytesToDownload !== undefined && bytesToDownload > 0) {
    const freeBytes = await (deps.freeBytes ?? statfsFreeBytes)(snapshotDir);
    if (freeBytes !== undefined && freeBytes < bytesToDownload) {
      throw new PullError(
        'disk_full',
        `${formatBytes(bytesToDownload)} to download but ${formatBytes(freeBytes)} free in ${snapshotDir}: free some space, or choose another folder with --dir`,
      );
    }
  }
  const skipped = planned.length - toDownload.length - placed.size;
  if (!isOffline) {
    note(
      `${repo}@${ref.revision}${isPinned ? ` (commit ${version})` : ''}: ${toDownload.length} of ${planned.length} files to download` +
        `${bytesToDownload === undefined ? '' : `, ${formatBytes(bytesToDownload)}`}${skipped > 0 ? `; ${skipped} already complete` : ''}` +
        `${placed.size > 0 ? `; ${placed.size} from huggingface_hub's cache` : ''}`,
    );
  }

  const results = new Map<string, DownloadResult>();
  const progress = createPullProgress(
    { isTTY: deps.isTTY, columns: deps.columns, totalFiles: toDownload.length, totalBytes: bytesToDownload },
    { out: progressOut, clock },
  );
  try {
    await runPool(
      toDownload,
      options.concurrency ?? 4,
      async (item, signal) => {
        const result = await downloadFile(
          { ref, version, isPinned, file: item.file, localPath: item.localPath },
          { hub, clock, progress, policy, signal },
        );
        results.set(item.file.path, result);
      },
      deps.signal,
    );
  } finally {
    progress.close();
  }

  const files = planned.map(({ file, localPath, isComplete }): PulledFileResult => {
    const result = results.get(file.path) ?? placed.get(file.path);
    const fromCache = placed.get(file.path);
    return {
      path: file.path,
      localPath,
      sizeBytes: result?.sizeBytes ?? file.sizeBytes,
      status: isComplete ? 'skipped' : (fromCache?.how ?? 'downloaded'),
      ...(result === undefined ? {} : { verifiedBy: result.verifiedBy }),
    };
  });
  const config =
    profile === undefined
      ? undefined
      : suggestModelConfig(profile, { ref, snapshotDir, files: files.map((f) => ({ repoPath: f.path, localPath: f.localPath })) });
  return {
    repo,
    revision: ref.revision,
    ...(snapshot.commit === undefined ? {} : { commit: snapshot.commit }),
    snapshotDir,
    files,
    ...(profile === undefined ? {} : { adapter: profile.adapter, config: config! }),
  };
}
