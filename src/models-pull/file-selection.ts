/**
 * Which files of a repository to pull: named files, glob patterns, or everything. Patterns match as
 * huggingface_hub's allow and ignore patterns do (Python's fnmatchcase): case-sensitive, `*` also
 * matches `/`, and a pattern ending in `/` means everything under that folder. So a pattern copied
 * from a `huggingface-cli download --include` command selects the same files here.
 */

export interface FileSelection {
  /** Exact paths; each must exist. */
  files: readonly string[];
  /** Globs; a file matching any is selected. */
  include: readonly string[];
  /** Globs; a file matching any is left out, unless it is named in `files`. */
  exclude: readonly string[];
}

export interface SelectionResult<T> {
  selected: T[];
  /** Named files that the repository does not have. */
  missing: string[];
}

/** A glob (fnmatch syntax: `*`, `?`, `[seq]`, `[!seq]`) as an anchored regular expression. */
export function globToRegExp(glob: string): RegExp {
  const pattern = glob.endsWith('/') ? `${glob}*` : glob;
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') {
      out += '.*';
    } else if (c === '?') {
      out += '.';
    } else if (c === '[') {
      const close = pattern.indexOf(']', pattern[i + 1] === '!' || pattern[i + 1] === ']' ? i + 2 : i + 1);
      if (close === -1) {
        out += '\\[';
        continue;
      }
      let body = pattern.slice(i + 1, close);
      const isNegated = body.startsWith('!');
      if (isNegated) body = body.slice(1);
      out += `[${isNegated ? '^' : ''}${body.replace(/[\\^\]]/g, (m, offset: number) => (m === '^' && offset > 0 ? '^' : `\\${m}`))}]`;
      i = close;
    } else {
      out += c.replace(/[.+^${}()|\\/]/g, '\\$&');
    }
  }
  return new RegExp(`^${out}$`, 's');
}

/** Whether the caller chose files at all; without a choice, a known adapter's files or every file are pulled. */
export function hasSelection(selection: FileSelection): boolean {
  return selection.files.length > 0 || selection.include.length > 0;
}

/** The repository's files that the selection names, in the repository's order. */
export function selectFiles<T extends { path: string }>(files: readonly T[], selection: FileSelection): SelectionResult<T> {
  const include = selection.include.map(globToRegExp);
  const exclude = selection.exclude.map(globToRegExp);
  const named = new Set(selection.files);
  const isEverything = !hasSelection(selection);
  const selected = files.filter(
    (file) =>
      named.has(file.path) || ((isEverything || include.some((re) => re.test(file.path))) && !exclude.some((re) => re.test(file.path))),
  );
  const present = new Set(files.map((file) => file.path));
  return { selected, missing: selection.files.filter((path) => !present.has(path)) };
}
