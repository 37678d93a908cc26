/**
 * The composition root: builds every component from the validated Config and wires the ports
 * (the supervisor is the scheduler's Executor; the gateway reads snapshots, never internals).
 */
import type { FastifyInstance } from 'fastify';
import type { Clock, TimerHandle } from '../core/clock.js';
import { ConfigError } from '../config/load.js';
import {
  catalogVoiceAliasesOf,
  maxDiarizationItemMsOf,
  maxDiarizationSpeakersOf,
  SPEECH_REGION_ADAPTERS,
  taskOf,
  VOICE_RESOURCE_ADAPTERS,
  type Config,
} from '../config/schema.js';
import {
  buildGateway,
  createAudioDecoder,
  createModelLifecycleControl,
  createEnergyDetector,
  createSileroDetector,
  trackConnections,
  DiarizationSessionService,
  type AudioDecoder,
  type ConnectionTracker,
  type GatewayDeps,
  type GatewayOptions,
  type VoiceActivityDetector,
  type VoiceModel,
  type ModelCatalog,
  type ModelEntry,
  type ReadinessSnapshot,
  type VoiceDirectory,
} from '../gateway/index.js';
import { createBudgetGuard, type BudgetGuard } from '../ops/index.js';
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
import { aggregateMetricsText, createMetrics, type Metrics } from '../telemetry/metrics.js';
import { createRequestLog, type RequestLogWriter } from '../telemetry/request-log.js';
import { createAutoscalingMetrics } from './autoscaling-metrics.js';
import { startGatewayThreads, type GatewayThreads } from './gateway-threads/owner.js';
import { releaseIdleMemory } from './idle-memory.js';
import { WHISPER_LANGUAGES } from './whisper-languages.js';
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, resolve } from 'node:path';

/** How often a draining server closes the keep-alive connections that became idle. */
const DRAIN_IDLE_SWEEP_MS = 100;

export interface ServerDeps {
  log: Logger;
  clock: Clock;
  spawn: SpawnInstance;
  /** The script gateway threads run (gateway.threads): the voxmux entry point. Absent: threads cannot start. */
  gatewayThreadEntry?: string;
  baseEnv: Readonly<Record<string, string>>;
}

export interface Server {
  app: FastifyInstance;
  scheduler: Scheduler;
  supervisor: Supervisor;
  metrics: Metrics;
  /** The budget guard; undefined when no budget, uptime limit or price is configured. */
  budget: BudgetGuard | undefined;
  /** Starts MPS (when enabled) and every instance; resolves when each is ready or failed to start. */
  startInstances(): Promise<void>;
  /**
   * Starts the gateway threads (gateway.threads) on the clients' socket (`listenFd`, a descriptor
   * no loop polls, closed by close() and destroy()); the main thread's gateway listens at
   * `ownerUrl` for the calls they pass on (app/main.ts opens both).
   */
  startGatewayThreads(at: { listenFd: number; ownerUrl: string }): Promise<void>;
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
/** Adapters that also translate speech into English text (POST /v1/audio/translations). */
export const TRANSLATING_ADAPTERS: ReadonlySet<string> = new Set(['whisper']);

export const ADAPTER_LANGUAGES: Readonly<Record<string, readonly string[]>> = {
  pocketsphinx: ['en'],
  parakeet: ['en'],
  whisper: WHISPER_LANGUAGES,
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
    const speech = {
      voiceAliases: model.voiceAliases,
      catalogVoiceAliases: catalogVoiceAliasesOf(model),
      hasVoiceResources: VOICE_RESOURCE_ADAPTERS.has(model.adapter),
    };
    const diarizationModel = diarizationModelOf(config, name);
    const maxItemMs = maxDiarizationItemMsOf(model);
    const maxSpeakers = maxDiarizationSpeakersOf(model);
    const diarization = {
      wantsSpeechRegions: SPEECH_REGION_ADAPTERS.has(model.adapter),
      sessionIdleTimeoutMs: model.sessionIdleTimeoutMs,
      ...(maxItemMs === undefined ? {} : { maxItemMs }),
      ...(maxSpeakers === undefined ? {} : { maxSpeakers }),
    };
    return {
      id,
      created: createdS,
      ownedBy: 'voxmux',
      task,
      ...(TRANSLATING_ADAPTERS.has(model.adapter) ? { translates: true } : {}),
      ...(languages === undefined ? {} : { languages }),
      ...(task === 'speech' ? { speech } : {}),
      ...(task === 'diarization' ? { diarization } : {}),
      ...(task === 'transcription' && diarizationModel !== undefined ? { diarizationModel } : {}),
    };
  });
  return { list: () => entries, resolve: (name) => names.get(name) };
}

/** The diarization model of a transcription model's diarized_json: its diarizationModel, else the first diarization model. */
export function diarizationModelOf(config: Config, name: string): string | undefined {
  const chosen = config.models[name]?.diarizationModel ?? '';
  if (chosen !== '') return chosen;
  return Object.entries(config.models).find(([, m]) => taskOf(m) === 'diarization')?.[0];
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
  return checkFilePath('requestLog.path', path);
}

/** The problem with a file setting (requestLog.path, budget.statePath) whose folder must exist and be writable. */
export async function checkFilePath(key: string, path: string): Promise<string | undefined> {
  if (path === '') return undefined;
  const target = await stat(path).catch(() => undefined);
  if (target?.isDirectory() === true) return `${key}: expected a file: got the folder '${path}'`;
  const folder = dirname(resolve(path));
  const isWritable = await access(folder, constants.W_OK).then(
    () => true,
    () => false,
  );
  return isWritable ? undefined : `${key}: expected a file in an existing, writable folder: got '${path}'`;
}

const HELD_STATES: ReadonlySet<string> = new Set(['spawning', 'handshaking', 'loading', 'warming', 'ready', 'draining']);

/** GPUs on which at least one instance is live (spawned and not yet ended): what the budget accrues. */
export function countGpusHeld(instances: readonly { gpu: number | null; state: string }[]): number {
  return new Set(instances.filter((i) => i.gpu !== null && HELD_STATES.has(i.state)).map((i) => i.gpu)).size;
}

const WEBHOOK_TIMEOUT_MS = 10_000;

/** POSTs JSON (the budget webhook); rejects on a network error, a timeout or a status other than 2xx. */
async function postJson(url: string, body: unknown): Promise<void> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(WEBHOOK_TIMEOUT_MS),
  });
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`webhook answered ${res.status}`);
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
  const stateProblem = await checkFilePath('budget.statePath', config.budget.statePath);
  if (stateProblem !== undefined) problems.push(stateProblem);
  if (problems.length > 0) throw new ConfigError(problems);
  log.info({ gpus: nodeGpus }, 'gpus');
  const b = config.budget;
  const isBudgetOn = b.monthlyBudgetUsd > 0 || b.dailyUptimeLimitHours > 0 || b.gpuHourPriceUsd > 0;
  // The guard counts the GPUs the supervisor's placement put live instances on (created below).
  let gpusHeld = (): number => 0;
  const budget = isBudgetOn
    ? createBudgetGuard(b, { clock, log: log.child({ component: 'budget' }), metrics, gpusHeld: () => gpusHeld(), postJson })
    : undefined;
  const supervisor = createSupervisor(
    { ...config.supervisor, nodeGpus, models: config.models, retryAfterMs: config.scheduler.retryAfterMs },
    {
      spawn: deps.spawn,
      clock,
      log: log.child({ component: 'supervisor' }),
      metrics,
      baseEnv: deps.baseEnv,
      instanceEnv: mps === undefined ? undefined : () => mps.instanceEnv(),
      wakeRefusal: budget === undefined ? undefined : (model) => budget.wakeRefusal(model),
    },
  );
  gpusHeld = () => countGpusHeld(supervisor.stats().instances);
  const scheduler = createScheduler(
    { ...config.scheduler, models: config.models },
    { executor: supervisor, clock, log: log.child({ component: 'scheduler' }), metrics },
  );
  const autoscaling = createAutoscalingMetrics(
    {
      windowMs: config.telemetry.scaleWindowMs,
      targetBusyPercent: config.telemetry.scaleTargetBusyPercent,
      backlogDrainMs: config.telemetry.scaleBacklogDrainMs,
      models: Object.keys(config.models),
    },
    { supervisorStats: () => supervisor.stats(), schedulerStats: () => scheduler.stats(), metrics, clock },
  );
  const modelsCreatedS = Math.floor(clock.wallMs() / 1000);
  const models = createModelCatalog(config, modelsCreatedS);
  const locals = await gatewayLocalsOf(config, log);
  const voices: VoiceDirectory = {
    models: () => locals.voiceModels,
    catalog: (model) => scheduler.catalog(model),
    residency: (model) => supervisor.readyInstances(model),
  };
  const readiness = (): ReadinessSnapshot => {
    const { instances } = supervisor.stats();
    const body: Record<string, { isReady: boolean; state: string; instances: unknown[] }> = {};
    let isReady = true;
    for (const name of Object.keys(config.models)) {
      // One snapshot per placed instance (instancesPerGpu x GPUs, or `instances`): a model placed none is ready.
      const mine = instances.filter((i) => i.model === name);
      const isModelReady = mine.length === 0 || mine.some((i) => i.state === 'ready');
      // A model stopped when idle (or waking on demand) does not make the server unready: a
      // request wakes it, so traffic must keep coming.
      isReady &&= isModelReady || supervisor.isOnDemand(name);
      body[name] = { isReady: isModelReady, state: supervisor.modelState(name), instances: mine.map((i) => ({ ...i })) };
    }
    const budgetBody = budget === undefined ? {} : { budget: budget.snapshot() };
    return { isReady, body: { models: body, gpus: gpuHealth(nodeGpus, instances), scheduler: scheduler.stats(), ...budgetBody } };
  };
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
  let threads: GatewayThreads | undefined;
  const metricsText = async (): Promise<string> => {
    autoscaling.update();
    if (threads === undefined) return metrics.registry.metrics();
    const [own, theirs] = await Promise.all([metrics.registry.getMetricsAsJSON(), threads.metricsJson()]);
    return aggregateMetricsText([own, ...theirs]);
  };
  const sequences: NonNullable<GatewayDeps['sequences']> = {
    submit: (model, item, options) => scheduler.submitSequenceItem(model, item, options),
    end: (model, sessionId) => scheduler.endSession(model, sessionId),
  };
  // The one store of diarization sessions, whichever gateway thread a chunk arrives through.
  const diarizationSessions = new DiarizationSessionService({
    sequences,
    clock,
    metrics,
    log,
    maxChunkMs: config.gateway.maxDiarizationChunkMs,
  });
  const gatewayDeps: GatewayDeps = {
    transcribe: (model, request, options) => scheduler.submit(model, request, options),
    openStream: (model, input, options) => scheduler.openStream(model, input, options),
    sequences,
    diarizationSessions,
    models,
    voices,
    readiness,
    metricsText,
    metricsContentType: metrics.registry.contentType,
    decoder: locals.decoder,
    voiceActivity: locals.voiceActivity,
    clock,
    log,
    metrics,
    isDraining: () => isDraining,
    lifecycle: createModelLifecycleControl({
      state: (model) => supervisor.modelState(model),
      whyUnavailable: (model) => supervisor.whyUnavailable(model),
      wake: (model) => supervisor.wake(model),
      sleep: (model) => supervisor.sleep(model),
    }),
    instanceGpu,
    releaseIdleMemory: (p) => void releaseIdleMemory(p),
    ...(requestLog === undefined ? {} : { requestLog }),
  };
  const app = await buildGateway(gatewayOptionsOf(config), gatewayDeps);
  const connections = trackConnections(app.server);
  return {
    app,
    scheduler,
    supervisor,
    metrics,
    budget,
    async startInstances() {
      await mps?.start();
      budget?.start();
      await supervisor.start();
    },
    async startGatewayThreads(at) {
      if (deps.gatewayThreadEntry === undefined) throw new Error('gateway.threads needs the voxmux entry point to start threads from');
      threads = startGatewayThreads(
        { count: config.gateway.threads, entry: deps.gatewayThreadEntry, config, modelsCreatedS, ...at },
        {
          gateway: gatewayDeps,
          metricsText,
          instanceGpus: () =>
            Object.fromEntries(supervisor.stats().instances.flatMap((i) => (i.gpu === null ? [] : [[i.instanceId, i.gpu] as const]))),
          clock,
          log,
        },
      );
      await threads.started;
    },
    async close() {
      // The listener stays open while pending requests finish: new calls get 503 shutting_down
      // with Retry-After (the gateway reads isDraining), then it closes (docs/operations.md).
      isDraining = true;
      threads?.pushState();
      await scheduler.close();
      await threads?.close();
      await closeDraining(app, connections, clock);
      diarizationSessions.shutdown();
      await requestLog?.close();
      await supervisor.close();
      // Last: the instances held their GPUs until now, and the guard counts that time as it closes.
      budget?.close();
      await mps?.stop();
    },
    async destroy() {
      scheduler.destroy();
      supervisor.destroy();
      budget?.close();
      await threads?.destroy();
      await app.close();
      diarizationSessions.shutdown();
      await requestLog?.close();
      await mps?.stop();
    },
  };
}

/**
 * Closes a gateway that drains: app.close() waits for every connection, so those serving no
 * request (a keep-alive one whose call ended during the drain, a spare a client opened) are
 * closed until it returns.
 */
export async function closeDraining(app: FastifyInstance, connections: ConnectionTracker, clock: Clock): Promise<void> {
  let sweep: TimerHandle | undefined;
  const closeIdle = () => {
    connections.closeIdle();
    sweep = clock.setTimeout(closeIdle, DRAIN_IDLE_SWEEP_MS);
  };
  sweep = clock.setTimeout(closeIdle, DRAIN_IDLE_SWEEP_MS);
  try {
    await app.close();
  } finally {
    sweep.cancel();
  }
}

/** The gateway's options from the config: the same for the main thread and every gateway thread. */
export function gatewayOptionsOf(config: Config): GatewayOptions {
  const gateway = config.gateway;
  return {
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
    speechBufferBytes: gateway.speechBufferBytes,
    maxDiarizationChunkMs: gateway.maxDiarizationChunkMs,
    realtime: config.realtime,
  };
}

/** What each gateway (the main thread's, a gateway thread's) builds for itself: the audio decoder and voice activity. */
export async function gatewayLocalsOf(
  config: Config,
  log: Logger,
): Promise<{ decoder: AudioDecoder; voiceActivity: VoiceActivityDetector; voiceModels: VoiceModel[] }> {
  const gateway = config.gateway;
  const voiceActivity = gateway.voiceActivity === 'energy' ? { detector: createEnergyDetector() } : await createSileroDetector();
  if (voiceActivity.fallbackReason !== undefined) {
    log.warn({ err: voiceActivity.fallbackReason }, 'silero vad unavailable: cutting long audio at energy minima');
  }
  const decoder = createAudioDecoder({
    maxDurationMs: gateway.maxAudioDurationMs,
    ffmpegPath: gateway.ffmpegPath,
    ffmpegTimeoutMs: gateway.ffmpegTimeoutMs,
    tmpDir: gateway.tmpDir !== '' ? gateway.tmpDir : tmpdir(),
  });
  const voiceModels = Object.entries(config.models)
    .filter(([, m]) => taskOf(m) === 'speech')
    .map(([model, m]) => ({ model, engine: m.adapter, voiceAliases: m.voiceAliases, catalogVoiceAliases: catalogVoiceAliasesOf(m) }));
  return { decoder, voiceActivity: voiceActivity.detector, voiceModels };
}
