/** Where a bench command writes its files: the default folder name, and a check made before sending anything. */
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { dirname } from 'node:path';

/** A label as a file-name fragment: lowercase, dashes, at most 48 characters. */
export function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9.]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48);
}

/** An ISO time without colons or fractions, e.g. 2026-12-03T170501Z. */
export function timestampForPath(wallMs: number): string {
  return new Date(wallMs)
    .toISOString()
    .replace(/[:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

/** Whether `dir` exists as a writable directory, or its nearest existing ancestor is one. */
export async function canCreateDirectory(dir: string): Promise<boolean> {
  for (let current = dir; ; current = dirname(current)) {
    const info = await stat(current).catch(() => undefined);
    if (info !== undefined) {
      if (!info.isDirectory()) return false;
      return access(current, constants.W_OK).then(
        () => true,
        () => false,
      );
    }
    if (dirname(current) === current) return false;
  }
}
