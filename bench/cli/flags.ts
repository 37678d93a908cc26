/**
 * Command-line values shared by the bench's commands: bounded numbers, extra multipart fields and
 * the API key. Every problem is a usage error that names the flag.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { usageError } from './bench-error.js';

export interface NumberBounds {
  min: number;
  max: number;
  isInteger?: boolean;
}

export function numberFlag(text: string | undefined, flag: string, fallback: number, bounds: NumberBounds): number {
  return optionalNumber(text, flag, bounds) ?? fallback;
}

export function optionalNumber(text: string | undefined, flag: string, bounds: NumberBounds): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  const kind = bounds.isInteger === true ? 'an integer' : 'a number';
  if (
    text.trim() === '' ||
    !Number.isFinite(value) ||
    (bounds.isInteger === true && !Number.isInteger(value)) ||
    value < bounds.min ||
    value > bounds.max
  ) {
    throw usageError(`Expected ${flag} to be ${kind} from ${bounds.min} to ${bounds.max}: got '${text}'`);
  }
  return value;
}

/** `--field KEY=VALUE` values; `reserved` fields have flags of their own. */
export function parseExtraFields(fields: readonly string[], reserved: readonly string[]): Array<[string, string]> {
  return fields.map((field): [string, string] => {
    const eq = field.indexOf('=');
    if (eq <= 0) throw usageError(`Expected --field as KEY=VALUE: got '${field}'`);
    const key = field.slice(0, eq);
    if (reserved.includes(key)) throw usageError(`Expected --field to set a field other than ${key}: use its own flag`);
    return [key, field.slice(eq + 1)];
  });
}

/** The API key from `--api-key-file` (trimmed) or `--api-key`; undefined when neither gives one. */
export async function readApiKey(values: { 'api-key'?: string; 'api-key-file'?: string }, cwd: string): Promise<string | undefined> {
  let apiKey = values['api-key'];
  if (values['api-key-file'] !== undefined) {
    try {
      apiKey = (await readFile(resolve(cwd, values['api-key-file']), 'utf8')).trim();
    } catch {
      throw usageError(`Expected --api-key-file to name a readable file: got '${values['api-key-file']}'`);
    }
  }
  return apiKey === undefined || apiKey === '' ? undefined : apiKey;
}

/** The command line as recorded in results: secrets replaced. */
export function redactArgv(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--api-key') {
      out.push(arg);
      if (i + 1 < argv.length) out.push('***');
      i += 1;
    } else if (arg.startsWith('--api-key=')) {
      out.push('--api-key=***');
    } else {
      out.push(arg);
    }
  }
  return out;
}
