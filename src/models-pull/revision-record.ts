/**
 * What a pull records beside the commit folders, so that a later pull with HF_HUB_OFFLINE set can
 * tell, without the Hub, which commit a branch or tag named and which files that commit has:
 * - `<repo folder>/.pull/refs/<revision>` holds the commit the revision named when it was last
 *   pulled (huggingface_hub keeps `refs/<revision>` in its cache for the same reason);
 * - `<repo folder>/.pull/files/<commit>.json` holds the commit's files as the Hub listed them, with
 *   their sizes and hashes.
 * A git ref name has no part starting with '.', so `.pull` is never the folder of a revision.
 */
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { toRepoDir } from './cache-layout.js';
import { toDiskError } from './download-file.js';
import type { RepoFile, RepoSnapshot } from './hub-client.js';
import type { RepoRef } from './repo-ref.js';

const RECORD_DIR = '.pull';
const COMMIT = /^[0-9a-f]{40}$/;
let tmpCount = 0;

function toRefPath(modelsDir: string, ref: RepoRef): string {
  return join(toRepoDir(modelsDir, ref), RECORD_DIR, 'refs', encodeURIComponent(ref.revision));
}

function toFilesPath(modelsDir: string, ref: RepoRef, commit: string): string {
  return join(toRepoDir(modelsDir, ref), RECORD_DIR, 'files', `${commit}.json`);
}

/** Writes `text` whole or not at all: two pulls of one repository may record at once. */
async function writeWhole(path: string, text: string): Promise<void> {
  const tmpPath = `${path}.${process.pid}-${tmpCount++}.tmp`;
  try {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(tmpPath, text);
    await rename(tmpPath, path);
  } catch (err) {
    await rm(tmpPath, { force: true }).catch(() => undefined);
    throw toDiskError(err, path);
  }
}

async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw toDiskError(err, path);
  }
}

function isRepoFile(value: unknown): value is RepoFile {
  const file = value as Partial<Record<keyof RepoFile, unknown>> | null;
  return (
    typeof file === 'object' &&
    file !== null &&
    typeof file.path === 'string' &&
    (file.sizeBytes === undefined || typeof file.sizeBytes === 'number') &&
    (file.sha256 === undefined || typeof file.sha256 === 'string') &&
    (file.gitOid === undefined || typeof file.gitOid === 'string')
  );
}

/**
 * Records the commit a revision named and the commit's files.
 * @throws disk_full, disk_error
 */
export async function saveRevisionRecord(
  modelsDir: string,
  options: { ref: RepoRef; snapshot: RepoSnapshot & { commit: string } },
): Promise<void> {
  const { ref, snapshot } = options;
  await writeWhole(toFilesPath(modelsDir, ref, snapshot.commit), JSON.stringify({ commit: snapshot.commit, files: snapshot.files }));
  if (ref.revision !== snapshot.commit) await writeWhole(toRefPath(modelsDir, ref), snapshot.commit);
}

export type RevisionRecord =
  | { isFound: true; snapshot: RepoSnapshot & { commit: string } }
  /** `commit`: the commit the revision named, where that much is recorded. */
  | { isFound: false; commit?: string };

/**
 * What earlier pulls recorded of a revision: a commit id is its own commit; a branch or tag is
 * looked up in the refs an earlier pull wrote.
 * @throws disk_error where a record exists but cannot be read
 */
export async function readRevisionRecord(modelsDir: string, ref: RepoRef): Promise<RevisionRecord> {
  const commit = COMMIT.test(ref.revision) ? ref.revision : (await readText(toRefPath(modelsDir, ref)))?.trim();
  if (commit === undefined || !COMMIT.test(commit)) return { isFound: false };
  const text = await readText(toFilesPath(modelsDir, ref, commit));
  if (text === undefined) return { isFound: false, commit };
  try {
    const parsed = JSON.parse(text) as { files?: unknown };
    if (Array.isArray(parsed.files) && parsed.files.every(isRepoFile)) return { isFound: true, snapshot: { commit, files: parsed.files } };
  } catch {
    // An unreadable record is as good as none: the next pull online writes it again.
  }
  return { isFound: false, commit };
}
