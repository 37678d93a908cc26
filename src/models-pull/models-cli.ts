/**
 * `voxmux models pull`: the command line, its help, and what it prints. Paths and the config
 * entry go to stdout; progress and notes to stderr.
 */
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { systemClock, type Clock } from '../core/clock.js';
import { resolveModelsDir } from './cache-layout.js';
import { globToRegExp } from './file-selection.js';
import { createHubTransport, type HubTransport } from './hub-http.js';
import { pullModel, type PullResult } from './pull.js';
import { isPullError, PullError, usageError } from './pull-error.js';
import type { TextSink } from './pull-progress.js';
import { normalizeEndpoint, parseRepoRef } from './repo-ref.js';
import type { RetryPolicy } from './retry-policy.js';

export const DEFAULT_ENDPOINT = 'https://huggingface.co';
const DEFAULT_CONCURRENCY = 4;
const MAX_CONCURRENCY = 16;

export const MODELS_USAGE = `usage: voxmux models <command> [options]

commands:
  pull    download files of a Hugging Face Hub repository; voxmux models pull --help

options:
  -h, --help   print this help and exit
`;

export const PULL_USAGE = `usage: voxmux models pull <repo-id>[@revision] [options]

Downloads files of a Hugging Face Hub repository into the models folder, under
<owner>/<name>/<commit>/, and prints their paths. For a repository that a voxmux adapter loads
(parakeet-tdt, whisper, streaming sortformer, Piper voices for vits) it pulls only the files the
adapter reads unless told otherwise, and prints a config entry that points the adapter at them.
Interrupted downloads resume; complete files are skipped; every file is checked against the
Hub's sha256 (LFS files) or git blob id.

  <repo-id>          owner/name of a model repository (datasets/owner/name for a dataset);
                     @revision: a branch, tag or commit (default main)

options:
  --file PATH        a file of the repository, by its path in it; repeatable
  --include GLOB     the files whose path matches (as huggingface-cli's: * also matches /); repeatable
  --exclude GLOB     leave out the files whose path matches; repeatable
  --dir DIR          the models folder (or VOXMUX_MODELS_DIR; default ~/.cache/voxmux/models)
  --endpoint URL     the Hub or a mirror of it (or HF_ENDPOINT; default ${DEFAULT_ENDPOINT})
  --concurrency N    files downloaded at once, 1 to ${MAX_CONCURRENCY} (default ${DEFAULT_CONCURRENCY})
  --json             print the result as one JSON object
  -h, --help         print this help and exit

environment: HF_TOKEN, a Hub access token for private and gated repositories (sent to the Hub's
host only, never to the CDN it redirects to); without it, the token that huggingface-cli login
saved (HF_TOKEN_PATH, or $HF_HOME/token, default ~/.cache/huggingface/token); files that
huggingface_hub's cache (HF_HUB_CACHE, or HUGGINGFACE_HUB_CACHE, or $HF_HOME/hub) holds at the
commit are hard-linked or copied from it, once their hash checks out; HF_HUB_OFFLINE=1 (or, where it
is unset, TRANSFORMERS_OFFLINE=1) sends nothing and succeeds only when an earlier pull or
huggingface_hub's cache left the files complete

exit codes: 0 done, 1 failed (the message says why; run again to resume), 2 bad arguments
`;

/** What the command reads from the environment (config/env.ts reads it). */
export interface ModelsPullEnvironment {
  /** HF_TOKEN. */
  hfToken?: string | undefined;
  /** HF_ENDPOINT. */
  hfEndpoint?: string | undefined;
  /** HF_HOME: huggingface_hub's folder, where `huggingface-cli login` saves the token. */
  hfHome?: string | undefined;
  /** HF_TOKEN_PATH: the saved token's file, instead of $HF_HOME/token. */
  hfTokenPath?: string | undefined;
  /** HF_HUB_CACHE (else HUGGINGFACE_HUB_CACHE): huggingface_hub's cache of downloaded files, instead of $HF_HOME/hub. */
  hfHubCache?: string | undefined;
  /** HF_HUB_OFFLINE (else TRANSFORMERS_OFFLINE): '1', 'on', 'yes' or 'true' (any case) pulls nothing and sends nothing. */
  hfHubOffline?: string | undefined;
  /** XDG_CACHE_HOME: HF_HOME's default is $XDG_CACHE_HOME/huggingface. */
  xdgCacheHome?: string | undefined;
  /** VOXMUX_MODELS_DIR. */
  modelsDir?: string | undefined;
}

export interface ModelsCliDeps {
  /** The package's version, sent in the User-Agent. */
  version: string;
  env: ModelsPullEnvironment;
  homeDir: string;
  cwd: string;
  stdout: TextSink;
  stderr: TextSink & { isTTY?: boolean; columns?: number };
  /** @default commandClock */
  clock?: Clock;
  /** @default createHubTransport() */
  transport?: HubTransport;
  freeBytes?: (dir: string) => Promise<number | undefined>;
  retryPolicy?: RetryPolicy;
  signal?: AbortSignal;
}

/**
 * The system clock, with timers that keep the process alive. systemClock's timers do not (a
 * server's timers must never hold its exit), and a command waiting out a retry's backoff has
 * nothing else keeping it alive: Node would end it mid-pull with exit code 13.
 */
export const commandClock: Clock = {
  nowMs: () => systemClock.nowMs(),
  wallMs: () => systemClock.wallMs(),
  setTimeout(callback, delayMs) {
    const handle = setTimeout(callback, Math.max(0, delayMs));
    return { cancel: () => clearTimeout(handle) };
  },
};

/** Whether an environment variable is on, as huggingface_hub reads its switches (_is_true): 1, ON, YES or TRUE, in any case. */
export function isEnvSwitchOn(value: string | undefined): boolean {
  return value !== undefined && ['1', 'ON', 'YES', 'TRUE'].includes(value.toUpperCase());
}

function parseConcurrency(text: string | undefined): number {
  if (text === undefined) return DEFAULT_CONCURRENCY;
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < 1 || value > MAX_CONCURRENCY) {
    throw usageError(`Expected --concurrency to be an integer from 1 to ${MAX_CONCURRENCY}: got '${text}'`);
  }
  return value;
}

/**
 * The token as huggingface_hub cleans it (_clean_token): without line breaks and surrounding
 * blanks, which a secret mounted from a file usually ends with; undefined when nothing is left.
 * @throws usage for characters no access token has: they would make the request itself fail
 */
export function toHubToken(text: string | undefined, source = 'HF_TOKEN'): string | undefined {
  const token = text?.replace(/[\r\n]/g, '').trim();
  if (token === undefined || token === '') return undefined;
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw usageError(`${source} holds characters that no access token has (it is sent in an HTTP header): set it to the token alone`);
  }
  return token;
}

/** `~/x` from the home directory, as Python's expanduser reads it; other paths from the working directory. */
function expandPath(path: string, deps: Pick<ModelsCliDeps, 'homeDir' | 'cwd'>): string {
  return path === '~' || path.startsWith('~/') ? join(deps.homeDir, path.slice(1)) : resolve(deps.cwd, path);
}

/** huggingface_hub's folder (HF_HOME): $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface. */
function resolveHfHome(deps: Pick<ModelsCliDeps, 'env' | 'homeDir' | 'cwd'>): string {
  const { env } = deps;
  return expandPath(env.hfHome ?? join(env.xdgCacheHome ?? join(deps.homeDir, '.cache'), 'huggingface'), deps);
}

/** huggingface_hub's cache of downloaded files (HF_HUB_CACHE): $HF_HUB_CACHE, else $HF_HOME/hub. */
export function resolveHfCacheDir(deps: Pick<ModelsCliDeps, 'env' | 'homeDir' | 'cwd'>): string {
  return deps.env.hfHubCache === undefined ? join(resolveHfHome(deps), 'hub') : expandPath(deps.env.hfHubCache, deps);
}

/**
 * The token as huggingface_hub finds it (get_token): HF_TOKEN, else the file that
 * `huggingface-cli login` writes, HF_TOKEN_PATH or $HF_HOME/token; with the name messages give it.
 * @throws usage for a token with characters no token has; disk_error for a token file that cannot be read
 */
export async function readHubToken(
  deps: Pick<ModelsCliDeps, 'env' | 'homeDir' | 'cwd'>,
): Promise<{ token: string; tokenName: string } | undefined> {
  const { env } = deps;
  if (env.hfToken !== undefined && env.hfToken !== '') {
    const token = toHubToken(env.hfToken);
    return token === undefined ? undefined : { token, tokenName: 'HF_TOKEN' };
  }
  const path = env.hfTokenPath === undefined ? join(resolveHfHome(deps), 'token') : expandPath(env.hfTokenPath, deps);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw new PullError('disk_error', `Could not read the Hub token saved in ${path}: ${(err as Error).message}`, { cause: err });
  }
  const token = toHubToken(text, path);
  return token === undefined ? undefined : { token, tokenName: `the token saved in ${path}` };
}

/** @throws usage for a pattern that is not a glob, such as a range out of order ('[z-a]') */
function checkGlobs(option: string, globs: readonly string[]): void {
  for (const glob of globs) {
    try {
      globToRegExp(glob);
    } catch (err) {
      throw usageError(`--${option} '${glob}' is not a valid pattern: ${(err as Error).message}`);
    }
  }
}

function printResult(result: PullResult, deps: Pick<ModelsCliDeps, 'stdout' | 'stderr'>): void {
  for (const file of result.files) deps.stdout.write(`${file.localPath}\n`);
  const config = result.config;
  if (config?.models !== undefined) {
    deps.stderr.write(`\nA models entry for the ${result.adapter} adapter (merge it into your config file; docs/adapters.md):\n`);
    deps.stdout.write(`${JSON.stringify({ models: config.models }, null, 2)}\n`);
  }
  if (config?.note !== undefined) deps.stderr.write(`${config.note}\n`);
}

async function runPull(argv: readonly string[], deps: ModelsCliDeps): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        file: { type: 'string', multiple: true },
        include: { type: 'string', multiple: true },
        exclude: { type: 'string', multiple: true },
        dir: { type: 'string' },
        endpoint: { type: 'string' },
        concurrency: { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw usageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help === true) {
    deps.stdout.write(PULL_USAGE);
    return 0;
  }
  if (positionals.length !== 1) {
    throw usageError(
      positionals.length === 0
        ? 'Expected a repository id, such as nvidia/parakeet-tdt-0.6b-v2'
        : `Expected one repository id: got ${positionals.length}`,
    );
  }
  const ref = parseRepoRef(positionals[0]!);
  const endpoint =
    values.endpoint !== undefined
      ? normalizeEndpoint(values.endpoint, '--endpoint')
      : normalizeEndpoint(deps.env.hfEndpoint ?? DEFAULT_ENDPOINT, 'HF_ENDPOINT');
  const concurrency = parseConcurrency(values.concurrency);
  checkGlobs('include', values.include ?? []);
  checkGlobs('exclude', values.exclude ?? []);
  const token = await readHubToken(deps);
  // An empty --dir (a script's unset variable) would otherwise mean the default folder, silently.
  if (values.dir === '') throw usageError("Expected --dir to name a folder: got ''");
  const modelsDir = resolveModelsDir({ dir: values.dir, envDir: deps.env.modelsDir, homeDir: deps.homeDir, cwd: deps.cwd });
  const transport = deps.transport ?? createHubTransport();
  try {
    const result = await pullModel(
      {
        ref,
        selection: { files: values.file ?? [], include: values.include ?? [], exclude: values.exclude ?? [] },
        modelsDir,
        endpoint,
        ...(token === undefined ? {} : token),
        userAgent: `voxmux/${deps.version}`,
        concurrency,
        ...(deps.retryPolicy === undefined ? {} : { retryPolicy: deps.retryPolicy }),
        isOffline: isEnvSwitchOn(deps.env.hfHubOffline),
        hfCacheDir: resolveHfCacheDir(deps),
      },
      {
        transport,
        clock: deps.clock ?? commandClock,
        progressOut: deps.stderr,
        isTTY: deps.stderr.isTTY === true,
        columns: deps.stderr.columns,
        ...(deps.freeBytes === undefined ? {} : { freeBytes: deps.freeBytes }),
        ...(deps.signal === undefined ? {} : { signal: deps.signal }),
      },
    );
    if (values.json === true) deps.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    else printResult(result, deps);
    return 0;
  } finally {
    if (deps.transport === undefined) transport.close();
  }
}

/**
 * `voxmux models ...`: its arguments in, the exit code out. Failures are printed on stderr with
 * what to do about them.
 */
export async function runModelsCli(argv: readonly string[], deps: ModelsCliDeps): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'pull':
        return await runPull(rest, deps);
      case '--help':
      case '-h':
      case 'help':
        deps.stdout.write(MODELS_USAGE);
        return 0;
      case undefined:
        deps.stderr.write(MODELS_USAGE);
        return 2;
      default:
        throw usageError(`Unknown command '${command}'`);
    }
  } catch (err) {
    if (!isPullError(err)) throw err;
    const where = command === 'pull' ? 'voxmux models pull' : 'voxmux models';
    deps.stderr.write(`${where}: ${err.message}${err.code === 'usage' ? ` (${where} --help)` : ''}\n`);
    return err.exitCode;
  }
}
