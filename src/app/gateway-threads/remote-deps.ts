/**
 * A gateway thread's GatewayDeps: the work goes to the main thread as messages (thread-messages.ts),
 * what the routes read at once (readiness, model states, voices, instance GPUs, draining) comes
 * from the state the main thread last pushed, and the rest (the catalogue, the decoder, voice
 * activity, metrics handles, logs) is the thread's own.
 */
import type { MessagePort } from 'node:worker_threads';
import { errors } from '../../core/error-catalog.js';
import type { GatewayDeps, ModelLifecycleState } from '../../gateway/index.js';
import { StreamCallImpl, type StreamCall, type SubmitOptions } from '../../scheduler/index.js';
import type { UploadPool } from '../../gateway/index.js';
import type { OwnerMessage, OwnerState, PlainAudio, PlainSubmitOptions, ThreadMessage, ThreadRequest } from './thread-messages.js';

/** What the thread supplies itself. */
export type LocalDeps = Omit<
  GatewayDeps,
  | 'transcribe'
  | 'openStream'
  | 'sequences'
  | 'readiness'
  | 'metricsText'
  | 'isDraining'
  | 'requestLog'
  | 'instanceGpu'
  | 'lifecycle'
  | 'voices'
> & { voiceModels: ReturnType<GatewayDeps['voices']['models']> };

interface Pending {
  resolve(value: unknown, memory?: ArrayBuffer): void;
  reject(error: ReturnType<typeof errors.fromPlain>): void;
  onDispatched?: SubmitOptions['onDispatched'];
  stream?: StreamCallImpl;
}

export interface RemoteDeps {
  deps: GatewayDeps;
  /** Handles a message from the main thread (requests' answers and state); `collectMetrics` and `close` are the caller's. */
  receive(message: OwnerMessage): void;
}

/** `initial` is the main thread's state at the thread's start; later ones come as `state` messages. */
export function createRemoteDeps(port: MessagePort, local: LocalDeps, transfers: UploadPool, initial: OwnerState): RemoteDeps {
  const pending = new Map<number, Pending>();
  let nextCallId = 1;
  let state = initial;

  function post(message: ThreadMessage, transfer: ArrayBuffer[] = []): void {
    port.postMessage(message, transfer);
  }

  /** The samples in transferable memory of the thread's transfer pool. */
  function audioOf(samples: Int16Array): PlainAudio {
    const memory = transfers.take(samples.byteLength);
    memory.set(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
    return { memory: memory.buffer as ArrayBuffer, samples: samples.length };
  }

  function call<T>(
    request: ThreadRequest,
    p: { signal?: AbortSignal; onDispatched?: SubmitOptions['onDispatched']; transfer?: ArrayBuffer[] },
  ): Promise<T> {
    const { callId } = request;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => post({ type: 'cancel', callId });
      p.signal?.addEventListener('abort', onAbort, { once: true });
      pending.set(callId, {
        resolve: (value, memory) => {
          p.signal?.removeEventListener('abort', onAbort);
          if (memory !== undefined) transfers.adopt(memory);
          resolve(value as T);
        },
        reject: (error) => {
          p.signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
        onDispatched: p.onDispatched,
      });
      post(request, p.transfer);
      if (p.signal?.aborted === true) onAbort();
    });
  }

  /** A request that carries samples: they go in transferred memory, which comes back with the result. */
  function callWithAudio<T>(
    samples: Int16Array,
    request: (audio: PlainAudio) => ThreadRequest,
    p: { signal?: AbortSignal; onDispatched?: SubmitOptions['onDispatched'] },
  ): Promise<T> {
    const audio = audioOf(samples);
    return call(request(audio), { signal: p.signal, onDispatched: p.onDispatched, transfer: [audio.memory] });
  }

  function plainOptions(options: Omit<SubmitOptions, 'signal'>): PlainSubmitOptions {
    return {
      timeoutMs: options.timeoutMs,
      ...(options.priority === undefined ? {} : { priority: options.priority }),
      ...(options.requestId === undefined ? {} : { requestId: options.requestId }),
      ...(options.admission === undefined ? {} : { admission: options.admission }),
    };
  }

  const deps: GatewayDeps = {
    ...local,
    transcribe(model, request, options) {
      const { audio, ...rest } = request;
      return callWithAudio(
        audio,
        (plain) => ({ type: 'transcribe', callId: nextCallId++, model, audio: plain, request: rest, options: plainOptions(options) }),
        options,
      );
    },
    openStream(model, input, options): StreamCall {
      const callId = nextCallId++;
      const stream = new StreamCallImpl({
        onTake: () => post({ type: 'streamTake', callId }),
        onCancel: () => post({ type: 'cancel', callId }),
      });
      const body = new Uint8Array(input.body);
      const request: ThreadRequest = {
        type: 'openStream',
        callId,
        model,
        input: { ...input, body },
        options: { timeoutMs: options.timeoutMs, ...(options.priority === undefined ? {} : { priority: options.priority }) },
      };
      const onAbort = () => stream.cancel();
      options.signal?.addEventListener('abort', onAbort, { once: true });
      pending.set(callId, {
        resolve: (summary) => {
          options.signal?.removeEventListener('abort', onAbort);
          stream.end({ ok: true, summary: summary as { chunks: number; usage: Record<string, unknown> } });
        },
        reject: (error) => {
          options.signal?.removeEventListener('abort', onAbort);
          stream.end({ ok: false, error });
        },
        onDispatched: options.onDispatched,
        stream,
      });
      post(request, [body.buffer as ArrayBuffer]);
      if (options.signal?.aborted === true) onAbort();
      return stream;
    },
    sequences: {
      submit(model, item, options) {
        const { audio, ...rest } = item;
        return callWithAudio(
          audio,
          (plain) => ({ type: 'sequenceSubmit', callId: nextCallId++, model, audio: plain, item: rest, options: plainOptions(options) }),
          options,
        );
      },
      end: (model, sessionId) => call({ type: 'sequenceEnd', callId: nextCallId++, model, sessionId }, {}),
    },
    diarizationSessions: {
      create: (params) => call({ type: 'sessionCreate', callId: nextCallId++, params }, {}),
      modelOf: (id) => call({ type: 'sessionModel', callId: nextCallId++, id }, {}),
      timeline: (id) => call({ type: 'sessionTimeline', callId: nextCallId++, id }, {}),
      close: (id, options) => call({ type: 'sessionClose', callId: nextCallId++, id, options: plainOptions(options) }, {}),
      chunk(chunk, options) {
        const { samples, ...rest } = chunk;
        const request = (audio?: PlainAudio): ThreadRequest => ({
          type: 'sessionChunk',
          callId: nextCallId++,
          chunk: rest,
          ...(audio === undefined ? {} : { audio }),
          options: plainOptions(options),
        });
        // No signal: a chunk whose client left still runs (the session service keeps its answer).
        return samples === undefined
          ? call(request(), { onDispatched: options.onDispatched })
          : callWithAudio(samples, request, { onDispatched: options.onDispatched });
      },
    },
    voices: {
      models: () => local.voiceModels,
      catalog: (model) => state.catalogs[model] ?? [],
      residency: (model) => state.residency[model] ?? [],
    },
    readiness: () => state.readiness,
    metricsText: () => call<string>({ type: 'metricsText', callId: nextCallId++ }, {}),
    isDraining: () => state.isDraining === true,
    requestLog: { write: (line) => post({ type: 'requestLog', line }) },
    instanceGpu: (instanceId) => state.instanceGpus[instanceId],
    lifecycle: {
      state: (model): ModelLifecycleState => state.models[model]?.state ?? 'starting',
      // Answered by the main thread, which owns the lifecycle: the pushed state may be 250 ms old.
      wake: (model, { isWaiting }) => call<ModelLifecycleState>({ type: 'wake', callId: nextCallId++, model, isWaiting }, {}),
      sleep: (model, { isWaiting }) => call<ModelLifecycleState>({ type: 'sleep', callId: nextCallId++, model, isWaiting }, {}),
    },
  };

  return {
    deps,
    receive(message) {
      switch (message.type) {
        case 'state':
          state = message.state;
          return;
        case 'dispatched':
          pending.get(message.callId)?.onDispatched?.(message.dispatch);
          return;
        case 'streamChunk':
          pending.get(message.callId)?.stream?.push(message.chunk);
          return;
        case 'settled': {
          const waiting = pending.get(message.callId);
          pending.delete(message.callId);
          if (waiting === undefined) return;
          if (message.ok) waiting.resolve(message.value, message.memory);
          else waiting.reject(errors.fromPlain(message.error));
          return;
        }
        case 'collectMetrics':
        case 'close':
          return;
      }
    },
  };
}
