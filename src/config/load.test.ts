import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { catalogVoiceAliasesOf, OPENAI_VOICES } from './schema.js';
import { ConfigError, leafPaths, loadConfig, readConfigFile, redact, toEnvName, type ConfigSources } from './load.js';

/** The problems a ConfigError lists, or a failed assertion when loading succeeds. */
function problemsOf(sources: ConfigSources): readonly string[] {
  try {
    loadConfig(sources);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    for (const problem of err.problems) assert.ok(err.message.includes(problem), `message lists: ${problem}`);
    return err.problems;
  }
  assert.fail('Expected a ConfigError');
}

/** Asserts that exactly one problem starts with `prefix` and returns it. */
function onlyProblem(problems: readonly string[], prefix: string): string {
  const matching = problems.filter((p) => p.startsWith(prefix));
  assert.equal(matching.length, 1, `one problem starting with ${prefix} in ${JSON.stringify(problems)}`);
  return matching[0]!;
}

const testModel = (extra: Record<string, unknown> = {}) => ({ adapter: 'test', ...extra });

describe('toEnvName', () => {
  it('derives the environment name mechanically from a camelCase path', () => {
    assert.equal(toEnvName('scheduler.maxQueueDelayMs'), 'VOXMUX_SCHEDULER_MAX_QUEUE_DELAY_MS');
    assert.equal(toEnvName('gateway.maxBodyBytes'), 'VOXMUX_GATEWAY_MAX_BODY_BYTES');
    assert.equal(toEnvName('supervisor.mps.enabled'), 'VOXMUX_SUPERVISOR_MPS_ENABLED');
    assert.equal(toEnvName('supervisor.mps.controlPath'), 'VOXMUX_SUPERVISOR_MPS_CONTROL_PATH');
    assert.equal(toEnvName('telemetry.logLevel'), 'VOXMUX_TELEMETRY_LOG_LEVEL');
  });

  it('gives every environment-configurable leaf a distinct name, nested sections included', () => {
    const paths = [...leafPaths().keys()];
    assert.ok(paths.includes('supervisor.mps.enabled'));
    assert.ok(paths.includes('scheduler.maxRunningBatchesPerInstance'));
    assert.ok(!paths.some((p) => p.startsWith('models') || p === 'defaultModel' || p === 'supervisor.mps'));
    assert.equal(new Set(paths.map(toEnvName)).size, paths.length);
  });
});

describe('loadConfig sources', () => {
  it('uses the schema defaults when no source sets anything', () => {
    const config = loadConfig({});
    assert.equal(config.gateway.port, 8000);
    assert.equal(config.gateway.host, '127.0.0.1');
    assert.deepEqual(config.gateway.apiKeys, []);
    assert.equal(config.scheduler.maxQueuedRequests, 512);
    assert.equal(config.supervisor.mps.enabled, false);
    assert.equal(config.telemetry.logLevel, 'info');
    assert.deepEqual(Object.keys(config.models), ['pocketsphinx-en-us', 'voxmux-speech-cpu', 'voxmux-diarize-cpu']);
    assert.equal(config.models['voxmux-diarize-cpu']!.task, 'diarization');
    assert.deepEqual(config.models['pocketsphinx-en-us']!.aliases, ['whisper-1', 'gpt-4o-transcribe-diarize']);
    assert.equal(config.defaultModel, 'pocketsphinx-en-us');
  });

  it('serves speech with voxmux-speech-cpu by default: debian-voices, 2 instances, the OpenAI speech model names (the dated gpt-4o-mini-tts snapshot too) and the 13 OpenAI voices on distinct voices (#18)', () => {
    const model = loadConfig({}).models['voxmux-speech-cpu']!;
    assert.equal(model.adapter, 'debian-voices');
    assert.equal(model.task, 'speech');
    assert.equal(model.instances, 2);
    assert.deepEqual(model.aliases, ['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts', 'gpt-4o-mini-tts-2025-12-15']);
    assert.deepEqual(Object.keys(model.voiceAliases), [...OPENAI_VOICES]);
    assert.equal(new Set(Object.values(model.voiceAliases)).size, OPENAI_VOICES.length);
  });

  it('derives task from the adapter, and refuses a task the adapter does not serve and voice aliases on a transcription model (#18)', () => {
    const config = loadConfig({
      file: { models: { a: { adapter: 'pocketsphinx' }, b: { adapter: 'vits' }, c: { adapter: 'test', task: 'speech' } } },
    });
    assert.deepEqual(
      Object.values(config.models).map((m) => m.task),
      ['transcription', 'speech', 'speech'],
    );
    assert.deepEqual(config.models.c!.voiceAliases, {});
    assert.throws(
      () =>
        loadConfig({
          file: { models: { a: { adapter: 'pocketsphinx', task: 'speech' }, b: { adapter: 'parakeet', voiceAliases: { alloy: 'x' } } } },
        }),
      (err: ConfigError) =>
        err.problems.some((p) => p.startsWith('models.a.task: expected transcription for adapter pocketsphinx')) &&
        err.problems.some((p) => p.startsWith('models.b.voiceAliases: expected none for a transcription model')),
    );
  });

  it('gives vits no fixed voice aliases by default: its OpenAI names follow the voices it declares (catalogVoiceAliasesOf)', () => {
    const config = loadConfig({
      file: {
        models: {
          gpu: { adapter: 'vits' },
          own: { adapter: 'vits', voiceAliases: { alloy: 'amy' } },
          cpu: { adapter: 'debian-voices' },
          asr: { adapter: 'pocketsphinx' },
        },
      },
    });
    const { gpu, own, cpu, asr } = config.models;
    assert.deepEqual(gpu!.voiceAliases, {});
    assert.deepEqual(catalogVoiceAliasesOf(gpu!), OPENAI_VOICES);
    assert.deepEqual(catalogVoiceAliasesOf(own!), []);
    assert.deepEqual(catalogVoiceAliasesOf(cpu!), []);
    assert.deepEqual(catalogVoiceAliasesOf(asr!), []);
  });

  it('derives diarization from sortformer and classical-diarizer, and checks diarizationModel (#17)', () => {
    const config = loadConfig({
      file: {
        models: {
          asr: { adapter: 'pocketsphinx', diarizationModel: 'cpu' },
          gpu: { adapter: 'sortformer' },
          cpu: { adapter: 'classical-diarizer' },
          fake: { adapter: 'test', task: 'diarization' },
        },
      },
    });
    assert.deepEqual(
      Object.values(config.models).map((m) => m.task),
      ['transcription', 'diarization', 'diarization', 'diarization'],
    );
    assert.throws(
      () =>
        loadConfig({
          file: {
            models: {
              a: { adapter: 'pocketsphinx', diarizationModel: 'b' },
              b: { adapter: 'pocketsphinx' },
              c: { adapter: 'sortformer', diarizationModel: 'c' },
              d: { adapter: 'sortformer', task: 'transcription' },
            },
          },
        }),
      (err: ConfigError) =>
        err.problems.some((p) => p.startsWith("models.a.diarizationModel: expected the name of a diarization model: got 'b'")) &&
        err.problems.some((p) => p.startsWith('models.c.diarizationModel: expected none for a diarization model')) &&
        err.problems.some((p) => p.startsWith('models.d.task: expected diarization for adapter sortformer')),
    );
  });

  it('applies defaults < file < environment < flags, each layer over the ones below it', () => {
    const file = { gateway: { port: 1001, host: '0.0.0.0' }, scheduler: { retryAfterMs: 7 } };
    const env = { VOXMUX_GATEWAY_PORT: '1002', VOXMUX_SCHEDULER_MAX_QUEUED_REQUESTS: '9' };
    const flags = { 'gateway.port': '1003' };
    assert.equal(loadConfig({ file }).gateway.port, 1001);
    assert.equal(loadConfig({ file, env }).gateway.port, 1002);
    const all = loadConfig({ file, env, flags });
    assert.equal(all.gateway.port, 1003);
    // Fields a higher layer leaves alone keep the lower layer's value.
    assert.equal(all.gateway.host, '0.0.0.0');
    assert.equal(all.scheduler.retryAfterMs, 7);
    assert.equal(all.scheduler.maxQueuedRequests, 9);
    assert.equal(all.gateway.maxBodyBytes, 25 * 1024 * 1024);
  });

  it('lets flags override the environment and accepts already-typed flag values', () => {
    const config = loadConfig({
      env: { VOXMUX_SUPERVISOR_MPS_ENABLED: 'true', VOXMUX_TELEMETRY_LOG_LEVEL: 'debug' },
      flags: { 'supervisor.mps.enabled': false, 'telemetry.logLevel': 'warn', 'gateway.port': 4321 },
    });
    assert.equal(config.supervisor.mps.enabled, false);
    assert.equal(config.telemetry.logLevel, 'warn');
    assert.equal(config.gateway.port, 4321);
  });

  it('sets a nested section from its mechanical variable and keeps the file values beside it', () => {
    const config = loadConfig({
      file: { supervisor: { mps: { directory: '/run/mps' } } },
      env: { VOXMUX_SUPERVISOR_MPS_ENABLED: '1' },
    });
    assert.equal(config.supervisor.mps.enabled, true);
    assert.equal(config.supervisor.mps.directory, '/run/mps');
    assert.equal(config.supervisor.mps.controlPath, 'nvidia-cuda-mps-control');
  });

  it('takes the budget and realtime sections from the environment and flags too (a secret such as the LLM key)', () => {
    const config = loadConfig({
      env: { VOXMUX_REALTIME_LLM_API_KEY: 'sk-from-env', VOXMUX_BUDGET_MONTHLY_BUDGET_USD: '250' },
      flags: { 'budget.hardStop': 'true', 'realtime.maxSessions': '3' },
    });
    assert.equal(config.realtime.llm.apiKey, 'sk-from-env');
    assert.equal(config.budget.monthlyBudgetUsd, 250);
    assert.equal(config.budget.hardStop, true);
    assert.equal(config.realtime.maxSessions, 3);
  });

  it('accepts the short forms VOXMUX_PORT, VOXMUX_HOST, VOXMUX_API_KEYS and VOXMUX_LOG_LEVEL', () => {
    const config = loadConfig({
      env: { VOXMUX_PORT: '9000', VOXMUX_HOST: '::1', VOXMUX_API_KEYS: 'key-aaaa-1,key-bbbb-2', VOXMUX_LOG_LEVEL: 'error' },
    });
    assert.equal(config.gateway.port, 9000);
    assert.equal(config.gateway.host, '::1');
    assert.deepEqual(config.gateway.apiKeys, ['key-aaaa-1', 'key-bbbb-2']);
    assert.equal(config.telemetry.logLevel, 'error');
  });

  it('rejects a short form and its long form set together instead of letting the environment order decide', () => {
    for (const env of [
      { VOXMUX_PORT: '9000', VOXMUX_GATEWAY_PORT: '9001' },
      { VOXMUX_GATEWAY_PORT: '9001', VOXMUX_PORT: '9000' },
    ]) {
      const problem = onlyProblem(problemsOf({ env }), 'VOXMUX_');
      assert.match(problem, /gateway\.port/);
    }
  });

  it('ignores VOXMUX_CONFIG, which names the file rather than a setting', () => {
    assert.equal(loadConfig({ env: { VOXMUX_CONFIG: '/etc/voxmux.json' } }).gateway.port, 8000);
  });

  it('ignores VOXMUX_MODELS_DIR, the folder of voxmux models pull rather than a setting', () => {
    assert.equal(loadConfig({ env: { VOXMUX_MODELS_DIR: '/srv/models' } }).gateway.port, 8000);
  });

  it('parses booleans from exactly true, false, 1 and 0', () => {
    const enabled = (raw: string) => loadConfig({ env: { VOXMUX_SUPERVISOR_MPS_ENABLED: raw } }).supervisor.mps.enabled;
    assert.equal(enabled('true'), true);
    assert.equal(enabled('1'), true);
    assert.equal(enabled('false'), false);
    assert.equal(enabled('0'), false);
    for (const raw of ['TRUE', 'yes', 'on', '', ' 1', '2']) {
      const problem = onlyProblem(problemsOf({ env: { VOXMUX_SUPERVISOR_MPS_ENABLED: raw } }), 'VOXMUX_SUPERVISOR_MPS_ENABLED');
      assert.match(problem, /expected true, false, 1 or 0/);
    }
  });

  it('parses numbers in decimal notation only', () => {
    const port = (raw: string) => loadConfig({ env: { VOXMUX_GATEWAY_PORT: raw } }).gateway.port;
    assert.equal(port('8080'), 8080);
    assert.equal(port(' 8081 '), 8081);
    assert.equal(port('8.082e3'), 8082);
    for (const raw of ['', 'abc', '0x1F90', '0b1', '0o17', 'Infinity', '80 80']) {
      const problem = onlyProblem(problemsOf({ env: { VOXMUX_GATEWAY_PORT: raw } }), 'VOXMUX_GATEWAY_PORT');
      assert.match(problem, /expected a number/);
    }
  });

  it('reports a non-integer or out-of-range number with its config path', () => {
    assert.match(onlyProblem(problemsOf({ env: { VOXMUX_GATEWAY_PORT: '80.5' } }), 'gateway.port'), /integer/);
    assert.match(onlyProblem(problemsOf({ flags: { 'gateway.port': '70000' } }), 'gateway.port'), /65535/);
  });

  it('splits arrays on commas, trimming items and dropping empty ones', () => {
    const config = loadConfig({ env: { VOXMUX_SCHEDULER_LENGTH_BUCKETS_MS: ' 30000, 5000,,15000 ' } });
    assert.deepEqual(config.scheduler.lengthBucketsMs, [5000, 15000, 30000]);
    assert.deepEqual(loadConfig({ env: { VOXMUX_GATEWAY_API_KEYS: '' } }).gateway.apiKeys, []);
  });

  it('reports a bad array item once', () => {
    const problems = problemsOf({ env: { VOXMUX_SCHEDULER_LENGTH_BUCKETS_MS: '1000,x,3000' } });
    assert.equal(problems.length, 1, JSON.stringify(problems));
    assert.match(problems[0]!, /^VOXMUX_SCHEDULER_LENGTH_BUCKETS_MS: expected a number: got 'x'/);
  });

  it('lists every problem at once, each with its path: unknown variable, unknown keys, wrong types, unknown flag', () => {
    const problems = problemsOf({
      file: {
        gateway: { port: 'eighty', colour: 'blue' },
        supervisor: { mps: { enabled: 'yes' } },
        models: { a: testModel({ instances: -1, batchSize: 4 }) },
        extra: true,
      },
      env: { VOXMUX_GATEWAY_PROT: '1', VOXMUX_SCHEDULER_RETRY_AFTER_MS: 'soon' },
      flags: { 'gateway.nope': '1' },
    });
    onlyProblem(problems, 'VOXMUX_GATEWAY_PROT: unknown environment variable');
    onlyProblem(problems, 'VOXMUX_SCHEDULER_RETRY_AFTER_MS: expected a number');
    onlyProblem(problems, '--gateway.nope: unknown setting');
    onlyProblem(problems, 'gateway.port:');
    onlyProblem(problems, 'gateway.colour:');
    onlyProblem(problems, 'supervisor.mps.enabled:');
    onlyProblem(problems, 'models.a.instances:');
    onlyProblem(problems, 'models.a.batchSize:');
    onlyProblem(problems, 'extra:');
    assert.equal(problems.length, 9, JSON.stringify(problems));
  });

  it('rejects a config file that is not a JSON object, naming the file', () => {
    for (const file of [[], 'text', 3, null]) {
      onlyProblem(problemsOf({ file, filePath: '/etc/voxmux.json' }), '/etc/voxmux.json: expected a JSON object');
    }
  });

  it('rejects a model without its required adapter', () => {
    onlyProblem(problemsOf({ file: { models: { a: {} } } }), 'models.a.adapter:');
  });

  it('never echoes a malformed secret in the problem list', () => {
    const problems = problemsOf({ env: { VOXMUX_API_KEYS: 'key-long-enough,short' } });
    const problem = onlyProblem(problems, 'gateway.apiKeys.1:');
    assert.ok(!problem.includes('short'), problem);
    assert.ok(problems.every((p) => !p.includes('key-long-enough')));
  });
});

describe('loadConfig models', () => {
  it('replaces the default models whole when the file names models, filling each model from the schema', () => {
    const config = loadConfig({ file: { models: { echo: testModel({ aliases: ['e'] }) } } });
    assert.deepEqual(Object.keys(config.models), ['echo']);
    const echo = config.models.echo!;
    assert.equal(echo.instances, 2);
    assert.equal(echo.maxQueueDelayMs, 5);
    assert.deepEqual(echo.options, {});
    assert.deepEqual(echo.command, []);
    assert.equal(config.defaultModel, 'echo');
  });

  it('rejects a file with no models at all', () => {
    onlyProblem(problemsOf({ file: { models: {} } }), 'models: expected at least one model');
  });

  it('derives maxBatchSize from the largest preferred size and sorts and dedupes the preferred sizes', () => {
    const config = loadConfig({ file: { models: { a: testModel({ preferredBatchSizes: [8, 2, 4, 8] }) } } });
    assert.equal(config.models.a!.maxBatchSize, 8);
    assert.deepEqual(config.models.a!.preferredBatchSizes, [2, 4, 8]);
  });

  it('derives the preferred sizes from maxBatchSize, and batch size 1 when neither is set', () => {
    const config = loadConfig({ file: { models: { a: testModel({ maxBatchSize: 6 }), b: testModel() } } });
    assert.deepEqual(config.models.a!.preferredBatchSizes, [6]);
    assert.equal(config.models.b!.maxBatchSize, 1);
    assert.deepEqual(config.models.b!.preferredBatchSizes, [1]);
  });

  it('keeps an explicit maxBatchSize above the preferred sizes', () => {
    const config = loadConfig({ file: { models: { a: testModel({ maxBatchSize: 16, preferredBatchSizes: [4] }) } } });
    assert.equal(config.models.a!.maxBatchSize, 16);
    assert.deepEqual(config.models.a!.preferredBatchSizes, [4]);
  });

  it('derives defaultModel as the first model, and keeps one that is set', () => {
    const models = { first: testModel(), second: testModel() };
    assert.equal(loadConfig({ file: { models } }).defaultModel, 'first');
    assert.equal(loadConfig({ file: { models, defaultModel: 'second' } }).defaultModel, 'second');
  });

  it('rejects a preferred batch size above maxBatchSize', () => {
    const problem = onlyProblem(
      problemsOf({ file: { models: { a: testModel({ maxBatchSize: 4, preferredBatchSizes: [2, 8] }) } } }),
      'models.a.preferredBatchSizes',
    );
    assert.match(problem, /maxBatchSize 4: got 8/);
  });

  it('rejects a name used by two models, as an alias or as a model name', () => {
    const problems = problemsOf({
      file: { models: { a: testModel({ aliases: ['shared'] }), b: testModel({ aliases: ['shared', 'a'] }) } },
    });
    assert.equal(problems.length, 2, JSON.stringify(problems));
    assert.ok(problems.some((p) => p.startsWith('models.b.aliases') && p.includes("'shared'") && p.includes("'a'")));
    assert.ok(problems.some((p) => p.startsWith('models.b.aliases') && p.includes("'a' is already a name of model 'a'")));
  });

  it('rejects a defaultModel that names no model, including an alias and an Object.prototype key', () => {
    const models = { a: testModel({ aliases: ['alias-of-a'] }) };
    for (const defaultModel of ['nope', 'alias-of-a', 'constructor', 'toString']) {
      onlyProblem(problemsOf({ file: { models, defaultModel } }), 'defaultModel: expected one of a');
    }
  });

  it('rejects a first restart backoff longer than the largest one', () => {
    onlyProblem(
      problemsOf({ env: { VOXMUX_SUPERVISOR_RESTART_INITIAL_BACKOFF_MS: '5000', VOXMUX_SUPERVISOR_RESTART_MAX_BACKOFF_MS: '1000' } }),
      'supervisor.restartInitialBackoffMs',
    );
  });

  it('reports every cross-field problem together', () => {
    const problems = problemsOf({
      file: {
        models: { a: testModel({ maxBatchSize: 2, preferredBatchSizes: [4] }), b: testModel({ aliases: ['a'] }) },
        defaultModel: 'c',
      },
    });
    assert.equal(problems.length, 3, JSON.stringify(problems));
  });
});

describe('loadConfig result', () => {
  it('is deep-frozen', () => {
    const config = loadConfig({ file: { models: { a: testModel({ aliases: ['x'], options: { depth: { n: 1 } } }) } } });
    for (const value of [
      config,
      config.gateway,
      config.gateway.apiKeys,
      config.supervisor.mps,
      config.models,
      config.models.a!,
      config.models.a!.aliases,
      config.models.a!.options,
    ]) {
      assert.ok(Object.isFrozen(value));
    }
    assert.throws(() => {
      (config.gateway as { port: number }).port = 1;
    }, TypeError);
    assert.throws(() => (config.models.a!.aliases as string[]).push('y'), TypeError);
  });

  it('is redacted for printing: API keys hidden, their count kept, the config itself untouched', () => {
    const config = loadConfig({ env: { VOXMUX_API_KEYS: 'secret-key-one,secret-key-two' } });
    const printed = redact(config);
    assert.deepEqual(printed.gateway.apiKeys, ['[redacted]', '[redacted]']);
    assert.ok(!JSON.stringify(printed).includes('secret-key'));
    assert.equal(printed.gateway.port, config.gateway.port);
    assert.deepEqual(printed.models, config.models);
    assert.deepEqual(config.gateway.apiKeys, ['secret-key-one', 'secret-key-two']);
  });
});

describe('readConfigFile', () => {
  it('parses a JSON file, and reports a missing or malformed one as a ConfigError naming the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-config-'));
    try {
      const good = join(dir, 'good.json');
      writeFileSync(good, '{"gateway":{"port":1234}}');
      assert.equal(loadConfig({ file: readConfigFile(good), filePath: good }).gateway.port, 1234);
      const bad = join(dir, 'bad.json');
      writeFileSync(bad, '{"gateway":');
      assert.throws(
        () => readConfigFile(bad),
        (err: unknown) => err instanceof ConfigError && err.problems[0]!.startsWith(`${bad}: not valid JSON`),
      );
      const missing = join(dir, 'missing.json');
      assert.throws(
        () => readConfigFile(missing),
        (err: unknown) => err instanceof ConfigError && err.problems[0]!.startsWith(`${missing}: cannot read`),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('realtime.llm base URL (the region pin, #19)', () => {
  const llm = (fields: Record<string, unknown>): ConfigSources => ({ file: { realtime: { llm: fields } } });

  it('a base URL outside allowedBaseUrls fails the start; a listed one (trailing slash aside) loads', () => {
    const allowed = ['https://eu.llm.example/v1'];
    const problems = problemsOf(llm({ baseUrl: 'https://us.llm.example/v1', allowedBaseUrls: allowed }));
    assert.deepEqual(problems, [
      "realtime.llm.baseUrl: expected one of realtime.llm.allowedBaseUrls (https://eu.llm.example/v1): got 'https://us.llm.example/v1'",
    ]);
    assert.equal(
      loadConfig(llm({ baseUrl: 'https://eu.llm.example/v1/', allowedBaseUrls: allowed })).realtime.llm.baseUrl,
      'https://eu.llm.example/v1/',
    );
  });

  it('a base URL that is not http(s) fails the start; no base URL (the demo responder) loads', () => {
    assert.deepEqual(problemsOf(llm({ baseUrl: 'ftp://llm.example' })), [
      "realtime.llm.baseUrl: expected an http or https URL: got 'ftp://llm.example'",
    ]);
    assert.equal(loadConfig({}).realtime.llm.baseUrl, '');
  });

  it('the budget webhook URL is a secret (a Slack or Teams webhook URL is its own credential): --print-config redacts it', () => {
    const url = 'https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX';
    const printed = redact(loadConfig({ env: { VOXMUX_BUDGET_WEBHOOK_URL: url } }));
    assert.equal(printed.budget.webhookUrl, '[redacted]');
    assert.ok(!JSON.stringify(printed).includes('secretXXXX'));
  });

  it('the LLM key is a secret: --print-config redacts it', () => {
    assert.notEqual(redact(loadConfig(llm({ apiKey: 'sk-secret-value' }))).realtime.llm.apiKey, 'sk-secret-value');
  });
});

describe('loadConfig refuses settings the server cannot run with', () => {
  it('refuses an empty scheduler.lengthBucketsMs, from the file or from an empty variable', () => {
    // "no piece exceeds the largest scheduler.lengthBucketsMs": with none, the largest is Math.max() =
    // -Infinity, and planCuts (gateway/pieces/split-policy.ts) never ends for audio over splitAboveMs.
    onlyProblem(problemsOf({ file: { scheduler: { lengthBucketsMs: [] } } }), 'scheduler.lengthBucketsMs');
    onlyProblem(problemsOf({ env: { VOXMUX_SCHEDULER_LENGTH_BUCKETS_MS: '' } }), 'scheduler.lengthBucketsMs');
  });

  it("refuses a GPU listed twice, in supervisor.gpus or in a model's gpus", () => {
    // Placement counts a GPU once per entry: models.a.gpus [0, 0] with instancesPerGpu 1 would put
    // two instances on GPU 0, both at index 0 there (the same MPS share).
    const model = onlyProblem(problemsOf({ file: { models: { a: testModel({ gpus: [0, 1, 0] }) } } }), 'models.a.gpus');
    assert.match(model, /GPU 0 is listed twice/);
    const node = onlyProblem(problemsOf({ file: { supervisor: { gpus: [2, 2] }, models: { a: testModel() } } }), 'supervisor.gpus');
    assert.match(node, /GPU 2 is listed twice/);
    assert.deepEqual(
      loadConfig({ file: { supervisor: { gpus: [0, 1] }, models: { a: testModel({ gpus: [1] }) } } }).supervisor.gpus,
      [0, 1],
    );
  });

  it('refuses a supervisor.restartMaxBackoffMs under one second, which would let a crash loop spin', () => {
    // docs/operations.md: a crash loop restarts "at supervisor.restartMaxBackoffMs, never spinning".
    const backoff = (ms: number) => ({ file: { supervisor: { restartInitialBackoffMs: 0, restartMaxBackoffMs: ms } } });
    onlyProblem(problemsOf(backoff(0)), 'supervisor.restartMaxBackoffMs');
    onlyProblem(problemsOf(backoff(999)), 'supervisor.restartMaxBackoffMs');
    assert.equal(loadConfig(backoff(1000)).supervisor.restartMaxBackoffMs, 1000);
  });
});
