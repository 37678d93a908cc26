/**
 * One model-host child process: handshake, load, warmup, batches, heartbeats and its end.
 *
 * States and transitions (instance-state.ts):
 *   spawning → handshaking → loading → warming → ready ⇄ draining → closed; any → crashed.
 *
 * A batch is lost with its instance: when the child exits or is declared wedged, every running
 * batch (and sequence batch) is rejected with instance_crashed or instance_wedged so the scheduler
 * can retry it once, and every open stream's sink ends with that error.
 *
 * Streams: chunks reach the sink in index order (a gap ends the stream with bad_frame and cancels
 * it at the host); the sink ends exactly once, with the host's StreamEnd, or with the instance's
 * error when it dies. A cancelled stream delivers no more chunks and stays open here until the host
 * confirms with its StreamEnd, so the instance's count of streams stays true. A stream may wait
 * for credit as long as its reader likes: it is not timed by batchTimeoutMs here; the host's own
 * busyMs (HeartbeatAck, busy while it runs a stream step) is what declares it wedged.
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
  runSequenceBatchMessage,
  splitStates,
  type ControllerMessage,
  type HostMessage,
  type ItemResult,
  type MessageOf,
  type ResourceCounters,
  type EngineCounter,
  type ResourceInfo,
  type SequenceItemResult,
} from '../protocol/codec.js';
import type { JsonObject } from '../protocol/message-table.js';
import type {
  BatchInput,
  BatchItemOutcome,
  CatalogEntry,
  SequenceBatchInput,
  SequenceItemOutcome,
  StreamControl,
  StreamEnd,
  StreamInput,
  StreamSink,
  WorkKind,
} from '../protocol/work.js';
import type { Logger } from '../telemetry/logger.js';
import { toBootLogFields, toInstanceBoot, type InstanceBoot } from './boot-report.js';
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
  /** Batches and sequence batches sent and not yet answered. */
  runningBatches: number;
  /** Streams started here and not yet ended by the host (cancelled ones included). */
  runningStreams: number;
  /** The work kinds the loaded model serves (LoadResult). */
  workKinds: readonly WorkKind[];
  /** What the loaded adapter can serve, its voices (LoadResult); empty when it declares none. */
  catalog: readonly CatalogEntry[];
  /** The adapter's cumulative residency counters (last HeartbeatAck); undefined when it keeps none. */
  resourceCounters: ResourceCounters | undefined;
  /** The engine's own cumulative counts by name (last HeartbeatAck; names that are not ENGINE_COUNTER_NAME left out). */
  engineCounters: Readonly<Record<string, number>>;
  /** Session states the instance holds and streams it runs (last HeartbeatAck). */
  sessions: number;
  streams: number;
  /** Resources the instance keeps: its last HeartbeatAck, updated by ResourceLoaded and ResourceEvicted since. */
  resources: readonly ResourceInfo[];
  /** Its boot broken down, once it is ready (boot-report.ts). */
  boot: InstanceBoot | undefined;
}

/** What the host said about a resource it loaded (ResourceLoaded). */
export type ResourceLoad = Omit<MessageOf<'ResourceLoaded'>, 'type' | 'correlationId'>;

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
  sequenceBatchFinished: { batchSize: number; computeMs: number };
  /** A stream's sink ended: `outcome` is 'ok' or the error code. */
  streamEnded: { outcome: string; chunks: number };
  /** The instance's resources changed (a heartbeat, a load or an eviction). */
  resourcesChanged: { resources: readonly ResourceInfo[] };
  /** A heartbeat carried the adapter's resource counters (cumulative since the instance started). */
  resourceCountersReported: { counters: ResourceCounters };
  /** A heartbeat carried the engine's own counts (cumulative since the instance started), valid names only. */
  engineCountersReported: { counters: Readonly<Record<string, number>> };
  /** A heartbeat updated the facts it reports (memory, eager batches, graph replays, sessions, streams). */
  factsReported: Record<string, never>;
};

interface Waiter {
  expect: HostMessage['type'];
  resolve: (message: HostMessage) => void;
  reject: (error: ServiceError) => void;
  startedMs: number;
  /** Batch work (a batch or a sequence batch): counted as running, timed by batchTimeoutMs, and let finish by a close. */
  isWork: boolean;
}

interface OpenStream {
  streamId: string;
  requestId: string;
  correlationId: number;
  sink: StreamSink;
  nextIndex: number;
  /** cancel() was called: no more chunks reach the sink. */
  isCancelled: boolean;
  /** The sink has ended (its end was called). */
  isSinkEnded: boolean;
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
  /** Open streams by streamId, until the host ends them (or the instance ends). */
  #streams = new Map<string, OpenStream>();
  #helloWaiter: { resolve: (m: HostMessage) => void; reject: (e: ServiceError) => void } | undefined;
  #heartbeatTimer: TimerHandle | undefined;
  #heartbeatSeq = 0;
  #lastAckSeq = 0;
  /** When the host last answered a batch (or sequence batch): the next one in line runs from then. */
  #lastWorkAnsweredMs = 0;
  /** Beats sent before ready are not counted as missed: loading and warming are bounded by their own timeouts. */
  #firstCountedSeq = Number.POSITIVE_INFINITY;
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
    runningStreams: 0,
    workKinds: [],
    catalog: [],
    resourceCounters: undefined,
    engineCounters: {},
    sessions: 0,
    streams: 0,
    resources: [],
    boot: undefined,
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
    return {
      ...this.#facts,
      runningBatches: [...this.#waiters.values()].filter((w) => w.isWork).length,
      runningStreams: this.#streams.size,
    };
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
      const helloMs = clock.nowMs();
      if (hello.type !== 'Hello') throw errors.badFrame({ reason: `expected Hello: got ${hello.type}` });
      if (hello.protocolVersion !== PROTOCOL_VERSION_EXPECTED) {
        throw errors.protocolMismatch({ expected: PROTOCOL_VERSION_EXPECTED, got: hello.protocolVersion });
      }
      this.#startHeartbeats();
      this.#transition('loading');
      const loadSentMs = clock.nowMs();
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
      const loadedMs = clock.nowMs();
      if (loaded.type === 'LoadResult') {
        Object.assign(this.#facts, {
          device: loaded.device,
          parameters: loaded.parameters,
          memoryBytes: loaded.memoryBytes,
          loadMs: loaded.loadMs,
          workKinds: loaded.workKinds,
          catalog: loaded.catalog,
        });
      }
      this.#transition('warming');
      const release = (await this.#deps.beforeWarmup?.()) ?? (() => undefined);
      const warmupSentMs = clock.nowMs();
      let warmed: HostMessage;
      try {
        warmed = await this.#request({ type: 'WarmupRequest', correlationId: 0 }, 'WarmupResult', this.#options.warmupTimeoutMs);
      } finally {
        release();
      }
      // A close that came during the warmup cuts the start short: the closing instance is never ready.
      if (this.#isCloseRequested) throw errors.shuttingDown();
      const warmedMs = clock.nowMs();
      if (warmed.type === 'WarmupResult') {
        Object.assign(this.#facts, { warmupMs: warmed.warmupMs, graphsCaptured: warmed.graphsCaptured });
      }
      const stages = [...(loaded.type === 'LoadResult' ? loaded.stages : []), ...(warmed.type === 'WarmupResult' ? warmed.stages : [])];
      const boot = toInstanceBoot({ spawnedMs: startedMs, helloMs, loadSentMs, loadedMs, warmupSentMs, warmedMs }, stages);
      this.#facts.boot = boot;
      this.#firstCountedSeq = this.#heartbeatSeq;
      this.#transition('ready');
      log.info({ ...toBootLogFields(boot), device: this.#facts.device, pid: this.#facts.pid }, 'instance ready');
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
    const reply = await this.#request(runBatchMessage(batch), 'BatchResult', undefined, true);
    if (reply.type !== 'BatchResult') throw errors.badFrame({ reason: `expected BatchResult: got ${reply.type}` });
    this.emit('batchFinished', { batchSize: batch.requests.length, computeMs: reply.computeMs });
    return batch.requests.map((request, i) => this.#toOutcome(request.requestId, reply.results[i]));
  }

  /**
   * Runs one batch of sequence items (at most one per session). Each item's PCM and attached state
   * go into the frame uncopied; each successful outcome's state is a view of the reply's body.
   * @throws instance_crashed, instance_wedged (the batch is lost with the instance); wire codes
   *   from an Error frame for a rejected batch.
   */
  async runSequenceBatch(batch: SequenceBatchInput): Promise<SequenceItemOutcome[]> {
    if (this.#state !== 'ready' && this.#state !== 'draining') {
      throw errors.instanceCrashed({ instanceId: this.instanceId, reason: `instance is ${this.#state}` });
    }
    const reply = await this.#request(runSequenceBatchMessage(batch), 'SequenceResult', undefined, true);
    if (reply.type !== 'SequenceResult') throw errors.badFrame({ reason: `expected SequenceResult: got ${reply.type}` });
    this.emit('sequenceBatchFinished', { batchSize: batch.items.length, computeMs: reply.computeMs });
    const states = splitStates(reply);
    return batch.items.map((item, i) => this.#toSequenceOutcome(item.requestId, reply.results[i], states[i]));
  }

  /**
   * Tells the host it may drop these sessions' states. Best effort: its SessionsEnded only settles,
   * it is not batch work (not counted, not timed as a batch), and a closing instance is not asked.
   */
  endSessions(sessionIds: readonly string[]): void {
    if (sessionIds.length === 0 || (this.#state !== 'ready' && this.#state !== 'draining')) return;
    this.#request(
      { type: 'EndSessions', correlationId: 0, sessionIds: [...sessionIds] },
      'SessionsEnded',
      this.#options.batchTimeoutMs,
    ).catch((err: ServiceError) => this.#deps.log.debug({ code: err.code, sessions: sessionIds.length }, 'sessions not ended'));
  }

  /**
   * Starts one stream. Chunks reach `sink` in order; `sink.end` is called exactly once: with the
   * host's StreamEnd, with stream_cancelled after cancel(), or with instance_crashed or
   * instance_wedged when the instance dies first (at once when it is not ready).
   */
  openStream(input: StreamInput, sink: StreamSink): StreamControl {
    const stream: OpenStream = {
      streamId: input.streamId,
      requestId: input.requestId,
      correlationId: this.#nextCorrelationId++,
      sink,
      nextIndex: 0,
      isCancelled: false,
      isSinkEnded: false,
    };
    const isOpen = this.#state === 'ready' || this.#state === 'draining';
    if (!isOpen || this.#end !== undefined || this.#streams.has(input.streamId)) {
      const reason = this.#streams.has(input.streamId) ? `stream ${input.streamId} is already open` : `instance is ${this.#state}`;
      this.#endSink(stream, { ok: false, error: this.#end?.error ?? errors.instanceCrashed({ instanceId: this.instanceId, reason }) });
      return { grant: () => undefined, cancel: () => undefined };
    }
    this.#streams.set(stream.streamId, stream);
    this.#send({
      type: 'StartStream',
      correlationId: stream.correlationId,
      streamId: input.streamId,
      requestId: input.requestId,
      resource: input.resource,
      params: { ...input.params },
      creditChunks: input.creditChunks,
      body: input.body,
    });
    return {
      grant: (chunks) => {
        if (chunks <= 0 || stream.isCancelled || this.#streams.get(stream.streamId) !== stream) return;
        this.#send({ type: 'StreamCredit', correlationId: stream.correlationId, streamId: stream.streamId, chunks });
      },
      cancel: () => this.#cancelStream(stream),
    };
  }

  /**
   * Asks the host to load a named resource (or confirm it is resident).
   * @throws instance_crashed, instance_wedged, and wire codes from an Error frame
   */
  async loadResource(name: string, kind: string, source: JsonObject): Promise<ResourceLoad> {
    if (this.#state !== 'ready' && this.#state !== 'draining') {
      throw errors.instanceCrashed({ instanceId: this.instanceId, reason: `instance is ${this.#state}` });
    }
    const reply = await this.#request(
      { type: 'LoadResource', correlationId: 0, name, kind, source },
      'ResourceLoaded',
      this.#options.loadTimeoutMs,
    );
    if (reply.type !== 'ResourceLoaded') throw errors.badFrame({ reason: `expected ResourceLoaded: got ${reply.type}` });
    const loaded: ResourceLoad = {
      name: reply.name,
      kind: reply.kind,
      residency: reply.residency,
      bytes: reply.bytes,
      loadMs: reply.loadMs,
      source: reply.source,
    };
    this.#setResources([
      ...this.#facts.resources.filter((r) => r.name !== name),
      { name: loaded.name, kind: loaded.kind, residency: loaded.residency, bytes: loaded.bytes },
    ]);
    return loaded;
  }

  /**
   * Asks the host to free a named resource; resolves with the bytes it freed.
   * @throws instance_crashed, instance_wedged, and wire codes from an Error frame
   */
  async evictResource(name: string): Promise<{ name: string; bytes: number }> {
    if (this.#state !== 'ready' && this.#state !== 'draining') {
      throw errors.instanceCrashed({ instanceId: this.instanceId, reason: `instance is ${this.#state}` });
    }
    const reply = await this.#request({ type: 'EvictResource', correlationId: 0, name }, 'ResourceEvicted', this.#options.loadTimeoutMs);
    if (reply.type !== 'ResourceEvicted') throw errors.badFrame({ reason: `expected ResourceEvicted: got ${reply.type}` });
    this.#setResources(this.#facts.resources.filter((r) => r.name !== name));
    return { name: reply.name, bytes: reply.bytes };
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
    let messages: HostMessage<Uint8Array>[];
    try {
      messages = this.#decoder.push(chunk).map(decodeHostMessage);
    } catch (err) {
      this.#deps.log.error({ err, code: (err as ServiceError).code }, 'instance sent a bad frame');
      this.#fail({ reason: 'exited', exitCode: null, signal: 'SIGKILL', error: err as ServiceError });
      return;
    }
    for (const message of messages) this.#onMessage(message);
  }

  #onMessage(message: HostMessage<Uint8Array>): void {
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
        this.#setResources(message.resources);
        if (message.resourceCounters !== null) {
          this.#facts.resourceCounters = message.resourceCounters;
          this.emit('resourceCountersReported', { counters: message.resourceCounters });
        }
        if (message.engineCounters.length > 0) {
          this.#facts.engineCounters = engineCountersOf(message.engineCounters);
          this.emit('engineCountersReported', { counters: this.#facts.engineCounters });
        }
        this.emit('factsReported', {});
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
          if (message.type === 'Error') this.#onStreamError(message);
          return;
        }
        this.#waiters.delete(message.correlationId);
        if (waiter.isWork) this.#lastWorkAnsweredMs = this.#deps.clock.nowMs();
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
        this.#onStreamChunk(message);
        return;
      case 'StreamEnd':
        this.#onStreamEnd(message);
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

  #toSequenceOutcome(requestId: string, result: SequenceItemResult | undefined, state: Uint8Array | undefined): SequenceItemOutcome {
    if (result === undefined || result.requestId !== requestId) {
      return { requestId, ok: false, error: errors.badFrame({ reason: `no result for sequence item ${requestId}` }) };
    }
    if (result.error !== null) {
      return { requestId, ok: false, error: errors.fromWire({ ...result.error, instanceId: this.instanceId }) };
    }
    if (result.output === null || state === undefined) {
      return { requestId, ok: false, error: errors.badFrame({ reason: `no output for sequence item ${requestId}` }) };
    }
    return { requestId, ok: true, output: result.output, state };
  }

  #streamOf(message: { streamId: string; correlationId: number; type: string }): OpenStream | undefined {
    const stream = this.#streams.get(message.streamId);
    if (stream === undefined || stream.correlationId !== message.correlationId) {
      this.#deps.log.warn({ type: message.type, streamId: message.streamId }, 'instance sent a message for an unknown stream');
      return undefined;
    }
    return stream;
  }

  #onStreamChunk(message: MessageOf<'StreamChunk', Uint8Array>): void {
    const stream = this.#streamOf(message);
    if (stream === undefined || stream.isSinkEnded) return;
    if (message.index !== stream.nextIndex) {
      // The host broke the stream's order: the reader cannot be given a hole, so the stream ends here.
      this.#deps.log.error({ streamId: stream.streamId, index: message.index, expected: stream.nextIndex }, 'stream chunk out of order');
      this.#endSink(stream, {
        ok: false,
        error: errors.badFrame({ reason: `stream chunk ${message.index}: expected ${stream.nextIndex}` }),
      });
      this.#cancelStream(stream);
      return;
    }
    stream.nextIndex += 1;
    if (stream.isCancelled) return;
    stream.sink.chunk({ index: message.index, meta: message.meta, bytes: message.body });
  }

  /**
   * An Error answering no request: the host refused a StartStream (its adapter serves no streams,
   * or the stream id is taken). That stream ends with the error; any other is only logged.
   */
  #onStreamError(message: MessageOf<'Error'>): void {
    const stream = [...this.#streams.values()].find((s) => s.correlationId === message.correlationId);
    if (stream === undefined) {
      this.#deps.log.warn({ code: message.code }, message.message);
      return;
    }
    this.#streams.delete(stream.streamId);
    this.#endSink(stream, {
      ok: false,
      error: errors.fromWire({ code: message.code, message: message.message, instanceId: this.instanceId }),
    });
  }

  #onStreamEnd(message: MessageOf<'StreamEnd'>): void {
    const stream = this.#streamOf(message);
    if (stream === undefined) return;
    this.#streams.delete(stream.streamId);
    if (message.error !== null) {
      this.#endSink(stream, {
        ok: false,
        error:
          message.error.code === 'stream_cancelled'
            ? errors.streamCancelled({ requestId: stream.requestId })
            : errors.fromWire({ ...message.error, instanceId: this.instanceId }),
      });
    } else if (stream.isCancelled) {
      // It finished before the cancel reached the host: the consumer asked to stop, so it stays cancelled.
      this.#endSink(stream, { ok: false, error: errors.streamCancelled({ requestId: stream.requestId }) });
    } else {
      this.#endSink(stream, { ok: true, chunks: message.chunks, usage: message.usage ?? {} });
    }
  }

  #cancelStream(stream: OpenStream): void {
    if (stream.isCancelled) return;
    stream.isCancelled = true;
    if (this.#streams.get(stream.streamId) !== stream) return; // already ended by the host
    if (this.#end !== undefined) {
      this.#streams.delete(stream.streamId);
      this.#endSink(stream, { ok: false, error: errors.streamCancelled({ requestId: stream.requestId }) });
      return;
    }
    this.#send({ type: 'CancelStream', correlationId: stream.correlationId, streamId: stream.streamId });
  }

  #endSink(stream: OpenStream, end: StreamEnd): void {
    if (stream.isSinkEnded) return;
    stream.isSinkEnded = true;
    this.emit('streamEnded', { outcome: end.ok ? 'ok' : end.error.code, chunks: stream.nextIndex });
    stream.sink.end(end);
  }

  #setResources(resources: readonly ResourceInfo[]): void {
    const before = this.#facts.resources;
    this.#facts.resources = resources;
    const key = (list: readonly ResourceInfo[]) =>
      list
        .map((r) => `${r.name}\u0000${r.kind}\u0000${r.residency}\u0000${r.bytes}`)
        .sort()
        .join('\u0001');
    if (key(before) !== key(resources)) this.emit('resourcesChanged', { resources });
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

  #request(message: ControllerMessage, expect: HostMessage['type'], timeoutMs: number | undefined, isWork = false): Promise<HostMessage> {
    if (this.#end !== undefined) return Promise.reject(this.#end.error ?? errors.shuttingDown());
    // A closing instance finishes its batches; it is not asked to load or warm up any more.
    if (this.#isCloseRequested && !isWork) return Promise.reject(errors.shuttingDown());
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
        isWork,
        resolve: (m) => {
          timer?.cancel();
          resolve(m);
        },
        reject: (e) => {
          timer?.cancel();
          reject(e);
        },
      });
      this.#send({ ...message, correlationId } as ControllerMessage, isWork ? this.#timeSend() : undefined);
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
      // A host busy loading (a long import, weights read under its interpreter lock) answers late;
      // loadTimeoutMs and warmupTimeoutMs bound that phase, so only beats sent since ready count.
      const missed = this.#heartbeatSeq - Math.max(this.#lastAckSeq, this.#firstCountedSeq);
      if (missed >= this.#options.heartbeatMissLimit) {
        this.#wedge(`${missed} heartbeats unanswered`);
        return;
      }
      // The host runs its batches in turn: the oldest unanswered one runs from when it was sent or
      // the one before it was answered, whichever is later; those behind it wait, they do not run.
      const now = this.#deps.clock.nowMs();
      const oldest = [...this.#waiters.values()].find((w) => w.isWork);
      if (oldest !== undefined && now - Math.max(oldest.startedMs, this.#lastWorkAnsweredMs) > this.#options.batchTimeoutMs) {
        this.#wedge(`a batch ran longer than ${this.#options.batchTimeoutMs} ms`);
        return;
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
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    for (const stream of streams) {
      this.#endSink(stream, { ok: false, error: stream.isCancelled ? errors.streamCancelled({ requestId: stream.requestId }) : error });
    }
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

/** An engine counter's name: a camelCase word (each becomes a metric label value, so the set stays bounded). */
export const ENGINE_COUNTER_NAME = /^[a-z][A-Za-z0-9]{0,63}$/;
/** At most this many engine counters are kept from one heartbeat. */
export const MAX_ENGINE_COUNTERS = 32;

function engineCountersOf(counters: readonly EngineCounter[]): Record<string, number> {
  const kept = counters.filter((c) => ENGINE_COUNTER_NAME.test(c.name) && Number.isFinite(c.value)).slice(0, MAX_ENGINE_COUNTERS);
  return Object.fromEntries(kept.map((c) => [c.name, c.value]));
}
