/**
 * Renders the reference pages docs/config.md, docs/errors.md and docs/metrics.md from the code
 * (the schema, the error catalogue, the metrics catalogue). `npm run docs` writes them; a test
 * fails when a committed page is stale.
 */
import { Kind, type TObject, type TSchema } from '@sinclair/typebox';
import { ConfigSchema, ModelSchema } from '../config/schema.js';
import { ENV_SECTIONS, toEnvName } from '../config/load.js';
import { ERROR_CATALOG, WIRE_ERROR_CODES } from '../core/error-catalog.js';
import { HTTP_STATUS, OPENAI_TYPE } from '../gateway/index.js';
import { createMetrics } from '../telemetry/metrics.js';

const ENV_SECTION_NAMES = new Set<string>(ENV_SECTIONS);

function typeOf(schema: TSchema): string {
  const kind = schema[Kind] as string;
  if (kind === 'Array') return `${typeOf((schema as unknown as { items: TSchema }).items)}[]`;
  if (kind === 'Union') return (schema as unknown as { anyOf: TSchema[] }).anyOf.map((s) => JSON.stringify(s.const)).join(' \\| ');
  if (kind === 'Record') return 'object';
  return kind.toLowerCase();
}

function rows(schema: TObject, prefix: string, out: string[]): void {
  for (const [key, child] of Object.entries(schema.properties) as [string, TSchema][]) {
    const path = prefix === '' ? key : `${prefix}.${key}`;
    if (child[Kind] === 'Object') {
      rows(child as TObject, path, out);
      continue;
    }
    const section = path.split('.')[0]!;
    const env = ENV_SECTION_NAMES.has(section) ? `\`${toEnvName(path)}\`` : '';
    const def = child.default === undefined ? '(required)' : `\`${JSON.stringify(child.default)}\``;
    out.push(`| \`${path}\` | ${typeOf(child)} | ${def} | ${env} | ${String(child.description ?? '')} |`);
  }
}

export function renderConfigDoc(): string {
  const top: string[] = [];
  const topSchema = { ...ConfigSchema, properties: { ...ConfigSchema.properties } } as TObject;
  delete (topSchema.properties as Record<string, unknown>).models;
  rows(topSchema, '', top);
  const model: string[] = [];
  rows(ModelSchema, 'models.<name>', model);
  return [
    '# Configuration reference',
    '',
    'Generated from `src/config/schema.ts` by `npm run docs`; a test fails when this page is stale.',
    '',
    'Sources, lowest precedence first: defaults, a JSON file (`--config FILE` or `VOXMUX_CONFIG`),',
    'environment variables, flags (`--host`, `--port`, `--log-level`, `--log-format`, `--set path=value`).',
    'The variables and `--set` reach every path that has an environment name below; `defaultModel`',
    'and `models` come from the file only. Unknown keys and variables are errors. `VOXMUX_PORT`,',
    '`VOXMUX_HOST`, `VOXMUX_API_KEYS` and `VOXMUX_LOG_LEVEL` are short forms. Arrays in variables are',
    'comma-separated; booleans are exactly `true`, `false`, `1` or `0`. `voxmux serve --print-config`',
    'prints the effective config. `VOXMUX_MODELS_DIR` is not a setting: it is the folder of',
    '`voxmux models pull` (docs/operations.md).',
    '',
    '| path | type | default | environment | description |',
    '| --- | --- | --- | --- | --- |',
    ...top,
    '',
    '## Models',
    '',
    '`models` is set in the config file only: a file that names models serves exactly those.',
    'The default serves `pocketsphinx-en-us` (transcription, aliases `whisper-1` and `gpt-4o-transcribe-diarize`),',
    '`voxmux-speech-cpu` (speech: adapter `debian-voices`, aliases `tts-1`, `tts-1-hd`, `gpt-4o-mini-tts`, `gpt-4o-mini-tts-2025-12-15`, the 13',
    'OpenAI voice names as its `voiceAliases`) and `voxmux-diarize-cpu` (diarization: adapter `classical-diarizer`).',
    '',
    '| path | type | default | description |',
    '| --- | --- | --- | --- |',
    ...model.map((r) => r.replace(/ \| [^|]* \| ([^|]*) \|$/, ' | $1 |')),
    '',
  ].join('\n');
}

export function renderErrorsDoc(): string {
  const lines = (Object.entries(ERROR_CATALOG) as [keyof typeof ERROR_CATALOG, { kind: keyof typeof HTTP_STATUS; remedy: string }][]).map(
    ([code, entry]) =>
      `| \`${code}\` | \`${entry.kind}\` | ${entry.kind === 'cancelled' ? '(none: logged only)' : HTTP_STATUS[entry.kind]} | \`${OPENAI_TYPE[entry.kind]}\` | ${(WIRE_ERROR_CODES as readonly string[]).includes(code) ? 'yes' : ''} | ${entry.remedy} |`,
  );
  return [
    '# Error codes',
    '',
    'Generated from `src/core/error-catalog.ts` by `npm run docs`; a test fails when this page is stale.',
    '',
    'Every failure is answered with the OpenAI error envelope',
    '`{"error": {"message", "type", "param", "code"}}`; `code` is one of these. 429 and 503 answers',
    'carry `Retry-After` (seconds) where the server knows a wait (queue, restart, wake, budget), not on',
    'errors a model host sends (`out_of_memory`). "wire" marks codes a model host may send (docs/protocol.md).',
    '',
    '| code | kind | HTTP | OpenAI type | wire | remedy |',
    '| --- | --- | --- | --- | --- | --- |',
    ...lines,
    '',
  ].join('\n');
}

export async function renderMetricsDoc(): Promise<string> {
  const metrics = createMetrics();
  const all = (await metrics.registry.getMetricsAsJSON()).filter((m) => !m.name.startsWith('voxmux_process_'));
  const lines = all.map((m) => {
    const labels = (metrics.registry.getSingleMetric(m.name) as unknown as { labelNames?: string[] }).labelNames ?? [];
    return `| \`${m.name}\` | ${m.type} | ${labels.map((l) => `\`${l}\``).join(', ')} | ${m.help} |`;
  });
  return [
    '# Metrics',
    '',
    'Generated from `src/telemetry/metrics.ts` by `npm run docs`; a test fails when this page is stale.',
    'Served at `GET /metrics` in the Prometheus text format. Node process metrics are also exported',
    'with the prefix `voxmux_process_`. The mean batch size of a model is',
    '`voxmux_instance_inferences_total / voxmux_instance_executions_total`.',
    '',
    '| name | type | labels | help |',
    '| --- | --- | --- | --- |',
    ...lines,
    '',
  ].join('\n');
}
