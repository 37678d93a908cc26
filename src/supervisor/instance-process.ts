/**
 * One model-host child process: handshake, load, warmup, batches, heartbeats and its end.
 *
 * States and transitions (instance-state.ts):
 *   spawning → handshaking → loading → warming → ready ⇄ draining → closed; any → crashed.
 *
 * A batch is lost with its instance: when the child exits or is declared wedged, every running
 * batch is rejected with instance_crashed or instance_wedged so the scheduler can retry it once.
 */
import type { Clock, TimerHandle } from '../core/clock.js';
import { errors } from '../core/error-catalog.js';
import type { ServiceError } from '../core/errors.js';
import { assertNever } from '../core/invariant.js';
import { TypedEmitter } from '../core/typed-emitter.js';
import { FrameDecoder, PROTOCOL_VERSION } from '../protocol/frame.js';
import {
  decodeHostMessage,
  encodeMessage,
  runBatchMessage,
  type ControllerMessage,
  type HostMessage,
  type ItemResult,
  type ResourceInfo,
} from '../protocol/codec.js';
import type { BatchInput, BatchItemOutcome, WorkKind } from '../protocol/work.js';
import type { Logger } from '../telemetry/logger.js';
import { canTransition, type InstanceState } from './instance-state.js';
import type { InstanceChild, SpawnInstance, SpawnRequest } from './spawn.js';

export const PROTOCOL_VERSION_EXPECTED = PROTOCOL_VERSION;

export interface InstanceTimeouts {
  handshakeTimeoutMs: number;
  loadTimeoutMs: number;
  warmupTimeoutMs: number;
  heartbeatIntervalMs: number;
  heartbeatMissLimit: number;
  batchTimeoutMs: number;
  closeTimeoutMs: number;
}

export interface InstanceProcessOptions extends InstanceTimeouts {
  instanceId: string;
  model: string;
  adapter: string;
  adapterOptions: Record<string, unknown>;
  loadLockPath: string | null;
  spawnRequest: SpawnRequest;
}

export interface InstanceProcessDeps {
  spawn: SpawnInstance;
  clock: Clock;
  log: Logger;
  /** Awaited before WarmupRequest is sent; the returned function is called when warmup ends. */
  beforeWarmup?: () => Promise<() => void>;
}

export interface InstanceFacts {
  pid: number | undefined;
  device: string | undefined;
  parameters: number;
  memoryBytes: number;
  loadMs: number | undefined;
  warmupMs: number | undefined;
  graphsCaptured: number;
  eagerBatches: number;
  graphReplays: number;
  runningBatches: number;
  /** The work kinds the loaded model serves (LoadResult). */
  workKinds: readonly WorkKind[];
  /** Session states the instance holds, streams it runs and resources it keeps (last HeartbeatAck). */
  sessions: number;
  streams: number;
  resources: readonly ResourceInfo[];
}

export interface InstanceEnd {
  reason: 'exited' | 'wedged' | 'failed_to_start' | 'closed';
  exitCode: number | null;
  signal: string | null;
  error: ServiceError | undefined;
}

export type InstanceEvents = {
  stateChanged: { state: InstanceState };
  ended: InstanceEnd;
  batchFinished: { batchSize: number; computeMs: number };
  /** A batch's frame went into the socket: from the write's start until the kernel took its last byte. */
  batchSent: { bytes: number; sendMs: number };
};

interface Waiter {
  expect: HostMessage['type'];
  resolve: (message: HostMessage) => void;
  reject: (error: ServiceError) => void;
  startedMs: number;
  batch?: BatchInput;
}

export class InstanceProcess extends TypedEmitter<InstanceEvents> {
  readonly instanceId: string;
  readonly model: string;
  #options: InstanceProcessOptions;
  #deps: InstanceProcessDeps;
  #state: InstanceState = 'spawning';
  #child: InstanceChild | undefined;
  #decoder = new FrameDecoder();
  #nextCorrelationId = 1;
  #waiters = new Map<number, Waiter>();
  #helloWaiter: { resolve: (m: HostMessage) => void; reject: (e: ServiceError) => void } | undefined;
  #heartbeatTimer: TimerHandle | undefined;
  #heartbeatSeq = 0;
  #lastAckSeq = 0;
  #end: InstanceEnd | undefined;
  /** close() was called: an exit with code 0 is then a close, and the start asks for nothing more. */
  #isCloseRequested = false;
  #facts: InstanceFacts = {
    pid: undefined,
    device: undefined,
    parameters: 0,
    memoryBytes: 0,
    loadMs: undefined,
    warmupMs: undefined,
    graphsCaptured: 0,
    eagerBatches: 0,
    graphReplays: 0,
    runningBatches: 0,
    workKinds: [],
    sessions: 0,
    streams: 0,
    resources: [],
  };

  constructor(options: InstanceProcessOptions, deps: InstanceProcessDeps) {
    super();
    this.instanceId = options.instanceId;
    this.model = options.model;
    this.#options = options;
    this.#deps = { ...deps, log: deps.log.child({ instanceId: options.instanceId, model: options.model }) };
  }

  get state(): InstanceState {
    return this.#state;
  }

  get facts(): Readonly<InstanceFacts> {
    return { ...this.#facts, runningBatches: [...this.#waiters.values()].filter((w) => w.batch).length };
  }

  get end(): InstanceEnd | undefined {
    return this.#end;
  }

  /** Spawns the child and walks it to ready. Rejects (and kills the child) on any failure. */
  async start(): Promise<void> {
    const { log, clock } = this.#deps;
    const startedMs = clock.nowMs();
    try {
      this.#spawn();
      this.#transition('handshaking');
      const hello = await this.#awaitHello();
      if (hello.type !== 'Hello') throw errors.badFrame({ reason: `expected Hello: got ${hello.type}` });
      if (hello.protocolVersion !== PROTOCOL_VERSION_EXPECTED) {
        throw errors.protocolMismatch({ expected: PROTOCOL_VERSION_EXPECTED, got: hello.protocolVersion });
      }
      this.#startHeartbeats();
      this.#transition('loading');
      const loaded = await this.#request(
        {
          type: 'LoadRequest',
          correlationId: 0,
          instanceId: this.instanceId,
          model: this.model,
          adapter: this.#options.adapter,
          options: this.#options.adapterOptions,
          loadLockPath: this.#options.loadLockPath,
        },
        'LoadResult',
        this.#options.loadTimeoutMs,
      );
      if (loaded.type === 'LoadResult') {
        Object.assign(this.#facts, {
          device: loaded.device,
          parameters: loaded.parameters,
          memoryBytes: loaded.memoryBytes,
          loadMs: loaded.loadMs,
          workKinds: loaded.workKinds,
        });
      }
      this.#transition('warming');
      const release = (await this.#deps.beforeWarmup?.()) ?? (() => undefined);
      let warmed: HostMessage;
      try {
        warmed = await this.#request({ type: 'WarmupRequest', correlationId: 0 }, 'WarmupResult', this.#options.warmupTimeoutMs);
      } finally {
        release();
      }
      if (warmed.type === 'WarmupResult') {
        Object.assign(this.#facts, { warmupMs: warmed.warmupMs, graphsCaptured: warmed.graphsCaptured });
      }
      this.#transition('ready');
      log.info({ durationMs: Math.round(clock.nowMs() - startedMs), device: this.#facts.device, pid: this.#facts.pid }, 'instance ready');
    } catch (err) {
      const error = err as ServiceError;
      // A start cut short by close() is not a failure: the close lets the child exit, or kills it.
      if (this.#end === undefined && !this.#isCloseRequested) {
        this.#fail({ reason: 'failed_to_start', exitCode: null, signal: null, error });
      }
      throw this.#end?.error ?? error;
    }
  }

  /**
   * Runs one batch.
   * @throws instance_crashed, instance_wedged (the batch is lost with the instance); wire codes
   *   from an Error frame for a rejected batch.
   */
  async runBatch(batch: BatchInput): Promise<BatchItemOutcome[]> {
    if (this.#state !== 'ready' && this.#state !== 'draining') {
      throw errors.instanceCrashed({ instanceId: this.instanceId, reason: `instance is ${this.#state}` });
    }
    const reply = await this.#request(runBatchMessage(batch), 'BatchResult', undefined, batch);
    if (reply.type !== 'BatchResult') throw errors.badFrame({ reason: `expected BatchResult: got ${reply.type}` });
    this.emit('batchFinished', { batchSize: batch.requests.length, computeMs: reply.computeMs });
    return batch.requests.map((request, i) => this.#toOutcome(request.requestId, reply.results[i]));
  }

  /** Stops taking work, lets running batches finish, then asks the child to exit. */
  async close(): Promise<void> {
    if (this.#end !== undefined) return;
    this.#isCloseRequested = true;
    if (this.#state === 'ready') this.#transition('draining');
    const ended = new Promise<void>((resolve) => this.on('ended', () => resolve()));
    const deadline = this.#deps.clock.setTimeout(() => {
      this.#deps.log.warn({}, 'instance close timed out');
      this.#fail({ reason: 'closed', exitCode: null, signal: 'SIGKILL', error: errors.shuttingDown() });
    }, this.#options.closeTimeoutMs);
    try {
      // The host finishes the batches it holds before it answers Closed (docs/protocol.md).
      if (this.#end === undefined) {
        this.#send({ type: 'Close', correlationId: this.#nextCorrelationId++ });
      }
      await ended;
    } finally {
      deadline.cancel();
    }
  }

  /** Kills the child now; running batches fail with the given error. */
  destroy(error: ServiceError = errors.shuttingDown()): void {
    if (this.#end !== undefined) return;
    this.#finishEnd({ reason: 'closed', exitCode: null, signal: 'SIGKILL', error }, 'closed');
  }

  #spawn(): void {
    const child = this.#deps.spawn(this.#options.spawnRequest);
    this.#child = child;
    this.#facts.pid = child.pid;
    child.up.on('data', (chunk: Buffer) => this.#onData(chunk));
    child.up.on('error', () => undefined);
    child.down.on('error', () => undefined);
    this.#pipeLogs(child.stdout, 'stdout');
    this.#pipeLogs(child.stderr, 'stderr');
    child.onError((err) => {
      this.#fail({
        reason: 'failed_to_start',
        exitCode: null,
        signal: null,
        error: errors.instanceCrashed({ instanceId: this.instanceId, reason: err.message }),
      });
    });
    child.onExit((exitCode, signal) => {
      if (this.#isCloseRequested && exitCode === 0) {
        this.#finishEnd({ reason: 'closed', exitCode, signal, error: undefined }, 'closed');
        return;
      }
      this.#fail({
        reason: 'exited',
        exitCode,
        signal,
        error: errors.instanceCrashed({ instanceId: this.instanceId, reason: `exited with code ${exitCode} signal ${signal}` }),
      });
    });
  }

  #pipeLogs(stream: NodeJS.ReadableStream, source: 'stdout' | 'stderr'): void {
    let pending = '';
    stream.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      let nl: number;
      while ((nl = pending.indexOf('\n')) !== -1) {
        const line = pending.slice(0, nl).trim();
        pending = pending.slice(nl + 1);
        if (line === '') continue;
        this.#relogLine(line, source);
      }
      if (pending.length > 64 * 1024) {
        this.#relogLine(pending, source);
        pending = '';
      }
    });
  }

  #relogLine(line: string, source: string): void {
    const log = this.#deps.log;
    try {
      const parsed = JSON.parse(line) as { level?: string; msg?: string } & Record<string, unknown>;
      if (typeof parsed === 'object' && parsed !== null && typeof parsed.msg === 'string') {
        const { level, msg, ...fields } = parsed;
        const fn =
          level === 'error' ? log.error : level === 'warn' || level === 'warning' ? log.warn : level === 'debug' ? log.debug : log.info;
        fn.call(log, { ...fields, source }, msg);
        return;
      }
    } catch {
      // not JSON: logged as text below
    }
    log.info({ source, line }, 'instance output');
  }

  #onData(chunk: Buffer): void {
    let messages: HostMessage[];
    try {
      messages = this.#decoder.push(chunk).map(decodeHostMessage);
    } catch (err) {
      this.#deps.log.error({ err, code: (err as ServiceError).code }, 'instance sent a bad frame');
      this.#fail({ reason: 'exited', exitCode: null, signal: 'SIGKILL', error: err as ServiceError });
      return;
    }
    for (const message of messages) this.#onMessage(message);
  }

  #onMessage(message: HostMessage): void {
    switch (message.type) {
      case 'Hello': {
        const waiter = this.#helloWaiter;
        this.#helloWaiter = undefined;
        waiter?.resolve(message);
        return;
      }
      case 'HeartbeatAck':
        this.#lastAckSeq = Math.max(this.#lastAckSeq, message.seq);
        this.#facts.memoryBytes = message.memoryBytes || this.#facts.memoryBytes;
        this.#facts.eagerBatches = message.eagerBatches;
        this.#facts.graphReplays = message.graphReplays;
        this.#facts.sessions = message.sessions;
        this.#facts.streams = message.streams;
        this.#facts.resources = message.resources;
        if (message.state === 'wedged') this.#wedge('the instance probe failed');
        else if (message.busyMs > this.#options.batchTimeoutMs) this.#wedge(`a batch ran ${message.busyMs} ms`);
        return;
      case 'LoadResult':
      case 'WarmupResult':
      case 'BatchResult':
      case 'SequenceResult':
      case 'SessionsEnded':
      case 'ResourceLoaded':
      case 'ResourceEvicted':
      case 'Closed':
      case 'Error': {
        const waiter = this.#waiters.get(message.correlationId);
        if (waiter === undefined) {
          if (message.type === 'Error') this.#deps.log.warn({ code: message.code }, message.message);
          return;
        }
        this.#waiters.delete(message.correlationId);
        if (message.type === 'Error') {
          waiter.reject(
            message.code === 'load_failed'
              ? errors.loadFailed({ model: this.model, reason: message.message })
              : errors.fromWire({ code: message.code, message: message.message, instanceId: this.instanceId }),
          );
        } else if (message.type !== waiter.expect) {
          waiter.reject(errors.badFrame({ reason: `expected ${waiter.expect}: got ${message.type}` }));
        } else {
          waiter.resolve(message);
        }
        return;
      }
      case 'StreamChunk':
      case 'StreamEnd':
        // This supervisor starts no streams yet: a stream message answers nothing it sent.
        this.#deps.log.warn({ type: message.type, streamId: message.streamId }, 'instance sent a message for an unknown stream');
        return;
      default:
        assertNever(message, 'host message');
    }
  }

  #toOutcome(requestId: string, result: ItemResult | undefined): BatchItemOutcome {
    if (result === undefined || result.requestId !== requestId) {
      return { requestId, ok: false, error: errors.badFrame({ reason: `no result for request ${requestId}` }) };
    }
    if (result.error !== null) {
      return { requestId, ok: false, error: errors.fromWire({ ...result.error, instanceId: this.instanceId }) };
    }
    if (result.transcript === null) {
      return { requestId, ok: false, error: errors.badFrame({ reason: `no transcript for request ${requestId}` }) };
    }
    return { requestId, ok: true, result: result.transcript };
  }

  #awaitHello(): Promise<HostMessage> {
    return new Promise((resolve, reject) => {
      const timer = this.#deps.clock.setTimeout(() => {
        this.#helloWaiter = undefined;
        reject(errors.instanceCrashed({ instanceId: this.instanceId, reason: `no Hello within ${this.#options.handshakeTimeoutMs} ms` }));
      }, this.#options.handshakeTimeoutMs);
      this.#helloWaiter = {
        resolve: (m) => {
          timer.cancel();
          resolve(m);
        },
        reject: (e) => {
          timer.cancel();
          reject(e);
        },
      };
    });
  }

  #request(
    message: ControllerMessage,
    expect: HostMessage['type'],
    timeoutMs: number | undefined,
    batch?: BatchInput,
  ): Promise<HostMessage> {
    if (this.#end !== undefined) return Promise.reject(this.#end.error ?? errors.shuttingDown());
    // A closing instance finishes its batches; it is not asked to load or warm up any more.
    if (this.#isCloseRequested && batch === undefined) return Promise.reject(errors.shuttingDown());
    const correlationId = this.#nextCorrelationId++;
    return new Promise<HostMessage>((resolve, reject) => {
      let timer: TimerHandle | undefined;
      if (timeoutMs !== undefined) {
        timer = this.#deps.clock.setTimeout(() => {
          if (!this.#waiters.has(correlationId)) return;
          this.#waiters.delete(correlationId);
          reject(errors.instanceCrashed({ instanceId: this.instanceId, reason: `no ${expect} within ${timeoutMs} ms` }));
        }, timeoutMs);
      }
      this.#waiters.set(correlationId, {
        expect,
        startedMs: this.#deps.clock.nowMs(),
        batch,
        resolve: (m) => {
          timer?.cancel();
          resolve(m);
        },
        reject: (e) => {
          timer?.cancel();
          reject(e);
        },
      });
      this.#send({ ...message, correlationId } as ControllerMessage, batch === undefined ? undefined : this.#timeSend());
    });
  }

  /** For a batch's frame: emits batchSent once the socket has taken all of it. */
  #timeSend(): (bytes: number) => (error?: Error | null) => void {
    const startedMs = this.#deps.clock.nowMs();
    return (bytes) => (error?: Error | null) => {
      if (error === undefined || error === null) this.emit('batchSent', { bytes, sendMs: this.#deps.clock.nowMs() - startedMs });
    };
  }

  #send(message: ControllerMessage, onFlushed?: (bytes: number) => (error?: Error | null) => void): void {
    const child = this.#child;
    if (child === undefined || child.down.destroyed || !child.down.writable) return;
    const chunks = encodeMessage(message);
    // Called once the last chunk, and so every one before it, is handed to the kernel.
    const last = onFlushed?.(chunks.reduce((sum, chunk) => sum + chunk.byteLength, 0));
    // Corked, the chunks go out in one gathered write (writev): audio is not copied in JavaScript.
    child.down.cork();
    chunks.forEach((chunk, i) => child.down.write(chunk, i === chunks.length - 1 ? last : undefined));
    child.down.uncork();
  }

  #startHeartbeats(): void {
    const beat = () => {
      if (this.#end !== undefined) return;
      if (this.#heartbeatSeq - this.#lastAckSeq >= this.#options.heartbeatMissLimit) {
        this.#wedge(`${this.#heartbeatSeq - this.#lastAckSeq} heartbeats unanswered`);
        return;
      }
      const now = this.#deps.clock.nowMs();
      for (const w of this.#waiters.values()) {
        if (w.batch !== undefined && now - w.startedMs > this.#options.batchTimeoutMs) {
          this.#wedge(`a batch ran longer than ${this.#options.batchTimeoutMs} ms`);
          return;
        }
      }
      this.#heartbeatSeq += 1;
      this.#send({ type: 'Heartbeat', correlationId: this.#nextCorrelationId++, seq: this.#heartbeatSeq });
      this.#heartbeatTimer = this.#deps.clock.setTimeout(beat, this.#options.heartbeatIntervalMs);
    };
    this.#heartbeatTimer = this.#deps.clock.setTimeout(beat, this.#options.heartbeatIntervalMs);
  }

  #wedge(reason: string): void {
    if (this.#end !== undefined) return;
    this.#deps.log.warn({ reason }, 'instance wedged');
    this.#fail({
      reason: 'wedged',
      exitCode: null,
      signal: 'SIGKILL',
      error: errors.instanceWedged({ instanceId: this.instanceId, reason }),
    });
  }

  #fail(end: InstanceEnd): void {
    this.#finishEnd(end, 'crashed');
  }

  #finishEnd(end: InstanceEnd, state: 'crashed' | 'closed'): void {
    if (this.#end !== undefined) return;
    this.#end = end;
    this.#heartbeatTimer?.cancel();
    this.#child?.kill('SIGKILL');
    const error = end.error ?? errors.shuttingDown();
    const waiters = [...this.#waiters.values()];
    this.#waiters.clear();
    for (const w of waiters) w.reject(error);
    this.#helloWaiter?.reject(error);
    this.#helloWaiter = undefined;
    if (canTransition(this.#state, state)) this.#transition(state);
    this.emit('ended', end);
  }

  #transition(to: InstanceState): void {
    if (!canTransition(this.#state, to)) {
      throw new Error(`Invariant failed: instance transition ${this.#state} → ${to}`);
    }
    this.#state = to;
    this.emit('stateChanged', { state: to });
  }
}
