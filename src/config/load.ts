/**
 * Config loading: defaults < file < environment < flags, then validate → derive → crossCheck →
 * freeze. Every problem is collected with its path and reported at once.
 */
import { readFileSync } from 'node:fs';
import { Kind, type TObject, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { ADAPTER_TASKS, ADAPTER_VOICE_ALIASES, ConfigSchema, ModelSchema, SECRET_PATHS, taskOf, type Config } from './schema.js';

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface ConfigSources {
  /** Parsed config file contents (JSON), if any. */
  file?: unknown;
  filePath?: string;
  /** VOXMUX_* environment variables. */
  env?: Readonly<Record<string, string>>;
  /** Overrides by dotted path, from flags. */
  flags?: Readonly<Record<string, string | number | boolean>>;
}

type Json = string | number | boolean | null | Json[] | { [k: string]: Json };

/** Sections whose scalar leaves may come from the environment and flags by mechanical names. */
export const ENV_SECTIONS = ['gateway', 'scheduler', 'supervisor', 'telemetry', 'requestLog', 'budget', 'realtime'] as const;
/** Short names the README promises. */
const ENV_ALIASES: Record<string, string> = {
  VOXMUX_PORT: 'gateway.port',
  VOXMUX_HOST: 'gateway.host',
  VOXMUX_API_KEYS: 'gateway.apiKeys',
  VOXMUX_LOG_LEVEL: 'telemetry.logLevel',
};
/** Environment variables that are not config paths (VOXMUX_MODELS_DIR is `voxmux models pull`'s folder). */
const ENV_NON_PATHS = new Set(['VOXMUX_CONFIG', 'VOXMUX_GATEWAY_MALLOC', 'VOXMUX_MODELS_DIR']);

export function toEnvName(path: string): string {
  return `VOXMUX_${path
    .split('.')
    .map((part) => part.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase())
    .join('_')}`;
}

/** Every leaf path of the env-configurable sections with its schema. */
export function leafPaths(): Map<string, TSchema> {
  const out = new Map<string, TSchema>();
  const walk = (schema: TObject, prefix: string) => {
    for (const [key, child] of Object.entries(schema.properties)) {
      const path = `${prefix}.${key}`;
      if ((child as TSchema)[Kind] === 'Object') walk(child as TObject, path);
      else out.set(path, child as TSchema);
    }
  };
  for (const section of ENV_SECTIONS) walk(ConfigSchema.properties[section] as TObject, section);
  return out;
}

/**
 * Decimal notation only. Number() alone would also take '0x1F90', '0b1', '0o17' and 'Infinity',
 * so a typo could silently become a different setting.
 */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** One parser per schema type: booleans accept exactly true|false|1|0; arrays are comma-separated. */
function parseScalar(schema: TSchema, raw: string | number | boolean, where: string, problems: string[]): Json | undefined {
  const kind = schema[Kind] as string;
  if (typeof raw !== 'string') return raw;
  switch (kind) {
    case 'Integer':
    case 'Number': {
      const text = raw.trim();
      const n = Number(text);
      if (!DECIMAL.test(text) || !Number.isFinite(n)) {
        problems.push(`${where}: expected a number: got '${raw}'`);
        return undefined;
      }
      return n;
    }
    case 'Boolean':
      if (['true', '1'].includes(raw)) return true;
      if (['false', '0'].includes(raw)) return false;
      problems.push(`${where}: expected true, false, 1 or 0: got '${raw}'`);
      return undefined;
    case 'Array': {
      const items = raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
      const itemSchema = (schema as unknown as { items: TSchema }).items;
      const parsed = items.map((item) => parseScalar(itemSchema, item, where, problems));
      // A bad item is reported once, here; the array is left out so validation does not report it again.
      return parsed.every((item) => item !== undefined) ? (parsed as Json[]) : undefined;
    }
    default:
      return raw;
  }
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts.at(-1)!] = value;
}

function mergeDeep(base: unknown, over: unknown): unknown {
  if (typeof base !== 'object' || base === null || Array.isArray(base)) return over;
  if (typeof over !== 'object' || over === null || Array.isArray(over)) return over;
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [k, v] of Object.entries(over)) out[k] = k in out ? mergeDeep(out[k], v) : v;
  return out;
}

export function collectSources(sources: ConfigSources, problems: string[]): unknown {
  const leaves = leafPaths();
  let merged: unknown = {};
  if (sources.file !== undefined) {
    if (typeof sources.file !== 'object' || sources.file === null || Array.isArray(sources.file)) {
      problems.push(`${sources.filePath ?? 'config file'}: expected a JSON object`);
    } else {
      // models from a file replace the defaults whole: a file that names models serves exactly those.
      merged = mergeDeep(merged, sources.file);
    }
  }
  const overrides: Record<string, unknown> = {};
  const envNameOfPath = new Map<string, string>();
  for (const [name, raw] of Object.entries(sources.env ?? {})) {
    if (ENV_NON_PATHS.has(name)) continue;
    const path = ENV_ALIASES[name] ?? [...leaves.keys()].find((p) => toEnvName(p) === name);
    if (path === undefined) {
      problems.push(`${name}: unknown environment variable (see docs/config.md)`);
      continue;
    }
    // A short form and its long form both set would leave the winner to the environment's order.
    const other = envNameOfPath.get(path);
    if (other !== undefined) {
      problems.push(`${name}: ${other} also sets ${path}: expected only one of them`);
      continue;
    }
    envNameOfPath.set(path, name);
    const value = parseScalar(leaves.get(path)!, raw, name, problems);
    if (value !== undefined) setPath(overrides, path, value);
  }
  for (const [path, raw] of Object.entries(sources.flags ?? {})) {
    const schema = leaves.get(path);
    if (schema === undefined) {
      problems.push(`--${path}: unknown setting (see docs/config.md)`);
      continue;
    }
    const value = parseScalar(schema, raw, `--${path}`, problems);
    if (value !== undefined) setPath(overrides, path, value);
  }
  return mergeDeep(merged, overrides);
}

export function validate(candidate: unknown, problems: string[]): Config | undefined {
  // Defaults fill what the sources left out; then the schema checks everything, unknown keys included.
  const given = Value.Clone(candidate ?? {}) as { models?: unknown };
  const givenModels = Value.Clone(given.models);
  const withDefaults = Value.Default(ConfigSchema, given);
  if (typeof withDefaults === 'object' && withDefaults !== null) {
    // Models named by a source replace the defaults whole (Value.Default would merge them in).
    if (givenModels !== undefined) (withDefaults as { models?: unknown }).models = givenModels;
    const models = (withDefaults as { models?: Record<string, unknown> }).models;
    if (models !== undefined && typeof models === 'object') {
      for (const [name, model] of Object.entries(models)) {
        models[name] = Value.Default(ModelSchema, model);
      }
    }
  }
  // TypeBox may describe one bad value several times (a missing property is both "required" and
  // "expected string"): one problem per path, the first description, keeps the list readable.
  const reported = new Set<string>();
  for (const error of Value.Errors(ConfigSchema, withDefaults)) {
    const path = error.path.slice(1).replaceAll('/', '.');
    if (reported.has(path)) continue;
    reported.add(path);
    // The problem list is printed at startup: a malformed secret must not appear in it.
    const isSecret = SECRET_PATHS.some((secret) => path === secret || path.startsWith(`${secret}.`));
    problems.push(`${path || '(root)'}: ${error.message}: got ${isSecret ? '[redacted]' : JSON.stringify(error.value)}`);
  }
  return problems.length === 0 ? (withDefaults as Config) : undefined;
}

export function derive(config: Config): Config {
  const models: Config['models'] = {};
  for (const [name, model] of Object.entries(config.models)) {
    const preferred = [...new Set(model.preferredBatchSizes)].sort((a, b) => a - b);
    const maxBatchSize = model.maxBatchSize > 0 ? model.maxBatchSize : (preferred.at(-1) ?? 1);
    const task = taskOf(model);
    const voiceAliases =
      task === 'speech' && Object.keys(model.voiceAliases).length === 0 ? { ...ADAPTER_VOICE_ALIASES[model.adapter] } : model.voiceAliases;
    models[name] = { ...model, maxBatchSize, preferredBatchSizes: preferred.length > 0 ? preferred : [maxBatchSize], task, voiceAliases };
  }
  const defaultModel = config.defaultModel !== '' ? config.defaultModel : (Object.keys(models)[0] ?? '');
  const lengthBucketsMs = [...new Set(config.scheduler.lengthBucketsMs)].sort((a, b) => a - b);
  return { ...config, models, defaultModel, scheduler: { ...config.scheduler, lengthBucketsMs } };
}

/** Compares base URLs without a trailing slash. */
function normalizeBaseUrl(url: string): string {
  return url.trim().replace(/\/+$/, '');
}

/** The LLM endpoint must be an http(s) URL, and one of allowedBaseUrls when that list is not empty (the region pin). */
export function checkLlmBaseUrl(llm: { baseUrl: string; allowedBaseUrls: readonly string[] }): string[] {
  if (llm.baseUrl === '') return [];
  let protocol = '';
  try {
    protocol = new URL(llm.baseUrl).protocol;
  } catch {
    // reported below
  }
  if (protocol !== 'http:' && protocol !== 'https:') return [`realtime.llm.baseUrl: expected an http or https URL: got '${llm.baseUrl}'`];
  const allowed = llm.allowedBaseUrls.map(normalizeBaseUrl);
  if (allowed.length > 0 && !allowed.includes(normalizeBaseUrl(llm.baseUrl))) {
    return [`realtime.llm.baseUrl: expected one of realtime.llm.allowedBaseUrls (${allowed.join(', ')}): got '${llm.baseUrl}'`];
  }
  return [];
}

/** A GPU listed twice: placement would count it twice (two instances at one index on it, the same MPS share). */
function repeatedGpus(path: string, gpus: readonly number[]): string[] {
  return [...new Set(gpus.filter((g, i) => gpus.indexOf(g) !== i))].map((g) => `${path}: GPU ${g} is listed twice`);
}

export function crossCheck(config: Config, problems: string[]): void {
  const names = new Map<string, string>();
  if (Object.keys(config.models).length === 0) problems.push('models: expected at least one model');
  for (const [name, model] of Object.entries(config.models)) {
    for (const size of model.preferredBatchSizes) {
      if (size > model.maxBatchSize) {
        problems.push(`models.${name}.preferredBatchSizes: expected sizes up to maxBatchSize ${model.maxBatchSize}: got ${size}`);
      }
    }
    const tasks = ADAPTER_TASKS[model.adapter] ?? ['transcription'];
    if (model.task !== 'auto' && !tasks.includes(model.task)) {
      problems.push(`models.${name}.task: expected ${tasks.join(' or ')} for adapter ${model.adapter}: got '${model.task}'`);
    }
    if (taskOf(model) !== 'speech' && Object.keys(model.voiceAliases).length > 0) {
      problems.push(`models.${name}.voiceAliases: expected none for a ${taskOf(model)} model`);
    }
    if (model.diarizationModel !== '') {
      const target = config.models[model.diarizationModel];
      if (taskOf(model) !== 'transcription') {
        problems.push(`models.${name}.diarizationModel: expected none for a ${taskOf(model)} model`);
      } else if (target === undefined || taskOf(target) !== 'diarization') {
        problems.push(`models.${name}.diarizationModel: expected the name of a diarization model: got '${model.diarizationModel}'`);
      }
    }
    problems.push(...repeatedGpus(`models.${name}.gpus`, model.gpus));
    for (const id of [name, ...model.aliases]) {
      const owner = names.get(id);
      if (owner !== undefined) problems.push(`models.${name}.aliases: '${id}' is already a name of model '${owner}'`);
      names.set(id, name);
    }
  }
  if (config.defaultModel !== '' && !Object.hasOwn(config.models, config.defaultModel)) {
    problems.push(`defaultModel: expected one of ${Object.keys(config.models).join(', ')}: got '${config.defaultModel}'`);
  }
  const s = config.supervisor;
  problems.push(...repeatedGpus('supervisor.gpus', s.gpus));
  if (s.restartInitialBackoffMs > s.restartMaxBackoffMs) {
    problems.push('supervisor.restartInitialBackoffMs: expected at most supervisor.restartMaxBackoffMs');
  }
  problems.push(...checkLlmBaseUrl(config.realtime.llm));
}

export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Runs the whole pipeline; throws ConfigError listing every problem. */
export function loadConfig(sources: ConfigSources): Config {
  const problems: string[] = [];
  const collected = collectSources(sources, problems);
  const validated = validate(collected, problems);
  if (validated === undefined || problems.length > 0) throw new ConfigError(problems);
  const derived = derive(validated);
  crossCheck(derived, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(derived);
}

export function readConfigFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw new ConfigError([`${path}: cannot read the config file: ${(cause as Error).message}`]);
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new ConfigError([`${path}: not valid JSON: ${(cause as Error).message}`]);
  }
}

/** The effective config with secrets replaced, for --print-config. */
export function redact(config: Config): Config {
  const copy = structuredClone(config) as unknown as Record<string, Record<string, unknown>>;
  for (const path of SECRET_PATHS) {
    const keys = path.split('.');
    const key = keys.pop()!;
    let parent: Record<string, unknown> | undefined = copy;
    for (const k of keys) parent = parent?.[k] as Record<string, unknown> | undefined;
    const value = parent?.[key];
    if (Array.isArray(value)) parent![key] = value.map(() => '[redacted]');
    else if (typeof value === 'string' && value !== '') parent![key] = '[redacted]';
  }
  return copy as unknown as Config;
}
