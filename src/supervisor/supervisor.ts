/**
 * The supervisor: starts, watches and restarts every model instance, and runs work on them
 * (batches, sequence batches, streams) and loads resources into them.
 * It satisfies the scheduler's Executor port structurally (wired in app/).
 *
 * Each model has `instances` slots. A slot holds one InstanceProcess at a time; when it ends
 * unexpectedly, the slot is refilled after the restart policy's backoff. Crash loops are reported
 * and restarted at the longest backoff, never spun.
 */
import { mkdirSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Clock, TimerHandle } from '../core/clock.js';
import { errors } from '../core/error-catalog.js';
import type { ServiceError } from '../core/errors.js';
import type { CatalogEntry, InstanceView, WorkExecutor } from '../protocol/work.js';
import type { JsonObject } from '../protocol/message-table.js';
import type { ResourceCounters, ResourceInfo } from '../protocol/codec.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { observeBoot, type InstanceBoot } from './boot-report.js';
import { INSTANCE_STATES, type InstanceState } from './instance-state.js';
import { InstanceProcess, type InstanceEnd, type InstanceTimeouts, type ResourceLoad } from './instance-process.js';
import { decideRestart, type RestartPolicy } from './restart-policy.js';
import { cpuThreadsFor, GPU_INSTANCE_THREAD_CAPS, placeInstances, type Placement } from './placement.js';
import { findHostPath } from './host-path.js';
import { createBusyMeter } from './busy-meter.js';
import { createModelLifecycle, type ModelState, type WakeEnd } from './model-lifecycle.js';
import type { SpawnInstance } from './spawn.js';

/** The thread-count variables of PyTorch (OpenMP), MKL and OpenBLAS: an instance's CPU share. */
const THREAD_VARIABLES = ['OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS'] as const;

export interface SupervisedModel {
  adapter: string;
  instances: number;
  instancesPerGpu: number;
  gpus: readonly number[];
  options: Record<string, unknown>;
  command: readonly string[];
  exclusiveWarmup: boolean;
  mpsActiveThreadPercentages: readonly number[];
  /** Intra-op CPU threads per instance; 0 shares the cores among GPU-pinned instances, up to the adapter's cap (cpuThreadsFor). @default 0 */
  cpuThreads?: number;
  /** Stop the model's instances after this long without requests, in milliseconds; 0 never. @default 0 */
  idleStopAfterMs?: number;
  /** Longest a wake may take, in milliseconds. @default 90000 */
  wakeTimeoutMs?: number;
}

export interface SupervisorOptions extends InstanceTimeouts, RestartPolicy {
  pythonPath: string;
  probeIntervalMs: number;
  probeTimeoutMs: number;
  hostPath: string;
  loadLockPath: string;
  /** GPUs of this node (detected or configured); empty on a CPU-only node. */
  nodeGpus: readonly number[];
  /** CPU cores the instances share. @default os.availableParallelism() */
  cpuCount?: number;
  models: Readonly<Record<string, SupervisedModel>>;
  /** Retry-After of the errors requests held for a failed wake get, in milliseconds. @default 1000 */
  retryAfterMs?: number;
}

export interface SupervisorDeps {
  spawn: SpawnInstance;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** Environment the instances inherit. */
  baseEnv: Readonly<Record<string, string>>;
  /** Extra environment for instances (MPS pipe and log directories). */
  instanceEnv?: () => Readonly<Record<string, string>>;
  /** The refusal of a wake (the budget's hard stop), or undefined to allow it. */
  wakeRefusal?: (model: string) => ServiceError | undefined;
}

export interface InstanceSnapshot {
  instanceId: string;
  model: string;
  index: number;
  gpu: number | null;
  pid: number | null;
  /**
   * The slot's instance's state; `restarting` while the slot waits out its backoff; `closed` once
   * its model is stopped (or the supervisor closed) and no instance is live, its last end in lastEnd.
   */
  state: InstanceState | 'restarting';
  /** Restarts that spawned a new instance; one cancelled during its backoff (a stop, a close) does not count. */
  restarts: number;
  isCrashLoop: boolean;
  device: string | null;
  /** Device memory the live instance holds, as last reported; 0 when none is live. */
  memoryBytes: number;
  warmupMs: number | null;
  graphsCaptured: number;
  eagerBatches: number;
  graphReplays: number;
  runningBatches: number;
  /** Streams open on the live instance (started and not yet ended by its host). */
  runningStreams: number;
  /** The resources the live instance holds (its last report); empty when none is live. */
  resources: readonly ResourceInfo[];
  /** The live instance's adapter resource counters (cumulative since it started); null when it keeps none. */
  resourceCounters: ResourceCounters | null;
  /** The live instance's engine counts by name (cumulative since it started); empty when none is live or it keeps none. */
  engineCounters: Readonly<Record<string, number>>;
  /** The current instance's boot broken down (process start, load, warmup and its adapter's stages); null until it is ready. */
  boot: InstanceBoot | null;
  lastEnd: { reason: InstanceEnd['reason']; exitCode: number | null; signal: string | null; code: string | null; atMs: number } | null;
  /** Milliseconds this slot had work running (batches, sequence batches, streams), across restarts. */
  busyMs: number;
  /** Requests and sequence items this slot completed with a result, across restarts. */
  completedRequests: number;
}

/** One GPU of the node: how long any instance on it had work running. */
export interface GpuSnapshot {
  gpu: number;
  busyMs: number;
}

export interface SupervisorStats {
  instances: readonly InstanceSnapshot[];
  gpus: readonly GpuSnapshot[];
}

interface Slot {
  model: string;
  index: number;
  placement: Placement;
  generation: number;
  current: InstanceProcess | undefined;
  restarts: number;
  failuresMs: number[];
  isCrashLoop: boolean;
  restartTimer: TimerHandle | undefined;
  /** The model is stopped (idle stop or sleep): the slot is not refilled. */
  isStopped: boolean;
  lastEnd: InstanceSnapshot['lastEnd'];
  /** The catalogue of the last instance that became ready here: it outlives restarts. */
  catalog: readonly CatalogEntry[];
  /** The resource counters already exported to metrics, and the instance they came from. */
  exported: { instanceId: string; counters: ResourceCounters } | undefined;
  /** The engine counters already exported to metrics, and the instance they came from. */
  exportedEngine: { instanceId: string; counters: Readonly<Record<string, number>> } | undefined;
  completedRequests: number;
}

export const DEFAULT_WAKE_TIMEOUT_MS = 90_000;

const BUNDLED_HOST_PATH = findHostPath(dirname(fileURLToPath(import.meta.url)));

/** The supervisor runs work on its instances (WorkExecutor, the scheduler's Executor port) and more. */
export interface Supervisor extends WorkExecutor {
  /** Starts every instance; resolves when each has become ready or failed its first start. */
  start(): Promise<void>;
  /** @throws instance_crashed, instance_wedged, and wire codes from the instance (resource_not_found, out_of_memory...) */
  loadResource(instanceId: string, name: string, kind: string, source: JsonObject): Promise<ResourceLoad>;
  /** Resolves with the bytes freed. @throws instance_crashed, instance_wedged, and wire codes from the instance */
  evictResource(instanceId: string, name: string): Promise<{ name: string; bytes: number }>;
  stats(): SupervisorStats;
  /** Each model's lifecycle state. */
  modelState(model: string): ModelState;
  /** Whether the model is stopped or waking by demand (it then does not make the server unready). */
  isOnDemand(model: string): boolean;
  /** A request for the model arrived, or is retried: its idle timer restarts, and a stopped model wakes (the scheduler calls it). */
  demand(model: string): void;
  /** Why the model cannot serve now (its wake failed or was refused); undefined otherwise. */
  whyUnavailable(model: string): ServiceError | undefined;
  /** When a waking model should serve (see ModelLifecycle.readyAtMs); undefined otherwise. */
  readyAtMs(model: string): number | undefined;
  /**
   * Wakes a stopped model (idempotent). Resolves once the wake (or the boot under way) ends: an
   * instance is ready, or the error saying why not (model_wake_failed, model_wake_timeout,
   * gpu_budget_exhausted, shutting_down); at once with model_wake_failed while its instances are
   * restarted with none up (after a boot that started none, or with every one in a crash loop).
   */
  wake(model: string): Promise<WakeEnd>;
  /**
   * Stops a model's instances (idempotent): running work finishes first, and work queued for the
   * model is held and wakes it again once stopped. Resolves once stopped (or woken again).
   */
  sleep(model: string): Promise<void>;
  /**
   * The scheduler's count of work queued for each model (requests, sequence items and streams not
   * yet dispatched), given once: a model with queued work is not idle, and a sleep holds it.
   */
  observeQueue(queued: (model: string) => number): void;
  /** Lets running batches finish, then stops every instance. */
  close(): Promise<void>;
  /** Kills every instance now. */
  destroy(): void;
}

export function createSupervisor(options: SupervisorOptions, deps: SupervisorDeps): Supervisor {
  const { clock, metrics } = deps;
  const log = deps.log;
  const slots: Slot[] = [];
  const byId = new Map<string, InstanceProcess>();
  const listeners = new Set<() => void>();
  let isClosing = false;
  let queuedOf: (model: string) => number = () => 0;
  // The warmup gate: while held, no instance is offered for dispatch (see exclusiveWarmup).
  let isGateHeld = false;
  let gateTail: Promise<void> = Promise.resolve();
  const hostPath = options.hostPath !== '' ? options.hostPath : BUNDLED_HOST_PATH;
  const cpuCount = options.cpuCount ?? availableParallelism();
  const loadLockPath = options.loadLockPath !== '' ? options.loadLockPath : join(tmpdir(), 'voxmux-load.lock');
  mkdirSync(dirname(loadLockPath), { recursive: true });

  for (const [model, config] of Object.entries(options.models)) {
    for (const [index, placement] of placeInstances(config, options.nodeGpus).entries()) {
      slots.push({
        model,
        index,
        placement,
        generation: 0,
        current: undefined,
        restarts: 0,
        failuresMs: [],
        isCrashLoop: false,
        restartTimer: undefined,
        isStopped: false,
        lastEnd: null,
        catalog: [],
        exported: undefined,
        exportedEngine: undefined,
        completedRequests: 0,
      });
    }
  }

  for (const model of Object.keys(options.models)) {
    metrics.inferences.inc({ model }, 0);
    metrics.executions.inc({ model }, 0);
    metrics.audioProcessed.inc({ model }, 0);
    metrics.computeDuration.zero({ model });
    metrics.sequenceItemsExecuted.inc({ model }, 0);
    metrics.sequenceExecutions.inc({ model }, 0);
    metrics.streamChunks.inc({ model }, 0);
    metrics.instanceStreams.inc({ model, outcome: 'ok' }, 0);
  }

  // Busy time per slot and per GPU, for the busy ratios the autoscaling metrics export.
  const busy = createBusyMeter(clock);
  const slotKey = (slot: Slot) => `slot:${slot.model}#${slot.index}`;
  const gpuKey = (gpu: number) => `gpu:${gpu}`;
  const busyKeys = (slot: Slot) => (slot.placement.gpu === undefined ? [slotKey(slot)] : [slotKey(slot), gpuKey(slot.placement.gpu)]);
  /** Counts `work` as busy time of the instance's slot and GPU until it settles. */
  function trackWork<T>(instance: InstanceProcess, work: Promise<T>, completed: (result: T) => number): Promise<T> {
    const slot = slots.find((s) => s.current === instance);
    if (slot === undefined) return work;
    const keys = busyKeys(slot);
    for (const key of keys) busy.begin(key);
    const done = () => keys.forEach((key) => busy.end(key));
    return work.then(
      (result) => {
        done();
        slot.completedRequests += completed(result);
        return result;
      },
      (err: unknown) => {
        done();
        throw err;
      },
    );
  }

  const lifecycle = createModelLifecycle(
    {
      models: Object.fromEntries(
        Object.entries(options.models).map(([model, m]) => [
          model,
          { idleStopAfterMs: m.idleStopAfterMs ?? 0, wakeTimeoutMs: m.wakeTimeoutMs ?? DEFAULT_WAKE_TIMEOUT_MS },
        ]),
      ),
      retryAfterMs: options.retryAfterMs ?? 1000,
    },
    {
      clock,
      log,
      metrics,
      startInstances: startModel,
      stopInstances: stopModel,
      isBusy: (model) =>
        slots.some((s) => s.model === model && ((s.current?.facts.runningBatches ?? 0) > 0 || (s.current?.facts.runningStreams ?? 0) > 0)),
      hasQueuedWork: (model) => queuedOf(model) > 0,
      wakeRefusal: deps.wakeRefusal,
      onChanged: () => notify(),
    },
  );

  /**
   * Launches a model's slots. `isAnyReady` resolves true at the first instance ready (which ends a
   * wake or the boot; the others join as they become ready), false once none could start;
   * `started` once every launch has become ready or failed its first start.
   */
  function launchModel(model: string): { isAnyReady: Promise<boolean>; started: Promise<void> } {
    const launches = slots.filter((s) => s.model === model).map((slot) => launch(slot).then(() => slot.current?.state === 'ready'));
    const isAnyReady = new Promise<boolean>((resolve) => {
      let left = launches.length;
      // A slot that failed its first start is restarted after its backoff, and that instance may be
      // ready while the other launches still run: the first ready instance ends the start, whichever
      // generation it is (a wake otherwise failed later, and its stop killed the ready instance).
      const end = (isReady: boolean) => {
        listeners.delete(watchReady);
        resolve(isReady);
      };
      const watchReady = () => {
        if (slots.some((s) => s.model === model && s.current?.state === 'ready' && s.current.end === undefined)) end(true);
      };
      listeners.add(watchReady);
      if (left === 0) end(false);
      for (const l of launches) {
        void l.then((isReady) => {
          left -= 1;
          if (isReady) end(true);
          else if (left === 0) end(false);
        });
      }
    });
    return { isAnyReady, started: Promise.all(launches).then(() => undefined) };
  }

  /** Launches a stopped model's slots; true once one instance is ready, false when none started. */
  function startModel(model: string): Promise<boolean> {
    for (const slot of slots.filter((s) => s.model === model)) {
      slot.isStopped = false;
      slot.failuresMs = [];
      slot.isCrashLoop = false;
    }
    return launchModel(model).isAnyReady;
  }

  /** Stops a model's slots: ready instances finish their work and close, others are killed now. */
  async function stopModel(model: string): Promise<void> {
    const closing: Promise<void>[] = [];
    for (const slot of slots.filter((s) => s.model === model)) {
      slot.isStopped = true;
      slot.restartTimer?.cancel();
      slot.restartTimer = undefined;
      const instance = slot.current;
      if (instance === undefined || instance.end !== undefined) continue;
      if (instance.state === 'ready' || instance.state === 'draining') closing.push(instance.close());
      else {
        const ended = new Promise<void>((resolve) => instance.on('ended', () => resolve()));
        instance.destroy();
        closing.push(ended);
      }
    }
    await Promise.all(closing);
    notify();
  }

  const notify = () => {
    updateStateGauges();
    for (const l of listeners) l();
  };

  function updateStateGauges(): void {
    for (const model of Object.keys(options.models)) {
      const counts = new Map<string, number>(INSTANCE_STATES.map((s) => [s, 0]));
      counts.set('restarting', 0);
      let memory = 0;
      let graphs = 0;
      let eager = 0;
      let replays = 0;
      let resources = 0;
      for (const slot of slots.filter((s) => s.model === model)) {
        const state = slotState(slot);
        counts.set(state, (counts.get(state) ?? 0) + 1);
        const facts = slot.current?.facts;
        if (facts !== undefined && slot.current?.end === undefined) {
          memory += facts.memoryBytes;
          graphs += facts.graphsCaptured;
          eager += facts.eagerBatches;
          replays += facts.graphReplays;
          resources += facts.resources.length;
        }
      }
      for (const [state, n] of counts) metrics.instances.set({ model, state }, n);
      metrics.instanceMemory.set({ model }, memory);
      metrics.graphsCaptured.set({ model }, graphs);
      metrics.eagerBatches.set({ model }, eager);
      metrics.graphReplays.set({ model }, replays);
      metrics.instanceResources.set({ model }, resources);
    }
  }

  function slotState(slot: Slot): InstanceSnapshot['state'] {
    if (slot.restartTimer !== undefined) return 'restarting';
    const instance = slot.current;
    // A slot that is not refilled (its model stopped, or the supervisor closing) and has no live
    // instance reads closed, as its model's other stopped slots do, even when its last instance
    // crashed (a restart the stop cancelled, or a crash during the stop): lastEnd keeps the crash.
    if ((slot.isStopped || isClosing) && instance?.end !== undefined) return 'closed';
    return instance?.state ?? 'closed';
  }

  function spawnArgs(model: string, config: SupervisedModel): { command: string; args: string[] } {
    if (config.command.length > 0) return { command: config.command[0]!, args: config.command.slice(1) };
    return {
      command: options.pythonPath,
      args: [
        '-u',
        '-m',
        'voxmux_host',
        '--adapter',
        config.adapter,
        '--probe-interval-ms',
        String(options.probeIntervalMs),
        '--probe-timeout-ms',
        String(options.probeTimeoutMs),
      ],
    };
  }

  function launch(slot: Slot): Promise<void> {
    const config = options.models[slot.model]!;
    slot.generation += 1;
    slot.restartTimer = undefined;
    const instanceId = `${slot.model}-${slot.index}-g${slot.generation}`;
    const { command, args } = spawnArgs(slot.model, config);
    const env: Record<string, string> = {
      ...deps.baseEnv,
      ...(deps.instanceEnv?.() ?? {}),
      PYTHONPATH: [hostPath, deps.baseEnv.PYTHONPATH].filter((p) => p !== undefined && p !== '').join(':'),
      PYTHONUNBUFFERED: '1',
      VOXMUX_INSTANCE_ID: instanceId,
    };
    if (slot.placement.gpu !== undefined) env.CUDA_VISIBLE_DEVICES = String(slot.placement.gpu);
    if (slot.placement.mpsActiveThreadPercentage !== undefined) {
      env.CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = String(slot.placement.mpsActiveThreadPercentage);
    }
    const pinnedInstances = slots.filter((s) => s.placement.gpu !== undefined).length;
    const configuredThreads = config.cpuThreads ?? 0;
    const threads = cpuThreadsFor(
      configuredThreads,
      slot.placement.gpu !== undefined,
      pinnedInstances,
      cpuCount,
      GPU_INSTANCE_THREAD_CAPS[config.adapter],
    );
    // A default share gives way to an operator's own OMP_NUM_THREADS; a configured count does not.
    if (threads !== undefined && (configuredThreads > 0 || deps.baseEnv.OMP_NUM_THREADS === undefined)) {
      for (const name of THREAD_VARIABLES) env[name] = String(threads);
    }
    const instance = new InstanceProcess(
      {
        instanceId,
        model: slot.model,
        adapter: config.adapter,
        adapterOptions: config.options,
        loadLockPath,
        spawnRequest: { command, args, env },
        handshakeTimeoutMs: options.handshakeTimeoutMs,
        loadTimeoutMs: options.loadTimeoutMs,
        warmupTimeoutMs: options.warmupTimeoutMs,
        heartbeatIntervalMs: options.heartbeatIntervalMs,
        heartbeatMissLimit: options.heartbeatMissLimit,
        batchTimeoutMs: options.batchTimeoutMs,
        closeTimeoutMs: options.closeTimeoutMs,
      },
      {
        spawn: deps.spawn,
        clock,
        log: log.child({ component: 'instance' }),
        beforeWarmup: config.exclusiveWarmup ? () => acquireWarmupGate(instanceId) : undefined,
      },
    );
    slot.current = instance;
    byId.set(instanceId, instance);
    const startedMs = clock.nowMs();
    instance.on('stateChanged', ({ state }) => {
      if (state === 'ready') {
        slot.catalog = instance.facts.catalog;
        metrics.instanceWarmup.observe({ model: slot.model }, (clock.nowMs() - startedMs) / 1000);
        const { boot } = instance.facts;
        if (boot !== undefined) observeBoot(metrics, slot.model, boot);
        // A ready instance is not in a crash loop (/health/ready and availability read the flag),
        // but a loop's failures are kept: one that ends again soon is judged with them.
        if (!slot.isCrashLoop) slot.failuresMs = [];
        slot.isCrashLoop = false;
        // A model whose boot started no instance reads starting until now (notified just below).
        lifecycle.instanceReady(slot.model);
      }
      notify();
    });
    instance.on('batchFinished', ({ batchSize, computeMs }) => {
      metrics.inferences.inc({ model: slot.model }, batchSize);
      metrics.executions.inc({ model: slot.model });
      metrics.computeDuration.observe({ model: slot.model }, computeMs / 1000);
    });
    instance.on('batchSent', ({ sendMs }) => metrics.batchSendDuration.observe({ model: slot.model }, sendMs / 1000));
    instance.on('sequenceBatchFinished', ({ batchSize, computeMs }) => {
      metrics.sequenceItemsExecuted.inc({ model: slot.model }, batchSize);
      metrics.sequenceExecutions.inc({ model: slot.model });
      metrics.sequenceComputeDuration.observe({ model: slot.model }, computeMs / 1000);
    });
    instance.on('streamEnded', ({ outcome, chunks }) => {
      metrics.instanceStreams.inc({ model: slot.model, outcome });
      metrics.streamChunks.inc({ model: slot.model }, chunks);
    });
    instance.on('resourceCountersReported', ({ counters }) => exportResourceCounters(slot, instance, counters));
    instance.on('engineCountersReported', ({ counters }) => exportEngineCounters(slot, instance, counters));
    // Routing prefers instances holding a stream's resource: the scheduler looks again.
    instance.on('resourcesChanged', () => notify());
    // The gauges of what the instances report (memory, eager batches, graph replays) follow each beat.
    instance.on('factsReported', () => updateStateGauges());
    instance.on('ended', (end) => onEnded(slot, instance, end));
    return instance.start().catch((err: ServiceError) => {
      // A start that a stop, a sleep or a close cut short did not fail: it ends with shutting_down,
      // which no failure of the instance gives.
      if (err.code === 'shutting_down') {
        log.info({ instanceId, model: slot.model, code: err.code }, 'instance start cancelled');
        return;
      }
      log.error({ instanceId, model: slot.model, code: err.code, err }, 'instance failed to start');
    });
  }

  /**
   * Takes the warmup gate for one instance: waits for earlier holders, stops dispatch to every
   * instance, waits until no batch is running anywhere (or until it ends), then lets the capture
   * start. An instance that ended while it waited for earlier holders passes the gate on without
   * holding it.
   */
  function acquireWarmupGate(instanceId: string): Promise<() => void> {
    let release!: () => void;
    const previous = gateTail;
    gateTail = new Promise<void>((resolve) => (release = resolve));
    return previous.then(async () => {
      if (!byId.has(instanceId)) {
        release();
        return () => undefined;
      }
      isGateHeld = true;
      notify();
      log.info({ instanceId }, 'warmup gate held');
      // A holder that dies meanwhile stops waiting: its start ends at once and releases the gate.
      while (byId.has(instanceId) && slots.some((s) => (s.current?.facts.runningBatches ?? 0) > 0)) {
        await new Promise<void>((resolve) => clock.setTimeout(resolve, 10));
      }
      return () => {
        isGateHeld = false;
        log.info({ instanceId }, 'warmup gate released');
        release();
        notify();
      };
    });
  }

  /**
   * Adds what an instance's cumulative counters grew by since the last report to the slot's metric
   * series (so they keep growing across restarts: a new instance starts from zero), and sets the
   * gauges while the instance is live. A report read after the instance's end (Node's 'exit' can come
   * before the child's pipes are drained) still counts, but leaves the gauges of the slot at 0.
   */
  function exportResourceCounters(slot: Slot, instance: InstanceProcess, counters: ResourceCounters): void {
    const instanceId = instance.instanceId;
    const before = slot.exported?.instanceId === instanceId ? slot.exported.counters : undefined;
    slot.exported = { instanceId, counters };
    const grown = (key: keyof ResourceCounters) => Math.max(0, counters[key] - (before?.[key] ?? 0));
    const labels = { model: slot.model, instance_index: String(slot.index) };
    metrics.resourceHits.inc(labels, grown('hits'));
    metrics.resourceMisses.inc(labels, grown('misses'));
    metrics.resourceEvictions.inc(labels, grown('evictions'));
    metrics.resourceLoads.inc({ ...labels, source: 'disk' }, grown('loadsFromDisk'));
    metrics.resourceLoads.inc({ ...labels, source: 'host' }, grown('loadsFromHost'));
    metrics.resourceLoadDuration.inc({ ...labels, source: 'disk' }, grown('diskLoadMs') / 1000);
    metrics.resourceLoadDuration.inc({ ...labels, source: 'host' }, grown('hostLoadMs') / 1000);
    if (instance.end !== undefined || slot.current !== instance) return;
    metrics.resourceResidentBytes.set(labels, counters.residentBytes);
    metrics.resourceBudgetBytes.set(labels, counters.budgetBytes);
  }

  /** Adds what each engine counter grew since the slot's last report to its series (a new instance counts from zero). */
  function exportEngineCounters(slot: Slot, instance: InstanceProcess, counters: Readonly<Record<string, number>>): void {
    const instanceId = instance.instanceId;
    const before = slot.exportedEngine?.instanceId === instanceId ? slot.exportedEngine.counters : {};
    slot.exportedEngine = { instanceId, counters };
    for (const [name, value] of Object.entries(counters)) {
      const grown = value - (before[name] ?? 0);
      if (grown > 0) metrics.engineEvents.inc({ model: slot.model, instance_index: String(slot.index), name }, grown);
    }
  }

  function onEnded(slot: Slot, instance: InstanceProcess, end: InstanceEnd): void {
    byId.delete(instance.instanceId);
    if (slot.exported !== undefined) metrics.resourceResidentBytes.set({ model: slot.model, instance_index: String(slot.index) }, 0);
    slot.lastEnd = { reason: end.reason, exitCode: end.exitCode, signal: end.signal, code: end.error?.code ?? null, atMs: clock.wallMs() };
    if (isClosing || slot.isStopped || end.reason === 'closed') {
      notify();
      return;
    }
    const decision = decideRestart(slot.failuresMs, clock.nowMs(), options);
    slot.failuresMs = decision.recentFailuresMs;
    slot.isCrashLoop = decision.isCrashLoop;
    const fields = {
      instanceId: instance.instanceId,
      model: slot.model,
      exitCode: end.exitCode,
      signal: end.signal,
      code: end.error?.code,
      restartInMs: decision.delayMs,
    };
    if (decision.isCrashLoop) log.error({ ...fields, failures: decision.recentFailuresMs.length }, 'instance crash loop');
    else log.warn(fields, 'instance exited');
    // A restart is counted when it spawns its instance: a stop or a close during the backoff cancels it.
    slot.restartTimer = clock.setTimeout(() => {
      slot.restarts += 1;
      metrics.instanceRestarts.inc({ model: slot.model, reason: end.reason });
      void launch(slot);
    }, decision.delayMs);
    // With every instance in a crash loop nothing can serve: a ready model reads starting until one
    // is ready again (notified just below). A restart of one alone leaves the model as it is.
    if (slots.every((s) => s.model !== slot.model || s.isCrashLoop)) lifecycle.instancesCrashLooping(slot.model);
    notify();
  }

  function gone(instanceId: string): ServiceError {
    return errors.instanceCrashed({ instanceId, reason: 'the instance is gone' });
  }

  return {
    async start() {
      // A model put to sleep before the boot is left stopped: the next request wakes it.
      const booting = Object.keys(options.models).filter((model) => lifecycle.booting(model));
      await Promise.all(
        booting.map(async (model) => {
          const boot = launchModel(model);
          const booted = boot.isAnyReady.then((isAnyReady) => lifecycle.booted(model, { isAnyReady }));
          await Promise.all([boot.started, booted]);
        }),
      );
      notify();
    },

    modelState: (model) => lifecycle.state(model),
    isOnDemand: (model) => lifecycle.isOnDemand(model),
    demand: (model) => lifecycle.demand(model),
    readyAtMs: (model) => lifecycle.readyAtMs(model),
    whyUnavailable: (model) => (options.models[model] === undefined ? undefined : lifecycle.failure(model)),
    wake: (model) => lifecycle.wake(model),
    sleep: (model) => lifecycle.sleep(model),
    observeQueue(queued) {
      queuedOf = queued;
    },

    readyInstances(model) {
      const out: InstanceView[] = [];
      if (isGateHeld) return out;
      for (const slot of slots) {
        const instance = slot.current;
        // An instance that has ended reads ready until it has failed its work (its streams' ends
        // come first): work retried from those ends must not come back to it.
        if (slot.model !== model || instance?.state !== 'ready' || instance.end !== undefined) continue;
        const resources = instance.facts.resources.map(({ name, residency, bytes }) => ({ name, residency, bytes }));
        out.push({ instanceId: instance.instanceId, resources });
      }
      return out;
    },

    catalog(model) {
      const byName = new Map<string, CatalogEntry>();
      for (const slot of slots) {
        if (slot.model !== model) continue;
        for (const entry of slot.catalog) if (!byName.has(entry.name)) byName.set(entry.name, entry);
      }
      return [...byName.values()];
    },

    availability(model) {
      if (options.models[model] !== undefined && !isClosing) {
        const state = lifecycle.state(model);
        // A starting model is judged by its instances below: one already ready takes work.
        if (state === 'stopped' || state === 'stopping') return lifecycle.isWaking(model) ? 'starting' : 'unavailable';
      }
      const mine = slots.filter((s) => s.model === model);
      if (mine.some((s) => s.current?.state === 'ready')) return 'ready';
      if (isClosing || mine.length === 0 || mine.every((s) => s.isCrashLoop)) return 'unavailable';
      return 'starting';
    },

    runBatch(instanceId, batch) {
      const instance = byId.get(instanceId);
      if (instance === undefined) return Promise.reject(gone(instanceId));
      const work = instance.runBatch(batch).then((outcomes) => {
        for (const o of outcomes) {
          if (o.ok) metrics.audioProcessed.inc({ model: instance.model }, o.result.durationS);
        }
        return outcomes;
      });
      return trackWork(instance, work, (outcomes) => outcomes.filter((o) => o.ok).length);
    },

    runSequenceBatch(instanceId, batch) {
      const instance = byId.get(instanceId);
      if (instance === undefined) return Promise.reject(gone(instanceId));
      return trackWork(instance, instance.runSequenceBatch(batch), (outcomes) => outcomes.filter((o) => o.ok).length);
    },

    endSessions(instanceId, sessionIds) {
      byId.get(instanceId)?.endSessions(sessionIds);
    },

    openStream(instanceId, input, sink) {
      const instance = byId.get(instanceId);
      if (instance === undefined) {
        sink.end({ ok: false, error: gone(instanceId) });
        return { grant: () => undefined, cancel: () => undefined };
      }
      const slot = slots.find((s) => s.current === instance);
      if (slot === undefined) return instance.openStream(input, sink);
      const keys = busyKeys(slot);
      for (const key of keys) busy.begin(key);
      let isEnded = false;
      const endBusy = () => {
        if (isEnded) return;
        isEnded = true;
        keys.forEach((key) => busy.end(key));
      };
      try {
        return instance.openStream(input, {
          chunk: (chunk) => sink.chunk(chunk),
          end: (end) => {
            endBusy();
            if (end.ok) slot.completedRequests += 1;
            sink.end(end);
          },
        });
      } catch (err) {
        endBusy();
        throw err;
      }
    },

    loadResource(instanceId, name, kind, source) {
      const instance = byId.get(instanceId);
      if (instance === undefined) return Promise.reject(gone(instanceId));
      return instance.loadResource(name, kind, source);
    },

    evictResource(instanceId, name) {
      const instance = byId.get(instanceId);
      if (instance === undefined) return Promise.reject(gone(instanceId));
      return instance.evictResource(name);
    },

    onInstancesChanged(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    stats() {
      const instances = slots.map((slot): InstanceSnapshot => {
        const facts = slot.current?.facts;
        const isLive = slot.current !== undefined && slot.current.end === undefined;
        return {
          instanceId: slot.current?.instanceId ?? `${slot.model}-${slot.index}`,
          model: slot.model,
          index: slot.index,
          gpu: slot.placement.gpu ?? null,
          pid: isLive ? (facts?.pid ?? null) : null,
          state: slotState(slot),
          restarts: slot.restarts,
          isCrashLoop: slot.isCrashLoop,
          device: facts?.device ?? null,
          // An ended instance's memory is freed with its process, as the memory gauge counts it.
          memoryBytes: isLive ? (facts?.memoryBytes ?? 0) : 0,
          warmupMs: facts?.warmupMs ?? null,
          graphsCaptured: facts?.graphsCaptured ?? 0,
          eagerBatches: facts?.eagerBatches ?? 0,
          graphReplays: facts?.graphReplays ?? 0,
          runningBatches: facts?.runningBatches ?? 0,
          runningStreams: isLive ? (facts?.runningStreams ?? 0) : 0,
          resources: isLive ? (facts?.resources ?? []) : [],
          resourceCounters: isLive ? (facts?.resourceCounters ?? null) : null,
          engineCounters: isLive ? (facts?.engineCounters ?? {}) : {},
          boot: facts?.boot ?? null,
          lastEnd: slot.lastEnd,
          busyMs: busy.busyMs(slotKey(slot)),
          completedRequests: slot.completedRequests,
        };
      });
      const gpus = options.nodeGpus.map((gpu): GpuSnapshot => ({ gpu, busyMs: busy.busyMs(gpuKey(gpu)) }));
      return Object.freeze({ instances: Object.freeze(instances), gpus: Object.freeze(gpus) });
    },

    async close() {
      isClosing = true;
      lifecycle.close();
      for (const slot of slots) {
        slot.restartTimer?.cancel();
        slot.restartTimer = undefined;
      }
      await Promise.all(slots.map((slot) => slot.current?.close()));
      notify();
    },

    destroy() {
      isClosing = true;
      lifecycle.close();
      for (const slot of slots) {
        slot.restartTimer?.cancel();
        slot.restartTimer = undefined;
        slot.current?.destroy();
      }
      notify();
    },
  };
}
