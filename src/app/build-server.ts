/**
 * The composition root: builds every component from the validated Config and wires the ports
 * (the supervisor is the scheduler's Executor; the gateway reads snapshots, never internals).
 */
import type { FastifyInstance } from 'fastify';
import type { Clock } from '../core/clock.js';
import { ConfigError } from '../config/load.js';
import { taskOf, VOICE_RESOURCE_ADAPTERS, type Config } from '../config/schema.js';
import {
  buildGateway,
  createAudioDecoder,
  createEnergyDetector,
  createSileroDetector,
  type ModelCatalog,
  type ModelEntry,
  type ReadinessSnapshot,
  type VoiceDirectory,
} from '../gateway/index.js';
import { createScheduler, type Scheduler } from '../scheduler/index.js';
import {
  checkPlacement,
  createMpsController,
  createSupervisor,
  detectGpus,
  runCommand,
  type MpsController,
  type SpawnInstance,
  type Supervisor,
} from '../supervisor/index.js';
import type { Logger } from '../telemetry/logger.js';
import { createMetrics, type Metrics } from '../telemetry/metrics.js';
import { createRequestLog, type RequestLogWriter } from '../telemetry/request-log.js';
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, resolve } from 'node:path';

export interface ServerDeps {
  log: Logger;
  clock: Clock;
  spawn: SpawnInstance;
  baseEnv: Readonly<Record<string, string>>;
}

export interface Server {
  app: FastifyInstance;
  scheduler: Scheduler;
  supervisor: Supervisor;
  metrics: Metrics;
  /** Starts MPS (when enabled) and every instance; resolves when each is ready or failed to start. */
  startInstances(): Promise<void>;
  /** Drains: answers new calls 503 shutting_down while pending requests finish, then closes the listener and the instances. */
  close(): Promise<void>;
  /** Stops now: queued requests fail with shutting_down, instances are killed. */
  destroy(): Promise<void>;
}

/**
 * The languages each adapter recognises, as its model host enforces them (LANGUAGE in
 * host/voxmux_host/models/pocketsphinx_asr.py and parakeet/adapter.py; docs/adapters.md). The test
 * adapter declares none. test/conformance/adapter-languages.test.ts fails when this table and the
 * host modules' LANGUAGE disagree, or when a registered adapter with a LANGUAGE is missing here.
 */
export const ADAPTER_LANGUAGES: Readonly<Record<string, readonly string[]>> = {
  pocketsphinx: ['en'],
  parakeet: ['en'],
};

export function createModelCatalog(config: Config, createdS: number): ModelCatalog {
  const names = new Map<string, string>();
  for (const [name, model] of Object.entries(config.models)) {
    names.set(name, name);
    for (const alias of model.aliases) names.set(alias, name);
  }
  const entries = [...names].map(([id, name]): ModelEntry => {
    const model = config.models[name]!;
    const languages = ADAPTER_LANGUAGES[model.adapter];
    const task = taskOf(model);
    const speech = { voiceAliases: model.voiceAliases, hasVoiceResources: VOICE_RESOURCE_ADAPTERS.has(model.adapter) };
    return {
      id,
      created: createdS,
      ownedBy: 'voxmux',
      task,
      ...(languages === undefined ? {} : { languages }),
      ...(task === 'speech' ? { speech } : {}),
    };
  });
  return { list: () => entries, resolve: (name) => names.get(name) };
}

/**
 * Per GPU: its instances and whether any is ready. A GPU whose instances are all down or wedged
 * is out of rotation (its instances are not ready, so nothing is routed there).
 */
export function gpuHealth(
  nodeGpus: readonly number[],
  instances: readonly { instanceId: string; gpu: number | null; state: string }[],
): Record<string, { isHealthy: boolean; instances: string[] }> {
  const out: Record<string, { isHealthy: boolean; instances: string[] }> = {};
  for (const gpu of nodeGpus) {
    const mine = instances.filter((i) => i.gpu === gpu);
    out[String(gpu)] = { isHealthy: mine.length === 0 || mine.some((i) => i.state === 'ready'), instances: mine.map((i) => i.instanceId) };
  }
  return out;
}

/**
 * The problem with requestLog.path, checked at startup so that a log that cannot be written fails
 * the start instead of dropping every line; undefined when the log is off or its folder is writable.
 */
export async function checkRequestLogPath(path: string): Promise<string | undefined> {
  if (path === '') return undefined;
  const target = await stat(path).catch(() => undefined);
  if (target?.isDirectory() === true) return `requestLog.path: expected a file: got the folder '${path}'`;
  const folder = dirname(resolve(path));
  const isWritable = await access(folder, constants.W_OK).then(
    () => true,
    () => false,
  );
  return isWritable ? undefined : `requestLog.path: expected a file in an existing, writable folder: got '${path}'`;
}

export async function buildServer(config: Config, deps: ServerDeps): Promise<Server> {
  const { log, clock } = deps;
  const metrics = createMetrics();
  let mps: MpsController | undefined;
  if (config.supervisor.mps.enabled) {
    mps = createMpsController(config.supervisor.mps, { runCommand, baseEnv: deps.baseEnv, log: log.child({ component: 'mps' }) });
  }
  const nodeGpus = config.supervisor.gpus.length > 0 ? config.supervisor.gpus : await detectGpus(runCommand, deps.baseEnv);
  const problems = Object.entries(config.models).flatMap(([name, model]) => checkPlacement(name, model, nodeGpus));
  const logProblem = await checkRequestLogPath(config.requestLog.path);
  if (logProblem !== undefined) problems.push(logProblem);
  if (problems.length > 0) throw new ConfigError(problems);
  log.info({ gpus: nodeGpus }, 'gpus');
  const supervisor = createSupervisor(
    { ...config.supervisor, nodeGpus, models: config.models },
    {
      spawn: deps.spawn,
      clock,
      log: log.child({ component: 'supervisor' }),
      metrics,
      baseEnv: deps.baseEnv,
      instanceEnv: mps === undefined ? undefined : () => mps.instanceEnv(),
    },
  );
  const scheduler = createScheduler(
    { ...config.scheduler, models: config.models },
    { executor: supervisor, clock, log: log.child({ component: 'scheduler' }), metrics },
  );
  const models = createModelCatalog(config, Math.floor(clock.wallMs() / 1000));
  const voiceModels = Object.entries(config.models)
    .filter(([, m]) => taskOf(m) === 'speech')
    .map(([model, m]) => ({ model, engine: m.adapter, voiceAliases: m.voiceAliases }));
  const voices: VoiceDirectory = {
    models: () => voiceModels,
    catalog: (model) => scheduler.catalog(model),
    residency: (model) => supervisor.readyInstances(model),
  };
  const readiness = (): ReadinessSnapshot => {
    const { instances } = supervisor.stats();
    const body: Record<string, { isReady: boolean; instances: unknown[] }> = {};
    let isReady = true;
    for (const [name, model] of Object.entries(config.models)) {
      const mine = instances.filter((i) => i.model === name);
      const isModelReady = model.instances === 0 || mine.some((i) => i.state === 'ready');
      isReady &&= isModelReady;
      body[name] = { isReady: isModelReady, instances: mine.map((i) => ({ ...i })) };
    }
    return { isReady, body: { models: body, gpus: gpuHealth(nodeGpus, instances), scheduler: scheduler.stats() } };
  };
  const gateway = config.gateway;
  let isDraining = false;
  const requestLog: RequestLogWriter | undefined =
    config.requestLog.path === ''
      ? undefined
      : createRequestLog(
          { path: config.requestLog.path, maxBytes: config.requestLog.maxBytes, keepFiles: config.requestLog.keepFiles },
          {
            log: log.child({ component: 'request-log' }),
            onLines: (outcome, count) => metrics.requestLogLines.inc({ outcome }, count),
          },
        );
  const instanceGpu = (instanceId: string): number | undefined =>
    supervisor.stats().instances.find((i) => i.instanceId === instanceId)?.gpu ?? undefined;
  const voiceActivity = gateway.voiceActivity === 'energy' ? { detector: createEnergyDetector() } : await createSileroDetector();
  if (voiceActivity.fallbackReason !== undefined) {
    log.warn({ err: voiceActivity.fallbackReason }, 'silero vad unavailable: cutting long audio at energy minima');
  }
  const app = await buildGateway(
    {
      maxBodyBytes: gateway.maxBodyBytes,
      requestTimeoutMs: gateway.requestTimeoutMs,
      maxRequestTimeoutMs: gateway.maxRequestTimeoutMs,
      apiKeys: gateway.apiKeys,
      uploadPoolBytes: gateway.uploadPoolBytes,
      uploadPoolIdleMs: gateway.uploadPoolIdleMs,
      bodyTimeoutMs: gateway.bodyTimeoutMs,
      splitAboveMs: gateway.splitAboveMs,
      pieceTargetMs: gateway.pieceTargetMs,
      maxPieceMs: Math.max(...config.scheduler.lengthBucketsMs),
      ffmpegPath: gateway.ffmpegPath,
      realtime: config.realtime,
    },
    {
      transcribe: (model, request, options) => scheduler.submit(model, request, options),
      openStream: (model, input, options) => scheduler.openStream(model, input, options),
      models,
      voices,
      readiness,
      metricsText: () => metrics.registry.metrics(),
      metricsContentType: metrics.registry.contentType,
      decoder: createAudioDecoder({
        maxDurationMs: gateway.maxAudioDurationMs,
        ffmpegPath: gateway.ffmpegPath,
        ffmpegTimeoutMs: gateway.ffmpegTimeoutMs,
        tmpDir: gateway.tmpDir !== '' ? gateway.tmpDir : tmpdir(),
      }),
      voiceActivity: voiceActivity.detector,
      clock,
      log,
      metrics,
      isDraining: () => isDraining,
      instanceGpu,
      ...(requestLog === undefined ? {} : { requestLog }),
    },
  );
  return {
    app,
    scheduler,
    supervisor,
    metrics,
    async startInstances() {
      await mps?.start();
      await supervisor.start();
    },
    async close() {
      // The listener stays open while pending requests finish: new calls get 503 shutting_down
      // with Retry-After (the gateway reads isDraining), then it closes (docs/operations.md).
      isDraining = true;
      await scheduler.close();
      await app.close();
      await requestLog?.close();
      await supervisor.close();
      await mps?.stop();
    },
    async destroy() {
      scheduler.destroy();
      supervisor.destroy();
      await app.close();
      await requestLog?.close();
      await mps?.stop();
    },
  };
}
