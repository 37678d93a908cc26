/**
 * A model-host child without a process: it satisfies the supervisor's SpawnInstance port
 * (src/supervisor/spawn.ts) over in-memory streams. A test reads the frames the supervisor writes
 * down, decoded into messages, and scripts the host's answers, its exit and its silence.
 *
 * NOTE: every byte of the wire format this fake reads or writes is encoded and decoded in this
 * file only, behind `expect`, `reply`, `send`, `hello` and `sendBadFrame`. Tests speak in the
 * neutral shapes below (`HostReply`, `ScriptedItem`), so a new protocol version changes this file
 * and not the tests.
 *
 * Ordering, as with a real child: answers a test sends go into the `up` stream at once; answers the
 * child gives by itself (heartbeats, `shouldStartByItself`, `shouldCloseByItself`) and its exit and errors
 * arrive on a later tick, never inside the supervisor's own write. Call `settle()` after each step.
 */
import assert from 'node:assert/strict';
import { Readable, Writable } from 'node:stream';
import {
  decodeControllerMessage,
  encodeMessageBuffer,
  splitPcm16Body,
  splitSequenceBody,
  type BatchItem,
  type BootStage,
  type ControllerMessage,
  type EngineCounter,
  type HostMessage,
  type MessageOf,
  type ResourceCounters,
  type ResourceInfo,
  type SequenceItem,
} from '../../src/protocol/codec.js';
import { encodeFrame, FRAME_MAGIC, FrameDecoder, MessageTag, PROTOCOL_VERSION } from '../../src/protocol/frame.js';
import type { WireErrorCode } from '../../src/core/error-catalog.js';
import type { CatalogEntry, TranscriptResult, WorkKind } from '../../src/protocol/work.js';
import type { InstanceChild, SpawnInstance, SpawnRequest } from '../../src/supervisor/spawn.js';
import { settle } from './fake-clock.js';

/** A RunBatch as the child read it: each request with its audio (copied out of the frame). */
export type DownRunBatch = Omit<MessageOf<'RunBatch', Uint8Array>, 'requests' | 'body'> & {
  requests: (BatchItem & { audio: Int16Array })[];
};
/** A RunSequenceBatch as the child read it: each item with its audio and attached state (copied). */
export type DownRunSequenceBatch = Omit<MessageOf<'RunSequenceBatch', Uint8Array>, 'items' | 'body'> & {
  items: (SequenceItem & { audio: Int16Array; state: Uint8Array })[];
};
/** A frame the supervisor wrote, decoded. */
export type DownMessage =
  Exclude<ControllerMessage<Uint8Array>, { type: 'RunBatch' | 'RunSequenceBatch' }> | DownRunBatch | DownRunSequenceBatch;
export type DownType = DownMessage['type'];
export type DownMessageOf<K extends DownType> = Extract<DownMessage, { type: K }>;

/** One request's answer inside a batch result: a transcript (defaults filled in) or an error. */
export type ScriptedItem =
  { requestId?: string; transcript?: Partial<TranscriptResult> } | { requestId?: string; error: { code: WireErrorCode; message?: string } };

/** One item's answer inside a sequence result: an output and new state (defaults filled in) or an error. */
export type ScriptedSequenceItem =
  { output?: Record<string, unknown>; state?: Uint8Array } | { error: { code: WireErrorCode; message?: string } };

export interface HeartbeatFields {
  state: 'idle' | 'busy' | 'wedged';
  busyMs: number;
  queuedBatches: number;
  memoryBytes: number;
  eagerBatches: number;
  graphReplays: number;
  sessions: number;
  streams: number;
  resources: ResourceInfo[];
  resourceCounters: ResourceCounters | null;
  engineCounters: EngineCounter[];
}

/** What the host can send up, in a shape that does not depend on the wire version. */
export type HostReply =
  | {
      type: 'LoadResult';
      device?: string;
      parameters?: number;
      memoryBytes?: number;
      loadMs?: number;
      workKinds?: WorkKind[];
      catalog?: CatalogEntry[];
      stages?: BootStage[];
    }
  | { type: 'WarmupResult'; warmupMs?: number; graphsCaptured?: number; stages?: BootStage[] }
  /** Without `items`, every request of the RunBatch answered succeeds. */
  | { type: 'BatchResult'; items?: readonly ScriptedItem[]; computeMs?: number }
  /** Without `items`, every item of the RunSequenceBatch answered succeeds with output {} and state 'state of <sessionId>'. */
  | { type: 'SequenceResult'; items?: readonly ScriptedSequenceItem[]; computeMs?: number }
  /** Without `sessionIds`, those of the EndSessions answered. */
  | { type: 'SessionsEnded'; sessionIds?: string[] }
  /** A chunk of the stream that the StartStream answered started; `index` defaults to the stream's next one. */
  | { type: 'StreamChunk'; index?: number; meta?: Record<string, unknown>; bytes?: Uint8Array }
  /** The stream's end: `usage` (default {}) or `error`; `chunks` defaults to the chunks sent. */
  | { type: 'StreamEnd'; chunks?: number; usage?: Record<string, unknown>; error?: { code: WireErrorCode; message?: string } }
  | { type: 'ResourceLoaded'; residency?: 'device' | 'host'; bytes?: number; loadMs?: number; source?: 'disk' | 'host' | 'resident' }
  | { type: 'ResourceEvicted'; bytes?: number }
  | ({ type: 'HeartbeatAck'; seq?: number } & Partial<HeartbeatFields>)
  | { type: 'Error'; code: WireErrorCode; message?: string; requestId?: string | null }
  | { type: 'Closed' };

export interface ScriptedChildOptions {
  /** @default 4242 */
  pid?: number;
  /** Answers every Heartbeat with a HeartbeatAck built from `heartbeat`. @default true */
  shouldAnswerHeartbeats?: boolean;
  /** Says Hello at once and answers LoadRequest and WarmupRequest: the child walks to ready by itself. @default false */
  shouldStartByItself?: boolean;
  /** Answers Close with Closed, then exits with code 0. @default false */
  shouldCloseByItself?: boolean;
  /** The catalogue of the LoadResult it answers by itself. @default [] */
  catalog?: CatalogEntry[];
}

type ExitListener = (exitCode: number | null, signal: NodeJS.Signals | null) => void;

const IDLE_HEARTBEAT: HeartbeatFields = {
  state: 'idle',
  busyMs: 0,
  queuedBatches: 0,
  memoryBytes: 0,
  eagerBatches: 0,
  graphReplays: 0,
  sessions: 0,
  streams: 0,
  resources: [],
  resourceCounters: null,
  engineCounters: [],
};

export class ScriptedChild implements InstanceChild {
  readonly pid: number | undefined;
  readonly down: Writable;
  readonly up: Readable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Signals delivered by kill(), in order; as in spawn.ts, one sent after the exit is dropped. */
  readonly kills: NodeJS.Signals[] = [];
  /** The fields of the HeartbeatAcks this child sends by itself; change them to script a probe. */
  heartbeat: HeartbeatFields = { ...IDLE_HEARTBEAT };

  #options: Required<ScriptedChildOptions>;
  #decoder = new FrameDecoder();
  #received: DownMessage[] = [];
  /** Received messages not yet taken by expect() nor answered by the child itself. */
  #inbox: DownMessage[] = [];
  #exitListeners: ExitListener[] = [];
  #errorListeners: ((err: Error) => void)[] = [];
  #exit: { exitCode: number | null; signal: NodeJS.Signals | null } | undefined;
  #isSilent = false;
  /** Output written since holdOutputUntilExit(), read after the exit is reported. */
  #heldOutput: Buffer[] | undefined;
  /** Chunks sent per stream, by streamId. */
  #streamChunks = new Map<string, number>();

  constructor(options: ScriptedChildOptions = {}) {
    this.#options = {
      pid: 4242,
      shouldAnswerHeartbeats: true,
      shouldStartByItself: false,
      shouldCloseByItself: false,
      catalog: [],
      ...options,
    };
    this.pid = this.#options.pid;
    this.down = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        this.#onDown(chunk);
        done();
      },
    });
    this.up = new Readable({ read: () => undefined });
    this.stdout = new Readable({ read: () => undefined });
    this.stderr = new Readable({ read: () => undefined });
    if (this.#options.shouldStartByItself) this.#later(() => this.hello());
  }

  // -- the InstanceChild port ---------------------------------------------------------------------

  kill(signal: NodeJS.Signals): void {
    if (this.#exit !== undefined) return;
    this.kills.push(signal);
    this.exit(null, signal);
  }

  onExit(listener: ExitListener): void {
    this.#exitListeners.push(listener);
  }

  onError(listener: (err: Error) => void): void {
    this.#errorListeners.push(listener);
  }

  // -- what the supervisor sent -------------------------------------------------------------------

  /** Every message written down so far, in order (heartbeats included), optionally of one type. */
  received<K extends DownType>(type?: K): DownMessageOf<K>[] {
    return this.#received.filter((m): m is DownMessageOf<K> => type === undefined || m.type === type);
  }

  /**
   * Takes the oldest message that nobody has taken or answered yet, and asserts its type.
   * Heartbeats are skipped unless `type` is 'Heartbeat' (then the oldest heartbeat is taken).
   */
  expect<K extends DownType>(type: K): DownMessageOf<K> {
    const index = this.#inbox.findIndex((m) => (type === 'Heartbeat') === (m.type === 'Heartbeat'));
    const message = this.#inbox[index];
    assert.ok(message !== undefined, `expected the supervisor to have sent ${type}; nothing is waiting`);
    assert.equal(message.type, type, `expected the supervisor to have sent ${type}`);
    this.#inbox.splice(index, 1);
    return message as DownMessageOf<K>;
  }

  /** Asserts that nothing but heartbeats waits to be taken. */
  expectNothing(): void {
    assert.deepEqual(
      this.#inbox.filter((m) => m.type !== 'Heartbeat').map((m) => m.type),
      [],
      'expected no message from the supervisor',
    );
  }

  get hasExited(): boolean {
    return this.#exit !== undefined;
  }

  // -- scripting the host -------------------------------------------------------------------------

  /** Sends Hello, as a host does on start; `protocolVersion` defaults to the supervisor's own. */
  hello(overrides: { protocolVersion?: number } = {}): void {
    this.#sendUp({
      type: 'Hello',
      correlationId: 0,
      protocolVersion: overrides.protocolVersion ?? PROTOCOL_VERSION,
      hostVersion: 'scripted',
      pid: this.#options.pid ?? 0,
      adapters: ['test'],
    });
  }

  /** Answers a message the supervisor sent (same correlation). */
  reply(to: DownMessage, answer: HostReply): void {
    this.#sendUp(this.#encode(answer, to));
  }

  /** Sends a message that answers nothing (correlation 0), such as an Error about no request. */
  send(answer: HostReply): void {
    this.#sendUp(this.#encode(answer, undefined));
  }

  /** Writes a frame whose header is not the protocol's (a wrong magic). */
  sendBadFrame(): void {
    const bytes = encodeFrame({ type: MessageTag.Closed, correlationId: 0, meta: {}, body: new Uint8Array() });
    bytes.writeUInt32LE((FRAME_MAGIC ^ 0xffffffff) >>> 0, 0);
    this.#pushUp(bytes);
  }

  /** Writes a frame with a valid header whose meta does not match its type (a BatchResult of nothing). */
  sendMalformedMessage(): void {
    this.#pushUp(encodeFrame({ type: MessageTag.BatchResult, correlationId: 0, meta: { unexpected: true }, body: new Uint8Array() }));
  }

  /** Hello, then answers LoadRequest and WarmupRequest with defaults, settling in between. */
  async walkToReady(): Promise<void> {
    this.hello();
    await settle();
    this.reply(this.expect('LoadRequest'), { type: 'LoadResult' });
    await settle();
    this.reply(this.expect('WarmupRequest'), { type: 'WarmupResult' });
    await settle();
  }

  /** Stops answering anything by itself (heartbeats included), as a hung host does. */
  goSilent(): void {
    this.#isSilent = true;
  }

  /**
   * What the child writes from now on is read only after its exit is reported: Node's 'exit' event
   * may come while the child's pipes still hold its last output.
   */
  holdOutputUntilExit(): void {
    this.#heldOutput = [];
  }

  /** The process ends: its channels close and the exit is reported on a later tick. */
  exit(exitCode: number | null, signal: NodeJS.Signals | null = null): void {
    if (this.#exit !== undefined) return;
    this.#exit = { exitCode, signal };
    const held = this.#heldOutput;
    if (held !== undefined) {
      this.#heldOutput = undefined;
      this.down.destroy();
      process.nextTick(() => {
        for (const listener of this.#exitListeners) listener(exitCode, signal);
        for (const bytes of held) this.up.push(bytes);
        this.up.push(null);
      });
      return;
    }
    // Its channels close at once: what it wrote before is still read, what is written to it is lost.
    this.up.push(null);
    this.down.destroy();
    process.nextTick(() => {
      for (const listener of this.#exitListeners) listener(exitCode, signal);
    });
  }

  /** The process could not be started or signalled (ENOENT, EACCES), reported on a later tick. */
  fail(error: Error): void {
    process.nextTick(() => {
      for (const listener of this.#errorListeners) listener(error);
    });
  }

  /** Writes a line to the child's stdout or stderr. */
  print(line: string, stream: 'stdout' | 'stderr' = 'stderr'): void {
    this[stream].push(`${line}\n`);
  }

  // -- wire format (v4) ---------------------------------------------------------------------------

  #onDown(chunk: Buffer): void {
    for (const frame of this.#decoder.push(chunk)) {
      const message = toDownMessage(decodeControllerMessage(frame));
      this.#received.push(message);
      if (!this.#answerByItself(message)) this.#inbox.push(message);
    }
  }

  #answerByItself(message: DownMessage): boolean {
    if (this.#isSilent) return false;
    const options = this.#options;
    switch (message.type) {
      case 'Heartbeat':
        if (!options.shouldAnswerHeartbeats) return false;
        this.#later(() => this.reply(message, { type: 'HeartbeatAck' }));
        return true;
      case 'LoadRequest':
        if (!options.shouldStartByItself) return false;
        this.#later(() => this.reply(message, { type: 'LoadResult', catalog: options.catalog }));
        return true;
      case 'WarmupRequest':
        if (!options.shouldStartByItself) return false;
        this.#later(() => this.reply(message, { type: 'WarmupResult' }));
        return true;
      case 'Close':
        if (!options.shouldCloseByItself) return false;
        this.#later(() => {
          this.reply(message, { type: 'Closed' });
          this.exit(0);
        });
        return true;
      case 'RunBatch':
      case 'RunSequenceBatch':
      case 'EndSessions':
      case 'StartStream':
      case 'StreamCredit':
      case 'CancelStream':
      case 'LoadResource':
      case 'EvictResource':
        return false;
    }
  }

  #encode(answer: HostReply, to: DownMessage | undefined): HostMessage {
    const correlationId = to?.correlationId ?? 0;
    switch (answer.type) {
      case 'LoadResult':
        return {
          type: 'LoadResult',
          correlationId,
          model: to?.type === 'LoadRequest' ? to.model : 'm',
          device: answer.device ?? 'cpu',
          parameters: answer.parameters ?? 1000,
          memoryBytes: answer.memoryBytes ?? 1 << 20,
          loadMs: answer.loadMs ?? 10,
          workKinds: answer.workKinds ?? ['batch', 'sequence', 'stream'],
          catalog: answer.catalog ?? [],
          stages: answer.stages ?? [],
        };
      case 'WarmupResult':
        return {
          type: 'WarmupResult',
          correlationId,
          warmupMs: answer.warmupMs ?? 5,
          graphsCaptured: answer.graphsCaptured ?? 0,
          stages: answer.stages ?? [],
        };
      case 'BatchResult': {
        const requests = to?.type === 'RunBatch' ? to.requests : [];
        const items = answer.items ?? requests.map((): ScriptedItem => ({}));
        return {
          type: 'BatchResult',
          correlationId,
          batchId: to?.type === 'RunBatch' ? to.batchId : 'unknown',
          results: items.map((item, i) => toWireItem(item, item.requestId ?? requests[i]?.requestId ?? `r${i}`)),
          computeMs: answer.computeMs ?? 1,
        };
      }
      case 'SequenceResult': {
        const sent = to?.type === 'RunSequenceBatch' ? to.items : [];
        const items = answer.items ?? sent.map((): ScriptedSequenceItem => ({}));
        const states: Uint8Array[] = [];
        const results = items.map((item, i) => {
          const of = sent[i];
          const ids = { requestId: of?.requestId ?? `r${i}`, sessionId: of?.sessionId ?? `s${i}`, seq: of?.seq ?? 0 };
          if ('error' in item) {
            return {
              ...ids,
              error: { code: item.error.code, message: item.error.message ?? `scripted ${item.error.code}` },
              output: null,
              stateBytes: 0,
            };
          }
          const state = item.state ?? new TextEncoder().encode(`state of ${ids.sessionId}`);
          states.push(state);
          return { ...ids, error: null, output: item.output ?? {}, stateBytes: state.byteLength };
        });
        return {
          type: 'SequenceResult',
          correlationId,
          batchId: to?.type === 'RunSequenceBatch' ? to.batchId : 'unknown',
          results,
          computeMs: answer.computeMs ?? 1,
          body: states,
        };
      }
      case 'SessionsEnded':
        return { type: 'SessionsEnded', correlationId, sessionIds: answer.sessionIds ?? (to?.type === 'EndSessions' ? to.sessionIds : []) };
      case 'StreamChunk': {
        const streamId = to?.type === 'StartStream' ? to.streamId : 'unknown';
        const sent = this.#streamChunks.get(streamId) ?? 0;
        this.#streamChunks.set(streamId, sent + 1);
        return {
          type: 'StreamChunk',
          correlationId,
          streamId,
          index: answer.index ?? sent,
          meta: answer.meta ?? {},
          body: answer.bytes ?? Uint8Array.of(sent & 0xff),
        };
      }
      case 'StreamEnd': {
        const streamId = to?.type === 'StartStream' ? to.streamId : 'unknown';
        const error =
          answer.error === undefined ? null : { code: answer.error.code, message: answer.error.message ?? `scripted ${answer.error.code}` };
        return {
          type: 'StreamEnd',
          correlationId,
          streamId,
          chunks: answer.chunks ?? this.#streamChunks.get(streamId) ?? 0,
          usage: error === null ? (answer.usage ?? {}) : null,
          error,
        };
      }
      case 'ResourceLoaded':
        return {
          type: 'ResourceLoaded',
          correlationId,
          name: to?.type === 'LoadResource' ? to.name : 'unknown',
          kind: to?.type === 'LoadResource' ? to.kind : 'unknown',
          residency: answer.residency ?? 'device',
          bytes: answer.bytes ?? 1024,
          loadMs: answer.loadMs ?? 1,
          source: answer.source ?? 'disk',
        };
      case 'ResourceEvicted':
        return {
          type: 'ResourceEvicted',
          correlationId,
          name: to?.type === 'EvictResource' ? to.name : 'unknown',
          bytes: answer.bytes ?? 1024,
        };
      case 'HeartbeatAck': {
        const fields = Object.fromEntries(Object.entries(answer).filter(([key, value]) => key in IDLE_HEARTBEAT && value !== undefined));
        return {
          type: 'HeartbeatAck',
          correlationId,
          seq: answer.seq ?? (to?.type === 'Heartbeat' ? to.seq : 0),
          ...this.heartbeat,
          ...fields,
        };
      }
      case 'Error':
        return {
          type: 'Error',
          correlationId,
          code: answer.code,
          message: answer.message ?? `scripted ${answer.code}`,
          requestId: answer.requestId ?? null,
        };
      case 'Closed':
        return { type: 'Closed', correlationId };
    }
  }

  #sendUp(message: HostMessage): void {
    this.#pushUp(encodeMessageBuffer(message));
  }

  #pushUp(bytes: Buffer): void {
    assert.ok(this.#exit === undefined, 'the scripted child has exited: it cannot send');
    if (this.#heldOutput !== undefined) this.#heldOutput.push(bytes);
    else this.up.push(bytes);
  }

  /** On a later tick, as a separate process's answer would be (never inside the writer's call), unless it has exited. */
  #later(action: () => void): void {
    process.nextTick(() => {
      if (this.#exit === undefined) action();
    });
  }
}

function toWireItem(item: ScriptedItem, requestId: string): MessageOf<'BatchResult'>['results'][number] {
  if ('error' in item) {
    return { requestId, error: { code: item.error.code, message: item.error.message ?? `scripted ${item.error.code}` }, transcript: null };
  }
  const transcript = item.transcript ?? {};
  return {
    requestId,
    error: null,
    transcript: {
      text: transcript.text ?? `text of ${requestId}`,
      language: transcript.language ?? 'en',
      durationS: transcript.durationS ?? 1,
      segments: transcript.segments ?? null,
      words: transcript.words ?? null,
    },
  };
}

/** Copies each request's or item's audio (and attached state) out of the frame body. */
function toDownMessage(message: ControllerMessage<Uint8Array>): DownMessage {
  // eslint-disable-next-line @typescript-eslint/switch-exhaustiveness-check -- every other message is kept as decoded
  switch (message.type) {
    case 'RunBatch': {
      const { body, ...rest } = message;
      const audio = splitPcm16Body({ requests: message.requests, body });
      return { ...rest, requests: message.requests.map((request, i) => ({ ...request, audio: new Int16Array(audio[i]!) })) };
    }
    case 'RunSequenceBatch': {
      const { body, ...rest } = message;
      const parts = splitSequenceBody({ items: message.items, body });
      return {
        ...rest,
        items: message.items.map((item, i) => ({
          ...item,
          audio: new Int16Array(parts[i]!.audio),
          state: new Uint8Array(parts[i]!.state),
        })),
      };
    }
    default:
      return message;
  }
}

/** A SpawnInstance that hands out scripted children and remembers what it was asked to start. */
export class ScriptedSpawn {
  readonly children: ScriptedChild[] = [];
  readonly requests: SpawnRequest[] = [];
  #optionsFor: (request: SpawnRequest, index: number) => ScriptedChildOptions;

  /** @param options the options of every child, or a function choosing them per spawn (index from 0). */
  constructor(options: ScriptedChildOptions | ((request: SpawnRequest, index: number) => ScriptedChildOptions) = {}) {
    this.#optionsFor = typeof options === 'function' ? options : () => options;
  }

  readonly spawn: SpawnInstance = (request) => {
    const index = this.children.length;
    const child = new ScriptedChild({ pid: 1000 + index, ...this.#optionsFor(request, index) });
    this.children.push(child);
    this.requests.push(request);
    return child;
  };

  /** The child started most recently. */
  last(): ScriptedChild {
    const child = this.children.at(-1);
    assert.ok(child !== undefined, 'nothing was spawned');
    return child;
  }

  /** The child started for an instance, found by the VOXMUX_INSTANCE_ID it was given. */
  of(instanceId: string): ScriptedChild {
    const index = this.requests.findIndex((r) => r.env.VOXMUX_INSTANCE_ID === instanceId);
    assert.ok(index >= 0, `no child was spawned for ${instanceId}`);
    return this.children[index]!;
  }
}
