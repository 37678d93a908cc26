/**
 * The main thread's side of one gateway thread's requests: each runs through the main thread's own
 * gateway functions (the scheduler's submit, streams and sequences, the diarization sessions, the
 * model lifecycle, the server's metrics), and its answer goes back as one `settled` message, after
 * `dispatched` and (speech) `streamChunk` messages. A stream's chunks go at most
 * STREAM_CHUNKS_AHEAD ahead of the thread's caller taking them, so a slow client still holds the
 * instance back (its credit); its end follows its last chunk.
 */
import { errors } from '../../core/error-catalog.js';
import { toPlainError } from '../../core/errors.js';
import type { DiarizationSessions, GatewayDeps, ModelLifecycleControl } from '../../gateway/index.js';
import type { StreamCall } from '../../scheduler/index.js';
import type { Logger } from '../../telemetry/logger.js';
import {
  ownBytes,
  STREAM_CHUNKS_AHEAD,
  type OwnerMessage,
  type PlainAudio,
  type ThreadMessage,
  type ThreadRequest,
} from './thread-messages.js';

export interface ThreadServerDeps {
  /** The main thread's gateway functions. */
  gateway: GatewayDeps;
  /** The whole server's metrics text. */
  metricsText(): Promise<string>;
  log: Logger;
}

export interface ThreadServer {
  /** A request, or a stream take or cancel, from the thread. */
  receive(message: ThreadRequest | Extract<ThreadMessage, { type: 'streamTake' | 'cancel' }>): void;
  /** The thread is gone: its requests are cancelled. */
  cancelAll(): void;
}

interface RunningCall {
  abort: AbortController;
  stream?: { call: StreamCall; credit: number; pump: () => void };
}

/** The samples a thread sent, in the memory it transferred. */
function samplesOf(audio: PlainAudio): Int16Array {
  return new Int16Array(audio.memory, 0, audio.samples);
}

function lifecycleOf(g: GatewayDeps, model: string): ModelLifecycleControl {
  if (g.lifecycle === undefined) throw errors.modelNotFound({ model });
  return g.lifecycle;
}

function sessionsOf(g: GatewayDeps): DiarizationSessions {
  if (g.diarizationSessions === undefined) throw errors.modelNotFound({ model: '(a diarization model)' });
  return g.diarizationSessions;
}

/** Serves one thread: `post` sends to it (dropped once it is gone). */
export function serveThread(post: (message: OwnerMessage, transfer?: ArrayBuffer[]) => void, deps: ThreadServerDeps): ThreadServer {
  const { log } = deps;
  const calls = new Map<number, RunningCall>();

  function settle(callId: number, work: Promise<unknown>, memory?: ArrayBuffer): void {
    work.then(
      (value) => {
        calls.delete(callId);
        // The result is in, so the instance has read the audio: its memory goes back to the thread's pool.
        post({ type: 'settled', callId, ok: true, value, memory }, memory === undefined ? [] : [memory]);
      },
      (err: unknown) => {
        calls.delete(callId);
        if (!(err instanceof Error && 'code' in err)) log.error({ err }, 'gateway thread call failed');
        post({ type: 'settled', callId, ok: false, error: toPlainError(err) });
      },
    );
  }

  function run(message: ThreadRequest): void {
    const g = deps.gateway;
    const abort = new AbortController();
    const running: RunningCall = { abort };
    calls.set(message.callId, running);
    const onDispatched = (dispatch: { instanceId: string; queuedMs: number }) =>
      post({ type: 'dispatched', callId: message.callId, dispatch });
    const attempt = (work: () => Promise<unknown>, memory?: ArrayBuffer) => {
      let started: Promise<unknown>;
      try {
        started = work();
      } catch (err) {
        started = Promise.reject(err);
      }
      settle(message.callId, started, memory);
    };
    switch (message.type) {
      case 'transcribe': {
        const audio = samplesOf(message.audio);
        attempt(
          () => g.transcribe(message.model, { audio, ...message.request }, { ...message.options, signal: abort.signal, onDispatched }),
          message.audio.memory,
        );
        return;
      }
      case 'sequenceSubmit': {
        const audio = samplesOf(message.audio);
        attempt(() => {
          if (g.sequences === undefined) throw errors.modelNotFound({ model: message.model });
          return g.sequences.submit(message.model, { ...message.item, audio }, { ...message.options, signal: abort.signal, onDispatched });
        }, message.audio.memory);
        return;
      }
      case 'sequenceEnd':
        attempt(async () => g.sequences?.end(message.model, message.sessionId));
        return;
      case 'sessionCreate':
        attempt(() => sessionsOf(g).create(message.params));
        return;
      case 'sessionModel':
        attempt(() => sessionsOf(g).modelOf(message.id));
        return;
      case 'sessionTimeline':
        attempt(() => sessionsOf(g).timeline(message.id));
        return;
      case 'sessionClose':
        attempt(() => sessionsOf(g).close(message.id, message.options));
        return;
      case 'sessionChunk': {
        const samples = message.audio === undefined ? undefined : samplesOf(message.audio);
        attempt(
          () =>
            sessionsOf(g).chunk({ ...message.chunk, ...(samples === undefined ? {} : { samples }) }, { ...message.options, onDispatched }),
          message.audio?.memory,
        );
        return;
      }
      // The answer is made here, where the lifecycle lives: the thread's pushed state may be stale.
      case 'wake':
        attempt(() => lifecycleOf(g, message.model).wake(message.model, { isWaiting: message.isWaiting }));
        return;
      case 'sleep':
        attempt(() => lifecycleOf(g, message.model).sleep(message.model, { isWaiting: message.isWaiting }));
        return;
      case 'metricsText':
        attempt(() => deps.metricsText());
        return;
      case 'openStream':
        openStream(message, running, onDispatched);
        return;
    }
  }

  function openStream(
    message: Extract<ThreadRequest, { type: 'openStream' }>,
    running: RunningCall,
    onDispatched: (dispatch: { instanceId: string; queuedMs: number }) => void,
  ): void {
    let call: StreamCall;
    try {
      call = deps.gateway.openStream(message.model, message.input, { ...message.options, signal: running.abort.signal, onDispatched });
    } catch (err) {
      settle(message.callId, Promise.reject(err));
      return;
    }
    const chunks = call[Symbol.asyncIterator]();
    let isPulling = false;
    const stream = { call, credit: STREAM_CHUNKS_AHEAD, pump: () => {} };
    // Pulls as many chunks as the thread has room for; the stream's end goes after its last chunk.
    stream.pump = () => {
      if (isPulling || stream.credit <= 0) return;
      isPulling = true;
      chunks.next().then(
        (next) => {
          isPulling = false;
          if (next.done === true) {
            settle(message.callId, call.done);
            return;
          }
          stream.credit -= 1;
          const bytes = ownBytes(next.value.bytes);
          post({ type: 'streamChunk', callId: message.callId, chunk: { ...next.value, bytes } }, [bytes.buffer as ArrayBuffer]);
          stream.pump();
        },
        (err: unknown) => settle(message.callId, Promise.reject(err)),
      );
    };
    running.stream = stream;
    stream.pump();
  }

  return {
    receive(message) {
      if (message.type === 'streamTake') {
        const stream = calls.get(message.callId)?.stream;
        if (stream === undefined) return;
        stream.credit += 1;
        stream.pump();
      } else if (message.type === 'cancel') {
        const running = calls.get(message.callId);
        running?.abort.abort();
        running?.stream?.call.cancel();
      } else {
        run(message);
      }
    },
    cancelAll() {
      for (const running of calls.values()) {
        running.abort.abort();
        running.stream?.call.cancel();
      }
      calls.clear();
    },
  };
}
