/**
 * The voice-call workload of `voxmux bench call`: scripted callers on the OpenAI Realtime
 * WebSocket (`/v1/realtime`, GA events, server VAD). One request is one turn of a call: the caller
 * pauses, speaks an utterance in real time (20 ms frames of 24 kHz pcm16, silence around it), and
 * listens to the answer as it plays; the turn ends when the answer would have finished playing.
 * A call holds its connection across turns and hangs up after `turnsPerCall` turns, so N closed-
 * loop streams are N concurrent calls.
 *
 * Each turn is timed from the end of the caller's speech (the moment its last frame was due):
 * `transcript` (the final transcript event), `first_audio` (the first audio delta) and, when the
 * server's LLM is this bench's fake LLM, `llm_first_token` (the fake LLM's own time from request to
 * first token, read from its log) and `first_audio_ex_llm` (first_audio less that). The turn's
 * ttfb is first_audio_ex_llm when known, else first_audio. Audio deltas feed a playback tracker:
 * a stall is audio arriving after what came before it has finished playing.
 */
import { WebSocket } from 'ws';
import { callTag, type FakeLlm } from './fake-llm.js';
import { createSeededRandom } from './load-driver.js';
import { createPlaybackTracker } from './playback.js';
import { countWordErrors } from './word-error-rate.js';
import { RequestAbort, type RequestContext, type RequestOutcome, type Workload } from './workload.js';

/** The realtime API's pcm16: 24 kHz, 16-bit, mono. */
export const CALL_SAMPLE_RATE_HZ = 24_000;
const BYTES_PER_SECOND = CALL_SAMPLE_RATE_HZ * 2;
/** A caller's audio frame: 20 ms. */
export const FRAME_MS = 20;
const FRAME_BYTES = (BYTES_PER_SECOND * FRAME_MS) / 1000;
/** Frames sent at once at most when the sender fell behind (a busy client); the rest are skipped. */
const MAX_CATCH_UP_FRAMES = 25;

export interface CallUtterance {
  voice: string;
  text: string;
  /** 24 kHz 16-bit mono little-endian samples. */
  pcm: Buffer;
}

export interface CallWorkloadOptions {
  /** ws:// or wss:// URL of /v1/realtime, with its `model` query. */
  realtimeUrl: string;
  model: string;
  utterances: readonly CallUtterance[];
  seed: number;
  turnsPerCall: number;
  /** The caller's pause before speaking, drawn uniformly from [min, max] milliseconds. */
  thinkMs: readonly [number, number];
  /** The assistant's instructions; each call's tag is appended for the fake LLM. */
  instructions: string;
  /** The assistant's voice (session.audio.output.voice). */
  voice: string;
  /** server VAD's silence_duration_ms. */
  silenceMs: number;
  apiKey?: string;
  /** The fake LLM the server is configured with, for the LLM's own time and token counts. */
  fakeLlm?: Pick<FakeLlm, 'requests'>;
}

type ServerEvent = { type: string } & Record<string, unknown>;

/** Totals over every finished turn, for the run's notes. */
export interface CallTotals {
  turns: number;
  callsOpened: number;
  /** Word errors and reference words of the final transcripts against what the callers said. */
  wordErrors: number;
  words: number;
  llmTurns: number;
  promptTokens: number;
  completionTokens: number;
}

/** The utterance and pause of turn `sequence`: the same for the same seed. */
export function planTurn(options: Pick<CallWorkloadOptions, 'utterances' | 'seed' | 'thinkMs'>, sequence: number) {
  const random = createSeededRandom((options.seed + Math.imul(sequence + 1, 0x9e3779b1)) >>> 0);
  const utterance = options.utterances[Math.floor(random() * options.utterances.length)]!;
  const [min, max] = options.thinkMs;
  return { utterance, thinkMs: Math.round(min + random() * (max - min)) };
}

/** One open call: its socket, the events not yet read, and its microphone. */
class Call {
  readonly id: string;
  turns = 0;
  readonly #socket: WebSocket;
  /** Events not yet read, with when they arrived. */
  readonly #events: { event: ServerEvent; atMs: number }[] = [];
  #waiter: (() => void) | undefined;
  #closed: Error | undefined;
  // The microphone: frames are due every FRAME_MS from #micStartMs; speech is sent first, silence after.
  #micStartMs = 0;
  #framesSent = 0;
  #speech: Buffer | undefined;
  #speechAt = 0;
  #onSpeechEnd: ((atMs: number) => void) | undefined;
  #isMicOn = false;

  constructor(id: string, socket: WebSocket, nowMs: () => number) {
    this.id = id;
    this.#socket = socket;
    socket.on('message', (data) => {
      try {
        this.#events.push({ event: JSON.parse(String(data)) as ServerEvent, atMs: nowMs() });
      } catch {
        this.#events.push({ event: { type: 'bench.bad_event' }, atMs: nowMs() });
      }
      this.#wake();
    });
    socket.on('close', () => {
      this.#closed ??= new Error('connection_closed');
      this.#wake();
    });
    socket.on('error', (err) => {
      this.#closed ??= err;
      this.#wake();
    });
  }

  get isOpen(): boolean {
    return this.#closed === undefined && this.#socket.readyState === WebSocket.OPEN;
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.();
  }

  send(event: Record<string, unknown>): void {
    if (this.isOpen) this.#socket.send(JSON.stringify(event));
  }

  /** The next event, or an error when the call closed or `signal` aborted. */
  async next(signal: AbortSignal): Promise<{ event: ServerEvent; atMs: number }> {
    for (;;) {
      const next = this.#events.shift();
      if (next !== undefined) return next;
      if (this.#closed !== undefined) throw this.#closed;
      if (signal.aborted) throw signal.reason;
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          resolve();
        };
        this.#waiter = done;
        signal.addEventListener('abort', done, { once: true });
      });
    }
  }

  /** Drops the events of earlier turns (trailing transcripts, rate limits). */
  discardEvents(): void {
    this.#events.length = 0;
  }

  micOn(nowMs: number): void {
    this.#isMicOn = true;
    this.#micStartMs = nowMs;
    this.#framesSent = 0;
  }

  micOff(): void {
    this.#isMicOn = false;
    this.#speech = undefined;
    this.#onSpeechEnd = undefined;
  }

  /** Starts speaking `pcm`; resolves with the time its last frame was due. */
  speak(pcm: Buffer): Promise<number> {
    this.#speech = pcm;
    this.#speechAt = 0;
    return new Promise((resolve) => (this.#onSpeechEnd = resolve));
  }

  /** Sends the frames due by `nowMs` in one append: speech while there is some, silence otherwise. */
  tick(nowMs: number): void {
    if (!this.#isMicOn || !this.isOpen) return;
    let due = Math.floor((nowMs - this.#micStartMs) / FRAME_MS) - this.#framesSent;
    if (due <= 0) return;
    if (due > MAX_CATCH_UP_FRAMES) {
      this.#framesSent += due - MAX_CATCH_UP_FRAMES;
      due = MAX_CATCH_UP_FRAMES;
    }
    const parts: Buffer[] = [];
    for (let i = 0; i < due; i++) {
      this.#framesSent += 1;
      const speech = this.#speech;
      if (speech !== undefined && this.#speechAt < speech.length) {
        const frame = speech.subarray(this.#speechAt, this.#speechAt + FRAME_BYTES);
        this.#speechAt += frame.length;
        parts.push(frame.length === FRAME_BYTES ? frame : Buffer.concat([frame, Buffer.alloc(FRAME_BYTES - frame.length)]));
        if (this.#speechAt >= speech.length) {
          this.#speech = undefined;
          const end = this.#onSpeechEnd;
          this.#onSpeechEnd = undefined;
          end?.(this.#micStartMs + this.#framesSent * FRAME_MS);
        }
      } else {
        parts.push(Buffer.alloc(FRAME_BYTES));
      }
    }
    this.send({ type: 'input_audio_buffer.append', audio: Buffer.concat(parts).toString('base64') });
  }

  close(): void {
    this.micOff();
    this.#closed ??= new Error('hung_up');
    this.#socket.close();
  }
}

const isAbort = (err: unknown): err is RequestAbort => err instanceof RequestAbort;

export interface CallWorkload extends Workload {
  totals(): CallTotals;
}

export function createCallWorkload(options: CallWorkloadOptions): CallWorkload {
  const idle: Call[] = [];
  const live = new Set<Call>();
  let opened = 0;
  const totals: CallTotals = { turns: 0, callsOpened: 0, wordErrors: 0, words: 0, llmTurns: 0, promptTokens: 0, completionTokens: 0 };
  let ticker: ReturnType<typeof setInterval> | undefined;
  const startTicker = (clock: RequestContext['clock']) => {
    ticker ??= setInterval(() => {
      const now = clock.nowMs();
      for (const call of live) call.tick(now);
    }, FRAME_MS / 2);
  };

  const openCall = async (context: RequestContext): Promise<{ call: Call; setupMs: number }> => {
    const startMs = context.clock.nowMs();
    opened += 1;
    totals.callsOpened += 1;
    const socket = new WebSocket(options.realtimeUrl, {
      headers: options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` },
    });
    const call = new Call(`c${opened}`, socket, () => context.clock.nowMs());
    let detach = (): void => undefined;
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(context.signal.reason as Error);
      if (context.signal.aborted) return onAbort();
      context.signal.addEventListener('abort', onAbort, { once: true });
      detach = () => context.signal.removeEventListener('abort', onAbort);
      socket.once('open', () => resolve());
      socket.once('error', reject);
      socket.once('unexpected-response', (request, response) => {
        request.destroy();
        reject(Object.assign(new Error(`HTTP ${response.statusCode}`), { code: `http_${response.statusCode}` }));
      });
    })
      .catch((err: unknown) => {
        socket.terminate();
        throw err;
      })
      .finally(() => detach());
    live.add(call);
    try {
      await untilEvent(call, 'session.created', context.signal);
      call.send({
        type: 'session.update',
        session: {
          type: 'realtime',
          instructions: `${options.instructions} ${callTag(call.id)}`,
          output_modalities: ['audio'],
          audio: {
            input: {
              format: { type: 'audio/pcm', rate: CALL_SAMPLE_RATE_HZ },
              transcription: { model: 'whisper-1' },
              turn_detection: { type: 'server_vad', silence_duration_ms: options.silenceMs },
            },
            output: { format: { type: 'audio/pcm', rate: CALL_SAMPLE_RATE_HZ }, voice: options.voice },
          },
        },
      });
      await untilEvent(call, 'session.updated', context.signal);
    } catch (err) {
      live.delete(call);
      call.close();
      throw err;
    }
    return { call, setupMs: context.clock.nowMs() - startMs };
  };

  const hangUp = (call: Call) => {
    live.delete(call);
    call.close();
  };

  return {
    info: {
      kind: 'call',
      endpoint: options.realtimeUrl,
      model: options.model,
      isStreaming: true,
      inputCount: options.utterances.length,
      settings: {
        voices: [...new Set(options.utterances.map((u) => u.voice))].join(','),
        turnsPerCall: String(options.turnsPerCall),
        thinkMs: `${options.thinkMs[0]}-${options.thinkMs[1]}`,
        silenceMs: String(options.silenceMs),
        llm: options.fakeLlm === undefined ? 'the server’s own' : 'this bench’s fake LLM',
        seed: String(options.seed),
      },
    },
    totals: () => ({ ...totals }),
    async close(): Promise<void> {
      if (ticker !== undefined) clearInterval(ticker);
      ticker = undefined;
      for (const call of [...live]) hangUp(call);
      idle.length = 0;
    },
    async makeRequest(context: RequestContext): Promise<RequestOutcome> {
      startTicker(context.clock);
      const startMs = context.clock.nowMs();
      const turn = planTurn(options, context.sequence);
      const stagesMs: Record<string, number> = {};
      let call: Call | undefined;
      const fail = (errorCode: string): RequestOutcome => {
        if (call !== undefined) hangUp(call);
        return { startMs, endMs: context.clock.nowMs(), errorCode };
      };
      try {
        call = idle.pop();
        while (call !== undefined && !call.isOpen) {
          live.delete(call);
          call = idle.pop();
        }
        if (call === undefined) {
          const fresh = await openCall(context);
          call = fresh.call;
          stagesMs.call_setup = round(fresh.setupMs);
        }
        call.discardEvents();
        call.micOn(context.clock.nowMs());
        await sleep(turn.thinkMs, context.signal);
        const endOfSpeechMs = await unlessAborted(call.speak(turn.utterance.pcm), context.signal);
        const tracker = createPlaybackTracker({ startMs: endOfSpeechMs, bytesPerSecond: BYTES_PER_SECOND });
        let transcript: string | undefined;
        let firstAudioMs: number | undefined;
        // The turn's answer is the response created after the end of the caller's speech. One created
        // before it answered part of the utterance (server VAD committed at a pause in it) and is
        // not this turn's: its events are skipped.
        let answerId: string | undefined;
        for (;;) {
          const { event, atMs } = await call.next(context.signal);
          const responseId = event.response_id ?? (event.response as { id?: unknown } | undefined)?.id;
          if (event.type === 'error') {
            const error = (event.error ?? {}) as { code?: unknown };
            return fail(typeof error.code === 'string' ? error.code : 'server_error');
          }
          if (atMs < endOfSpeechMs) continue;
          // The last final transcript before the answer's audio: the transcript of the commit it answers.
          if (event.type === 'conversation.item.input_audio_transcription.completed' && firstAudioMs === undefined) {
            transcript = String(event.transcript ?? '');
            stagesMs.transcript = round(atMs - endOfSpeechMs);
          } else if (event.type === 'response.created') {
            answerId ??= String(responseId);
          } else if (event.type === 'response.output_audio.delta' && responseId === answerId) {
            firstAudioMs ??= atMs;
            tracker.add(atMs, Buffer.from(String(event.delta ?? ''), 'base64').length);
          } else if (event.type === 'response.done' && responseId === answerId) {
            const status = (event.response as { status?: unknown } | undefined)?.status;
            if (status !== 'completed') return fail(`response_${String(status)}`);
            break;
          }
        }
        if (firstAudioMs === undefined) return fail('no_audio');
        stagesMs.first_audio = round(firstAudioMs - endOfSpeechMs);
        const llm = options.fakeLlm?.requests.findLast((r) => r.call === call!.id && r.receivedMs >= endOfSpeechMs - 1);
        if (llm?.firstTokenMs !== undefined) {
          stagesMs.llm_first_token = round(llm.firstTokenMs - llm.receivedMs);
          stagesMs.first_audio_ex_llm = round(stagesMs.first_audio - stagesMs.llm_first_token);
          totals.llmTurns += 1;
          totals.promptTokens += llm.promptTokens;
          totals.completionTokens += llm.completionTokens;
        }
        const playback = tracker.summary();
        // The caller listens to the answer to its end, then the turn is over.
        const playedAtMs = (playback.firstByteMs ?? 0) + endOfSpeechMs + 1000 * playback.audioSeconds + playback.stalledMs;
        await sleep(playedAtMs - context.clock.nowMs(), context.signal);
        call.micOff();
        totals.turns += 1;
        if (transcript !== undefined) {
          const counted = countWordErrors(turn.utterance.text, transcript);
          totals.wordErrors += counted.substitutions + counted.deletions + counted.insertions;
          totals.words += counted.referenceWords;
        }
        call.turns += 1;
        if (call.turns >= options.turnsPerCall) hangUp(call);
        else idle.push(call);
        return {
          startMs,
          endMs: context.clock.nowMs(),
          ttfbMs: stagesMs.first_audio_ex_llm ?? stagesMs.first_audio,
          audioSeconds: playback.audioSeconds,
          playback: { stalls: playback.stalls, stalledMs: playback.stalledMs },
          stagesMs,
        };
      } catch (err) {
        if (isAbort(err)) return fail(err.reason);
        const code = (err as { code?: unknown }).code;
        return fail(
          typeof code === 'string'
            ? code
            : err instanceof Error && err.message === 'connection_closed'
              ? 'connection_closed'
              : 'network_error',
        );
      }
    },
  };
}

const round = (ms: number) => Math.round(ms * 10) / 10;

async function untilEvent(call: Call, type: string, signal: AbortSignal): Promise<ServerEvent> {
  for (;;) {
    const { event } = await call.next(signal);
    if (event.type === type) return event;
    if (event.type === 'error') {
      const error = (event.error ?? {}) as { code?: unknown };
      throw Object.assign(new Error('error event'), { code: typeof error.code === 'string' ? error.code : 'server_error' });
    }
  }
}

/** `promise`, or a rejection with the signal's reason once it aborts first. */
function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err as Error);
      },
    );
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}
