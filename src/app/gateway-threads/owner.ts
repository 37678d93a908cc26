/**
 * The main thread's side of the gateway threads: it starts them (each listening on a duplicate of
 * the clients' socket), answers their requests (serve-thread.ts), writes their request-log lines,
 * tells them its state, gathers their metrics, and drains them on close. A thread
 * that ends unexpectedly is replaced; the requests it had handed over are cancelled, since no one
 * is left to answer.
 */
import { closeSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import type { Clock, TimerHandle } from '../../core/clock.js';
import type { Config } from '../../config/schema.js';
import type { GatewayDeps, ModelLifecycleState } from '../../gateway/index.js';
import type { Logger } from '../../telemetry/logger.js';
import { closeFd, duplicateFd } from './duplicate-fd.js';
import { serveThread, type ThreadServer } from './serve-thread.js';
import {
  GATEWAY_THREAD_ROLE,
  isThreadRequest,
  type GatewayThreadData,
  type OwnerMessage,
  type OwnerState,
  type ThreadMessage,
} from './thread-messages.js';

/** The longest wait before another try at starting a thread in place of one that ended. */
const MAX_RESTART_DELAY_MS = 30_000;

export interface GatewayThreadsOptions {
  count: number;
  /** The script a thread runs: the voxmux entry point, which starts a gateway thread when its workerData says so. */
  entry: string | URL;
  config: Config;
  modelsCreatedS: number;
  /** A descriptor of the listening socket that no loop polls; each thread gets a duplicate. Closed by close() and destroy(). */
  listenFd: number;
  /** The main thread's own address for the calls threads pass on. */
  ownerUrl: string;
  /** How often each thread hears the main thread's state, in milliseconds. @default 250 */
  stateIntervalMs?: number;
  /** How long to wait for a thread's metrics at a scrape, in milliseconds. @default 2000 */
  metricsTimeoutMs?: number;
  /** Wait before replacing a thread that ended, in milliseconds (doubled after each failed start). @default 1000 */
  restartDelayMs?: number;
}

export interface GatewayThreadsDeps {
  /** The main thread's gateway functions: what a thread's requests run through. */
  gateway: GatewayDeps;
  /** The whole metrics text of the server, the threads' included (what a thread's /metrics answers). */
  metricsText(): Promise<string>;
  /** GPU index by instance id. */
  instanceGpus(): Record<string, number>;
  clock: Clock;
  log: Logger;
}

export interface GatewayThreads {
  /** Resolves once every thread listens; rejects when one fails to start. */
  readonly started: Promise<void>;
  /** Each thread's metrics registry as prom-client JSON (threads that do not answer in time are left out). */
  metricsJson(): Promise<unknown[][]>;
  /** Sends the state now (the interval sends it anyway). */
  pushState(): void;
  /** Drains every thread: they answer new calls 503, finish theirs and close their servers. */
  close(): Promise<void>;
  /** Ends every thread now. */
  destroy(): Promise<void>;
}

interface ThreadHandle {
  index: number;
  worker: Worker;
  server: ThreadServer;
  isClosed: boolean;
  onClosed?: () => void;
}

export function startGatewayThreads(options: GatewayThreadsOptions, deps: GatewayThreadsDeps): GatewayThreads {
  const log = deps.log.child({ component: 'gateway-threads' });
  const threads = new Map<number, ThreadHandle>();
  const collects = new Map<number, (metrics: unknown[]) => void>();
  let nextCollectId = 1;
  let isClosing = false;
  let stateTimer: TimerHandle | undefined;

  function post(thread: ThreadHandle, message: OwnerMessage, transfer: ArrayBuffer[] = []): void {
    if (!thread.isClosed) thread.worker.postMessage(message, transfer);
  }

  function onMessage(thread: ThreadHandle, message: ThreadMessage): void {
    if (isThreadRequest(message) || message.type === 'streamTake' || message.type === 'cancel') {
      thread.server.receive(message);
      return;
    }
    switch (message.type) {
      case 'requestLog':
        deps.gateway.requestLog?.write(message.line);
        return;
      case 'metrics':
        collects.get(message.collectId)?.(message.metrics);
        return;
      case 'adopting':
      case 'listening':
        return;
      case 'closed':
        thread.onClosed?.();
        return;
    }
  }

  async function spawn(index: number, isReplacement = false): Promise<void> {
    const fd = await duplicateFd(options.listenFd);
    const data: GatewayThreadData = {
      role: GATEWAY_THREAD_ROLE,
      index,
      config: options.config,
      modelsCreatedS: options.modelsCreatedS,
      fd,
      ownerUrl: options.ownerUrl,
      state: snapshot(),
    };
    const worker = new Worker(options.entry, { workerData: data, argv: [] });
    const thread: ThreadHandle = {
      index,
      worker,
      isClosed: false,
      server: serveThread(
        (message, transfer = []) => {
          if (!thread.isClosed) worker.postMessage(message, transfer);
        },
        { gateway: deps.gateway, metricsText: deps.metricsText, log: log.child({ thread: index }) },
      ),
    };
    threads.set(index, thread);
    let isAdopted = false;
    const start = new Promise<void>((resolve, reject) => {
      const onStartError = (err: unknown) => reject(err instanceof Error ? err : new Error(String(err)));
      const onFirst = (message: ThreadMessage) => {
        if (message.type === 'adopting') isAdopted = true;
        if (message.type !== 'listening') return;
        worker.off('message', onFirst);
        worker.off('error', onStartError);
        resolve();
      };
      worker.on('message', onFirst);
      worker.once('error', onStartError);
      worker.once('exit', (code) => reject(new Error(`gateway thread ${index} exited with code ${code} while starting`)));
    });
    try {
      await start;
    } catch (err) {
      thread.isClosed = true;
      await worker.terminate();
      // A thread that ended before taking its descriptor (messages arrive before 'exit') leaves it open.
      if (!isAdopted)
        await closeFd(fd).catch((closeErr: unknown) =>
          log.warn({ err: closeErr, thread: index, fd }, 'gateway thread: its descriptor could not be closed'),
        );
      throw err;
    }
    if (isReplacement) log.info({ thread: index }, 'gateway thread replaced');
    worker.on('message', (message: ThreadMessage) => onMessage(thread, message));
    worker.on('error', (err) => log.error({ err, thread: index }, 'gateway thread failed'));
    worker.once('exit', (code) => {
      thread.isClosed = true;
      thread.server.cancelAll();
      thread.onClosed?.();
      if (isClosing) return;
      log.error({ thread: index, exitCode: code }, 'gateway thread ended: starting another');
      replace(index, 1);
    });
  }

  /** Starts another thread in place of one that ended; a start that fails is tried again, each wait twice the last (up to 30 s). */
  function replace(index: number, attempt: number): void {
    const delayMs = Math.min(MAX_RESTART_DELAY_MS, (options.restartDelayMs ?? 1000) * 2 ** (attempt - 1));
    deps.clock.setTimeout(() => {
      if (isClosing) return;
      spawn(index, true).catch((err: unknown) => {
        log.error({ err, thread: index, attempt }, 'gateway thread failed to start: trying again');
        replace(index, attempt + 1);
      });
    }, delayMs);
  }

  function snapshot(): OwnerState {
    const g = deps.gateway;
    const models: Record<string, { state: ModelLifecycleState }> = {};
    const catalogs: OwnerState['catalogs'] = {};
    const residency: Record<string, ReturnType<GatewayDeps['voices']['residency']>> = {};
    for (const entry of g.models.list()) {
      const model = g.models.resolve(entry.id);
      if (model === undefined || model !== entry.id) continue;
      models[model] = { state: g.lifecycle?.state(model) ?? 'ready' };
    }
    for (const { model } of g.voices.models()) {
      (catalogs as Record<string, unknown>)[model] = g.voices.catalog(model);
      residency[model] = g.voices.residency(model);
    }
    return {
      readiness: g.readiness(),
      models,
      catalogs,
      residency,
      instanceGpus: deps.instanceGpus(),
      isDraining: g.isDraining?.() === true,
    };
  }

  function pushState(): void {
    if (threads.size === 0) return;
    const state = snapshot();
    for (const thread of threads.values()) post(thread, { type: 'state', state });
  }

  const started = Promise.all(Array.from({ length: options.count }, (_, i) => spawn(i + 1))).then(() => {
    const tick = () => {
      pushState();
      stateTimer = deps.clock.setTimeout(tick, options.stateIntervalMs ?? 250);
    };
    stateTimer = deps.clock.setTimeout(tick, options.stateIntervalMs ?? 250);
    log.info({ threads: options.count }, 'gateway threads listening');
  });
  started.catch(() => undefined);

  async function endAll(how: 'close' | 'destroy'): Promise<void> {
    isClosing = true;
    stateTimer?.cancel();
    const all = [...threads.values()];
    if (how === 'close') {
      pushState();
      await Promise.all(
        all.map(
          (thread) =>
            new Promise<void>((resolve) => {
              if (thread.isClosed) return resolve();
              thread.onClosed = resolve;
              post(thread, { type: 'close' });
            }),
        ),
      );
    }
    await Promise.all(all.map((thread) => thread.worker.terminate()));
    closeSync(options.listenFd);
  }

  return {
    started,
    async metricsJson() {
      const waits = [...threads.values()]
        .filter((thread) => !thread.isClosed)
        .map(
          (thread) =>
            new Promise<unknown[] | undefined>((resolve) => {
              const collectId = nextCollectId++;
              const timer = deps.clock.setTimeout(() => {
                collects.delete(collectId);
                log.warn({ thread: thread.index }, 'gateway thread sent no metrics in time');
                resolve(undefined);
              }, options.metricsTimeoutMs ?? 2000);
              collects.set(collectId, (metrics) => {
                timer.cancel();
                collects.delete(collectId);
                resolve(metrics);
              });
              post(thread, { type: 'collectMetrics', collectId });
            }),
        );
      return (await Promise.all(waits)).filter((m): m is unknown[] => m !== undefined);
    },
    pushState,
    close: () => endAll('close'),
    destroy: () => endAll('destroy'),
  };
}
