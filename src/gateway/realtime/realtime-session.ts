/**
 * One realtime session (a voice call, or a transcription session): client events in, server events
 * out, through the ports in RealtimeSessionDeps (the route wires the scheduler, the LLM and the
 * socket). Events are handled one at a time in arrival order; what takes long (a transcription, a
 * response) runs beside them.
 *
 * A turn: audio appends -> 16 kHz -> VAD (speech_started ... speech_stopped) -> commit -> final
 * transcript (scheduler, high priority) -> LLM tokens -> sentences -> speech streams -> audio
 * deltas -> response.done. Speech detected during a response (barge-in) cancels it at once: the
 * LLM request and the speech stream are aborted, response.done says cancelled, and the assistant
 * item is truncated at the audio the client can have played; nothing of that response is sent
 * after its response.done.
 *
 * Any bad event gets an `error` event and changes nothing; the session stays open.
 */
import { randomUUID } from 'node:crypto';
import {
  MIN_COMMIT_MS,
  REALTIME_CLIENT_EVENTS,
  REALTIME_FORMAT_RATE_HZ,
  REALTIME_FORMAT_SAMPLE_BYTES,
  type RealtimeClientEventType,
  type RealtimeResponseUsage,
} from '../../api/realtime.js';
import type { Clock } from '../../core/clock.js';
import { errors } from '../../core/error-catalog.js';
import type { ServiceError } from '../../core/errors.js';
import type { Dispatch, StreamCall } from '../../scheduler/index.js';
import type { Logger } from '../../telemetry/logger.js';
import type { Metrics } from '../../telemetry/metrics.js';
import type { FirKernel } from '../audio/fir-kernel.js';
import { pcm16LittleEndian } from '../audio/pcm16.js';
import { toRealtimeErrorBody, toServiceError } from '../error-mapping.js';
import type { VoiceActivityStream } from '../pieces/voice-activity.js';
import { estimateTokens, type ChatMessage, type ChatResponder, type ChatToolCall, type ChatUsage } from './chat-responder.js';
import type { LlmGate } from './llm-gate.js';
import {
  audioMs,
  createInputConverter,
  createOutputConverter,
  decodeAppend,
  INPUT_RATE_HZ,
  type InputConverter,
} from './realtime-audio.js';
import { toRateLimits } from './rate-limits.js';
import { createSentenceCutter } from './sentence-cutter.js';
import { applySessionUpdate, gaFormatObject, parseResponseOverrides, toSessionObject, type SessionSettings } from './session-config.js';
import { createTurnDetector, type TurnDetector } from './turn-detector.js';

export type ServerEvent = { type: string } & Record<string, unknown>;

export interface RealtimeSessionOptions {
  sessionId: string;
  shape: 'ga' | 'beta';
  settings: SessionSettings;
  maxAppendBytes: number;
  maxBufferMs: number;
  /** Audio between two partial transcripts, in milliseconds; 0: none. */
  partialIntervalMs: number;
  /** Deadline of one transcription or one sentence of speech, in milliseconds. */
  turnTimeoutMs: number;
  fallbackText: string;
  maxOutputTokens: number;
  /** Price of one GPU hour, in US dollars. */
  gpuHourUsd: number;
}

export interface RealtimeSessionDeps {
  /** Sends one server event (GA name; the route renames it for beta clients). */
  send(event: ServerEvent): void;
  /**
   * Transcribes 16 kHz PCM through the scheduler; `language`: the session's (null: detected);
   * `prompt`: the session's input transcription prompt (null: none).
   */
  transcribe(
    audio: Int16Array,
    options: WorkOptions & { priority: 'high' | 'normal'; language: string | null; prompt: string | null },
  ): Promise<string>;
  /**
   * Opens a speech stream for one sentence in the session's voice (after the speech model's wake,
   * when the voice waits for its catalogue).
   * @throws unknown_voice
   */
  speak(text: string, options: WorkOptions & { voice: string; speed: number }): StreamCall | Promise<StreamCall>;
  /**
   * Checks a voice a session.update asks for (the speech model's voices and aliases).
   * @throws unknown_voice
   */
  checkVoice?(voice: string): void;
  /**
   * Checks an input transcription language a session.update asks for (the transcription model's
   * languages); `param` names the field the client sent.
   * @throws unsupported_option
   */
  checkLanguage?(language: string, param: string): void;
  /** The configured LLM; undefined: the demo responder answers. */
  llm: ChatResponder | undefined;
  demo: ChatResponder;
  gate: LlmGate;
  /** A fresh VAD stream (one per session). */
  openVad(): VoiceActivityStream;
  kernel: FirKernel;
  /** The GPU of an instance; undefined for a CPU instance. */
  instanceGpu(instanceId: string): number | undefined;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** The call has ended: what it used, for the request log. */
  onCallEnded?(call: RealtimeCallUsage): void;
}

/** What a finished call used. */
export interface RealtimeCallUsage {
  durationMs: number;
  /** The caller's audio received, in seconds. */
  audioInSeconds: number;
  /** The speech sent, in seconds. */
  audioOutSeconds: number;
  /** Busy time of GPU instances on the call's behalf, in seconds. */
  gpuSeconds: number;
}

export interface WorkOptions {
  signal: AbortSignal;
  timeoutMs: number;
  requestId: string;
  onDispatched: (dispatch: Dispatch) => void;
}

export interface RealtimeSession {
  /** One text frame from the client. */
  receive(text: string): void;
  /** A binary frame: the API has none, so it gets an error event. */
  receiveBinary(): void;
  /** The client went away: everything in flight is cancelled and the call line is logged. */
  close(): void;
}

interface ConversationItem {
  id: string;
  /** `tool`: a function's result (a function_call_output item). */
  role: 'user' | 'assistant' | 'system' | 'tool';
  text: string;
  /** Resolves when a user item's transcript is final ('' when it failed). */
  transcript?: Promise<string>;
  /** An assistant's function_call item: the call the LLM asked for. */
  toolCall?: ChatToolCall;
  /** A function_call_output item: the call it answers. */
  callId?: string;
  /** The item as the API shows it, as last sent (conversation.item.retrieve). */
  shown?: Record<string, unknown>;
}

/** A function call of a response, as it streams. */
interface FunctionCall {
  item: ConversationItem & { toolCall: ChatToolCall };
  outputIndex: number;
}

interface Turn {
  speechEndMs?: number;
  transcriptMs?: number;
  firstTokenMs?: number;
  firstAudioMs?: number;
}

interface SentenceAudio {
  text: string;
  startMs: number;
}

interface Response {
  id: string;
  itemId: string;
  abort: AbortController;
  isFinished: boolean;
  modality: 'audio' | 'text';
  instructions: string;
  text: string;
  sentences: SentenceAudio[];
  sentMs: number;
  firstAudioAtMs: number | undefined;
  turn: Turn;
  responder: 'llm' | 'demo' | 'fallback';
  usage: ChatUsage;
  /** The speech stream of the sentence being spoken. */
  speaking: StreamCall | undefined;
  /** The functions the LLM asked to call, by their index in its reply. */
  calls: Map<number, FunctionCall>;
  /** Its message item was announced (response.output_item.added). */
  isAnnounced: boolean;
  /** The LLM cut the reply at its token limit: the response ends incomplete. */
  isCut: boolean;
}

/** The stages of a turn, timed from the end of the user's speech (metrics and the call line). */
type TurnStage = 'transcript' | 'llm_first_token' | 'first_audio' | 'end_to_first_audio';

const MAX_ITEMS = 100;
/** Lateness of an audio delta past the end of the audio before it that counts as a stall, in milliseconds. */
const STALL_TOLERANCE_MS = 40;
const CLIENT_EVENTS: ReadonlySet<string> = new Set(REALTIME_CLIENT_EVENTS);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function newId(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 20)}`;
}

/** A function_call item as the API shows it. */
function functionCallObject(item: ConversationItem & { toolCall: ChatToolCall }, status: string): Record<string, unknown> {
  const call = item.toolCall;
  return {
    id: item.id,
    object: 'realtime.item',
    type: 'function_call',
    status,
    call_id: call.id,
    name: call.name,
    arguments: call.arguments,
  };
}

/**
 * The conversation as chat messages: items with text as they are; an assistant's function calls
 * (consecutive ones together) as one assistant message with its tool calls, each followed at once by
 * its result as a tool message, wherever the client added the result. A call without a result is
 * left out, as is a result without its call: chat completions refuse a conversation with either (a
 * call cancelled by barge-in, or never answered). `exclude` is the reply being made.
 */
function toChatMessages(items: readonly ConversationItem[], exclude: ConversationItem): ChatMessage[] {
  const results = new Map(items.flatMap((i) => (i.role === 'tool' && i.callId !== undefined ? [[i.callId, i.text] as const] : [])));
  const messages: ChatMessage[] = [];
  let pending: ChatToolCall[] = [];
  const flush = () => {
    if (pending.length === 0) return;
    messages.push({ role: 'assistant', content: '', toolCalls: pending });
    for (const call of pending) messages.push({ role: 'tool', toolCallId: call.id, content: results.get(call.id)! });
    pending = [];
  };
  for (const item of items) {
    if (item === exclude || item.role === 'tool') continue;
    if (item.toolCall !== undefined) {
      if (results.has(item.toolCall.id)) pending.push(item.toolCall);
      continue;
    }
    flush();
    if (item.text !== '') {
      messages.push(item.role === 'assistant' ? { role: 'assistant', content: item.text } : { role: item.role, content: item.text });
    }
  }
  flush();
  return messages;
}

function concat(parts: readonly Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

export function createRealtimeSession(options: RealtimeSessionOptions, deps: RealtimeSessionDeps): RealtimeSession {
  return new Session(options, deps);
}

class Session implements RealtimeSession {
  #options: RealtimeSessionOptions;
  #deps: RealtimeSessionDeps;
  #settings: SessionSettings;
  #isConfigured = false;
  #isClosed = false;
  #closed = new AbortController();
  #queue: Promise<void> = Promise.resolve();
  #openedMs: number;
  // input audio, at 16 kHz
  #converter: InputConverter | undefined;
  #vad: VoiceActivityStream;
  #detector: TurnDetector | undefined;
  #buffer: Int16Array[] = [];
  #bufferSamples = 0;
  /** Session timeline position of the buffer's first sample, in 16 kHz samples. */
  #bufferStart = 0;
  /** Samples the VAD has seen. */
  #vadSamples = 0;
  #speechItemId: string | undefined;
  #partialAt = 0;
  #isPartialRunning = false;
  #partials = new Map<string, string>();
  // conversation
  #items: ConversationItem[] = [];
  #response: Response | undefined;
  /** The turn of the last commit, until a response takes it. */
  #pendingTurn: Turn | undefined;
  /** A turn ended while a response it did not interrupt ran (interrupt_response false): answered when that one ends. */
  #hasTurnWaiting = false;
  /** Assistant audio was sent: the voice may no longer change. */
  #hasAssistantAudio = false;
  /** The audio each assistant item got, for truncation. */
  #spoken = new Map<string, { sentences: SentenceAudio[]; sentMs: number }>();
  // accounting for the call line
  #turnStages: Record<TurnStage, number[]> = {
    transcript: [],
    llm_first_token: [],
    first_audio: [],
    end_to_first_audio: [],
  };
  #turns = 0;
  #stalls = 0;
  #llmUsage: ChatUsage = { inputTokens: 0, outputTokens: 0 };
  #llmCostUsd = 0;
  #gpuMs = 0;
  #audioInSamples = 0;
  #audioOutMs = 0;

  constructor(options: RealtimeSessionOptions, deps: RealtimeSessionDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#settings = options.settings;
    this.#openedMs = deps.clock.nowMs();
    this.#vad = deps.openVad();
    this.#resetDetector();
    deps.metrics.realtimeSessions.inc();
    this.#send({ type: 'session.created', session: this.#sessionObject() });
  }

  receive(text: string): void {
    this.#queue = this.#queue.then(() => this.#handle(text));
  }

  receiveBinary(): void {
    this.#queue = this.#queue.then(() =>
      this.#sendError(errors.invalidEvent({ reason: 'expected a text frame holding JSON: got a binary frame' }), undefined),
    );
  }

  close(): void {
    if (this.#isClosed) return;
    this.#isClosed = true;
    this.#closed.abort(errors.clientDisconnected({ requestId: this.#options.sessionId }));
    if (this.#response !== undefined && !this.#response.isFinished) this.#finishCancelled(this.#response, 'client_cancelled');
    const { metrics, clock, log } = this.#deps;
    metrics.realtimeSessions.dec();
    const durationMs = clock.nowMs() - this.#openedMs;
    const gpuSeconds = this.#gpuMs / 1000;
    const costUsd = (gpuSeconds / 3600) * this.#options.gpuHourUsd + this.#llmCostUsd;
    metrics.realtimeCallSeconds.inc(durationMs / 1000);
    metrics.realtimeCallCost.inc(costUsd);
    metrics.realtimeGpuSeconds.inc(gpuSeconds);
    const stage = (name: TurnStage) => median(this.#turnStages[name]);
    log.info(
      {
        sessionId: this.#options.sessionId,
        kind: this.#settings.kind,
        durationMs: Math.round(durationMs),
        turns: this.#turns,
        transcriptMsP50: stage('transcript'),
        llmFirstTokenMsP50: stage('llm_first_token'),
        firstAudioMsP50: stage('first_audio'),
        endToFirstAudioMsP50: stage('end_to_first_audio'),
        stalls: this.#stalls,
        llmInputTokens: this.#llmUsage.inputTokens,
        llmOutputTokens: this.#llmUsage.outputTokens,
        llmCostUsd: this.#llmCostUsd,
        gpuSeconds,
        costUsd,
        costPerMinuteUsd: durationMs > 0 ? (costUsd * 60_000) / durationMs : 0,
      },
      'realtime call completed',
    );
    this.#deps.onCallEnded?.({
      durationMs,
      audioInSeconds: this.#audioInSamples / INPUT_RATE_HZ,
      audioOutSeconds: this.#audioOutMs / 1000,
      gpuSeconds,
    });
  }

  // ------------------------------------------------------------------------------------------
  // client events

  async #handle(text: string): Promise<void> {
    if (this.#isClosed) return;
    let clientEventId: string | undefined;
    try {
      let event: unknown;
      try {
        event = JSON.parse(text);
      } catch (err) {
        throw errors.invalidEvent({ reason: `not JSON (${(err as Error).message})` });
      }
      if (!isRecord(event)) throw errors.invalidEvent({ reason: 'expected a JSON object' });
      if (typeof event.event_id === 'string') clientEventId = event.event_id;
      if (typeof event.type !== 'string') throw errors.invalidEvent({ reason: 'expected a string type' });
      if (!CLIENT_EVENTS.has(event.type)) throw errors.unknownEvent({ type: event.type });
      await this.#dispatch(event.type as RealtimeClientEventType, event);
    } catch (err) {
      this.#sendError(toServiceError(err, { maxBodyBytes: 0, contentType: undefined }), clientEventId);
    }
  }

  async #dispatch(type: RealtimeClientEventType, event: Record<string, unknown>): Promise<void> {
    switch (type) {
      case 'session.update':
      case 'transcription_session.update':
        return this.#updateSession(event, type);
      case 'input_audio_buffer.append':
        return this.#append(event.audio);
      case 'input_audio_buffer.commit':
        return this.#commitByClient();
      case 'input_audio_buffer.clear':
        this.#clearBuffer();
        this.#send({ type: 'input_audio_buffer.cleared' });
        return;
      case 'conversation.item.create':
        return this.#createItem(event);
      case 'conversation.item.delete':
        return this.#deleteItem(event.item_id);
      case 'conversation.item.retrieve':
        return this.#retrieveItem(event.item_id);
      case 'conversation.item.truncate':
        return this.#truncateByClient(event);
      case 'response.create':
        return this.#createResponse(event.response);
      case 'response.cancel':
        return this.#cancelByClient(event.response_id);
      default: {
        const never: never = type;
        throw errors.unknownEvent({ type: String(never) });
      }
    }
  }

  #updateSession(event: Record<string, unknown>, type: string): void {
    // Beta's transcription_session.update carries the beta fields of a transcription session.
    const isBetaTranscription = type === 'transcription_session.update';
    const next = applySessionUpdate(this.#settings, event.session, isBetaTranscription ? 'beta' : this.#options.shape);
    if (isBetaTranscription) next.kind = 'transcription';
    if (next.voice !== this.#settings.voice) {
      // As on OpenAI, a conversation keeps its voice once assistant audio is in it.
      if (this.#hasAssistantAudio) throw errors.cannotUpdateVoice();
      // An unknown voice is refused here, with the session unchanged, not at the first reply.
      this.#deps.checkVoice?.(next.voice);
    }
    if (next.language !== undefined && next.language !== this.#settings.language) {
      const shape = isBetaTranscription ? 'beta' : this.#options.shape;
      const param = shape === 'ga' ? 'session.audio.input.transcription.language' : 'session.input_audio_transcription.language';
      this.#deps.checkLanguage?.(next.language, param);
    }
    const isTurnChanged = JSON.stringify(next.turnDetection) !== JSON.stringify(this.#settings.turnDetection);
    this.#settings = next;
    this.#isConfigured = true;
    if (this.#converter !== undefined && this.#converter.format !== next.inputFormat) this.#converter = undefined;
    if (isTurnChanged) this.#resetDetector();
    this.#send({
      type: type === 'transcription_session.update' ? 'transcription_session.updated' : 'session.updated',
      session: this.#sessionObject(),
    });
  }

  #sessionObject(): Record<string, unknown> {
    return toSessionObject(this.#settings, { sessionId: this.#options.sessionId, shape: this.#options.shape });
  }

  #resetDetector(): void {
    const td = this.#settings.turnDetection;
    this.#detector = td === undefined ? undefined : createTurnDetector(td);
    this.#speechItemId = undefined;
  }

  async #append(audio: unknown): Promise<void> {
    if (!this.#isConfigured) throw errors.sessionNotConfigured();
    const format = this.#settings.inputFormat;
    const bytes = decodeAppend(audio, { format, maxAppendBytes: this.#options.maxAppendBytes });
    const maxSamples = (this.#options.maxBufferMs * INPUT_RATE_HZ) / 1000;
    const incoming = Math.ceil(((bytes.length / REALTIME_FORMAT_SAMPLE_BYTES[format]) * INPUT_RATE_HZ) / REALTIME_FORMAT_RATE_HZ[format]);
    if (this.#bufferSamples + incoming > maxSamples) throw errors.inputAudioBufferFull({ maxBufferMs: this.#options.maxBufferMs });
    this.#converter ??= createInputConverter(format, this.#deps.kernel);
    const samples = this.#converter.push(bytes);
    if (samples.length === 0) return;
    this.#buffer.push(samples);
    this.#bufferSamples += samples.length;
    this.#audioInSamples += samples.length;
    if (this.#detector !== undefined) await this.#detectTurns(samples);
    else this.#vadSamples += samples.length;
  }

  async #detectTurns(samples: Int16Array): Promise<void> {
    const values = await this.#vad.push(samples);
    const detector = this.#detector;
    const td = this.#settings.turnDetection;
    if (detector === undefined || td === undefined || this.#isClosed) return;
    const frameSamples = this.#vad.frameSamples;
    const frameMs = (frameSamples / INPUT_RATE_HZ) * 1000;
    const firstFrame = this.#vadSamples - (this.#vadSamples % frameSamples);
    this.#vadSamples += samples.length;
    for (let k = 0; k < values.length; k++) {
      const frameStart = firstFrame + k * frameSamples;
      const turn = detector.push(values[k]!, { frameStartMs: (frameStart / INPUT_RATE_HZ) * 1000, frameMs });
      if (turn?.type === 'speechStarted') {
        this.#speechItemId = newId('item');
        this.#partialAt = frameStart;
        this.#send({
          type: 'input_audio_buffer.speech_started',
          audio_start_ms: Math.round(turn.audioStartMs),
          item_id: this.#speechItemId,
        });
        this.#trimBuffer(Math.floor((turn.audioStartMs * INPUT_RATE_HZ) / 1000));
        const response = this.#response;
        if (response !== undefined && !response.isFinished && td.interruptResponse) this.#bargeIn(response);
      } else if (turn?.type === 'speechStopped') {
        const itemId = this.#speechItemId ?? newId('item');
        this.#speechItemId = undefined;
        // OpenAI's audio_end_ms is the end of the audio committed, the silence that ended the turn
        // included (the detector's audioEndMs is where that silence began): this frame's end.
        const frameEnd = frameStart + frameSamples;
        this.#send({
          type: 'input_audio_buffer.speech_stopped',
          audio_end_ms: Math.round((frameEnd / INPUT_RATE_HZ) * 1000),
          item_id: itemId,
        });
        const speechEndMs = this.#deps.clock.nowMs();
        // The frames after this one stay in the buffer for the next turn.
        const keep = this.#vadSamples - frameEnd;
        this.#commit(itemId, { speechEndMs, keepSamples: Math.max(0, keep) });
        if (this.#settings.kind === 'realtime' && td.createResponse) {
          const active = this.#response;
          if (active !== undefined && !active.isFinished) this.#hasTurnWaiting = true;
          else this.#startResponse({});
        }
      }
    }
    if (!detector.isSpeaking) {
      // Between turns only the prefix padding is kept.
      this.#trimBuffer(this.#bufferStart + this.#bufferSamples - Math.floor((td.prefixPaddingMs * INPUT_RATE_HZ) / 1000));
    } else {
      this.#maybePartial();
    }
  }

  /** Drops buffered audio before `fromSample` (session timeline). */
  #trimBuffer(fromSample: number): void {
    let drop = fromSample - this.#bufferStart;
    while (drop > 0 && this.#buffer.length > 0) {
      const head = this.#buffer[0]!;
      if (head.length <= drop) {
        this.#buffer.shift();
        drop -= head.length;
        this.#bufferSamples -= head.length;
        this.#bufferStart += head.length;
      } else {
        this.#buffer[0] = head.subarray(drop);
        this.#bufferSamples -= drop;
        this.#bufferStart += drop;
        drop = 0;
      }
    }
  }

  #clearBuffer(): void {
    this.#bufferStart += this.#bufferSamples;
    this.#buffer = [];
    this.#bufferSamples = 0;
    this.#detector?.reset();
    this.#speechItemId = undefined;
  }

  /** A client commit: refused below MIN_COMMIT_MS of audio, as OpenAI's is (server VAD commits are not held to it). */
  #commitByClient(): void {
    // The audio the resampler still holds is the client's too: 100 ms appended are 100 ms here.
    const bufferMs = ((this.#bufferSamples + (this.#converter?.heldSamples ?? 0)) * 1000) / INPUT_RATE_HZ;
    if (bufferMs < MIN_COMMIT_MS) throw errors.inputAudioBufferCommitEmpty({ bufferMs, minMs: MIN_COMMIT_MS });
    this.#detector?.reset();
    const itemId = this.#speechItemId ?? newId('item');
    this.#speechItemId = undefined;
    this.#commit(itemId, { speechEndMs: this.#deps.clock.nowMs(), keepSamples: 0 });
  }

  /** Turns the buffer (all of it but its last `keepSamples`) into a user item and starts its transcription. */
  #commit(itemId: string, context: { speechEndMs: number; keepSamples: number }): void {
    const all = concat(this.#buffer);
    const cut = Math.max(0, all.length - context.keepSamples);
    const audio = all.slice(0, cut);
    this.#buffer = cut < all.length ? [all.slice(cut)] : [];
    this.#bufferStart += cut;
    this.#bufferSamples = all.length - cut;
    const previous = this.#items.at(-1)?.id ?? null;
    const item: ConversationItem = { id: itemId, role: 'user', text: '' };
    this.#send({ type: 'input_audio_buffer.committed', item_id: itemId, previous_item_id: previous });
    const itemObject = {
      id: itemId,
      object: 'realtime.item',
      type: 'message',
      status: 'completed',
      role: 'user',
      content: [{ type: 'input_audio', transcript: null }],
    };
    this.#addItem(item, itemObject, previous);
    const turn: Turn = { speechEndMs: context.speechEndMs };
    this.#pendingTurn = turn;
    const isReported = this.#settings.kind === 'transcription' || this.#settings.transcriptionModel !== undefined;
    item.transcript = this.#transcribe(audio, 'high').then(
      (text) => {
        item.text = text;
        item.shown = { ...itemObject, content: [{ type: 'input_audio', transcript: text }] };
        turn.transcriptMs = this.#deps.clock.nowMs();
        this.#observe('transcript', turn.transcriptMs - context.speechEndMs);
        if (isReported && !this.#isClosed) {
          this.#send({
            type: 'conversation.item.input_audio_transcription.completed',
            item_id: itemId,
            content_index: 0,
            transcript: text,
            usage: transcriptionUsage(audio.length),
          });
        }
        return text;
      },
      (err: unknown) => this.#transcriptionFailed(err, itemId, isReported),
    );
  }

  /** A failed transcription of an item's audio: the failed event when the item's transcripts are
   * reported (not for a cancelled one); the item then counts as saying nothing. */
  #transcriptionFailed(err: unknown, itemId: string, isReported: boolean): string {
    const error = toServiceError(err, { maxBodyBytes: 0, contentType: undefined });
    if (isReported && error.kind !== 'cancelled' && !this.#isClosed) {
      this.#send({
        type: 'conversation.item.input_audio_transcription.failed',
        item_id: itemId,
        content_index: 0,
        error: { type: 'transcription_error', code: error.code, message: error.message, param: null },
      });
    }
    return '';
  }

  /** A partial transcript of the utterance so far, each partialIntervalMs of new speech, one at a time. */
  #maybePartial(): void {
    const intervalSamples = (this.#options.partialIntervalMs * INPUT_RATE_HZ) / 1000;
    const itemId = this.#speechItemId;
    const isReported = this.#settings.kind === 'transcription' || this.#settings.transcriptionModel !== undefined;
    if (intervalSamples === 0 || itemId === undefined || !isReported || this.#isPartialRunning) return;
    const end = this.#bufferStart + this.#bufferSamples;
    if (end - this.#partialAt < intervalSamples) return;
    this.#partialAt = end;
    this.#isPartialRunning = true;
    const audio = concat(this.#buffer);
    void this.#transcribe(audio, 'normal')
      .then((text) => {
        const before = this.#partials.get(itemId) ?? '';
        // A delta only extends what was sent: a hypothesis that revises it waits for the final transcript.
        if (this.#isClosed || !text.startsWith(before) || text.length === before.length) return;
        if (this.#items.some((i) => i.id === itemId && i.text !== '')) return;
        this.#partials.set(itemId, text);
        this.#send({
          type: 'conversation.item.input_audio_transcription.delta',
          item_id: itemId,
          content_index: 0,
          delta: text.slice(before.length),
        });
      })
      .catch(() => undefined)
      .finally(() => (this.#isPartialRunning = false));
  }

  async #transcribe(audio: Int16Array, priority: 'high' | 'normal'): Promise<string> {
    const requestId = newId('req');
    let busy: { instanceId: string; atMs: number } | undefined;
    try {
      return await this.#deps.transcribe(audio, {
        priority,
        language: this.#settings.language ?? null,
        prompt: this.#settings.transcriptionPrompt ?? null,
        signal: this.#closed.signal,
        timeoutMs: this.#options.turnTimeoutMs,
        requestId,
        onDispatched: (dispatch) => (busy = { instanceId: dispatch.instanceId, atMs: this.#deps.clock.nowMs() }),
      });
    } finally {
      this.#noteBusy(busy);
    }
  }

  #noteBusy(busy: { instanceId: string; atMs: number } | undefined): void {
    if (busy !== undefined && this.#deps.instanceGpu(busy.instanceId) !== undefined) this.#gpuMs += this.#deps.clock.nowMs() - busy.atMs;
  }

  /** Adds an item after `previous` (null: first), at the end unless `at` says where. */
  #addItem(item: ConversationItem, itemObject: Record<string, unknown>, previous: string | null, at = this.#items.length): void {
    this.#items.splice(at, 0, item);
    item.shown = itemObject;
    if (this.#items.length > MAX_ITEMS) {
      const dropped = this.#items.shift()!;
      this.#spoken.delete(dropped.id);
      this.#partials.delete(dropped.id);
    }
    this.#send({ type: 'conversation.item.added', previous_item_id: previous, item: itemObject });
    this.#send({ type: 'conversation.item.done', previous_item_id: previous, item: itemObject });
  }

  /**
   * Where conversation.item.create puts its item: after previous_item_id (`root`: first), at the
   * end without one.
   * @throws item_not_found (previous_item_id names no item)
   */
  #insertionPoint(previousItemId: unknown): { at: number; previous: string | null } {
    if (previousItemId === undefined || previousItemId === null)
      return { at: this.#items.length, previous: this.#items.at(-1)?.id ?? null };
    if (previousItemId === 'root') return { at: 0, previous: null };
    const at = this.#items.findIndex((i) => i.id === previousItemId);
    if (at < 0) throw errors.itemNotFound({ itemId: previousItemId, param: 'previous_item_id' });
    return { at: at + 1, previous: this.#items[at]!.id };
  }

  #createItem(event: Record<string, unknown>): void {
    const item = event.item;
    if (!isRecord(item)) throw errors.missingParameter({ param: 'item' });
    const place = this.#insertionPoint(event.previous_item_id);
    if (item.type === 'function_call_output') return this.#addFunctionOutput(item, place);
    if (item.type !== 'message') {
      throw errors.invalidParameter({ param: 'item.type', expected: "'message' or 'function_call_output'", got: item.type });
    }
    const role = item.role;
    if (role !== 'user' && role !== 'assistant' && role !== 'system') {
      throw errors.invalidParameter({ param: 'item.role', expected: "'user', 'assistant' or 'system'", got: role });
    }
    const content = Array.isArray(item.content) ? (item.content as unknown[]) : [];
    // Each part's text: a text part's own, an audio part's transcript (given, or transcribed here).
    const texts: (string | Int16Array)[] = [];
    for (const part of content) {
      if (isRecord(part) && part.type === 'input_audio' && role === 'user') {
        if (typeof part.transcript === 'string' && part.transcript !== '') texts.push(part.transcript);
        else texts.push(this.#decodeAudioPart(part.audio));
        continue;
      }
      if (!isRecord(part) || typeof part.text !== 'string' || !['input_text', 'text', 'output_text'].includes(String(part.type))) {
        throw errors.invalidParameter({
          param: 'item.content',
          expected: 'text parts (input_text, text or output_text), or input_audio parts of a user item',
          got: isRecord(part) && typeof part.audio === 'string' ? { ...part, audio: `(${part.audio.length} characters)` } : part,
        });
      }
      texts.push(part.text);
    }
    const id = typeof item.id === 'string' && item.id !== '' ? item.id : newId('item');
    const audio = texts.filter((t): t is Int16Array => typeof t !== 'string');
    const conversationItem: ConversationItem = { id, role, text: texts.filter((t) => typeof t === 'string').join(' ') };
    // The audio is not echoed back: its parts are listed with their transcript, null until it is final.
    const shown = content.map((part) =>
      isRecord(part) && part.type === 'input_audio' ? { type: 'input_audio', transcript: part.transcript ?? null } : part,
    );
    const itemObject = { id, object: 'realtime.item', type: 'message', status: 'completed', role, content: shown };
    this.#addItem(conversationItem, itemObject, place.previous, place.at);
    if (audio.length === 0) return;
    const isReported = this.#settings.kind === 'transcription' || this.#settings.transcriptionModel !== undefined;
    conversationItem.transcript = Promise.all(audio.map((a) => this.#transcribe(a, 'high'))).then(
      (transcripts) => {
        let next = 0;
        conversationItem.text = texts
          .map((t) => (typeof t === 'string' ? t : transcripts[next++]!))
          .join(' ')
          .trim();
        const transcript = transcripts.join(' ');
        if (isReported && !this.#isClosed) {
          const samples = audio.reduce((n, a) => n + a.length, 0);
          this.#send({
            type: 'conversation.item.input_audio_transcription.completed',
            item_id: id,
            content_index: 0,
            transcript,
            usage: transcriptionUsage(samples),
          });
        }
        return transcript;
      },
      (err: unknown) => this.#transcriptionFailed(err, id, isReported),
    );
  }

  /** An input_audio part's audio: base64 in the session's input format, as 16 kHz samples. */
  #decodeAudioPart(audio: unknown): Int16Array {
    if (!this.#isConfigured) throw errors.sessionNotConfigured();
    const format = this.#settings.inputFormat;
    const bytes = decodeAppend(audio, { format, maxAppendBytes: this.#options.maxAppendBytes });
    return createInputConverter(format, this.#deps.kernel).push(bytes);
  }

  /** A function's result, for a later response.create to give the LLM. */
  #addFunctionOutput(item: Record<string, unknown>, place: { at: number; previous: string | null }): void {
    if (typeof item.call_id !== 'string' || item.call_id === '') throw errors.missingParameter({ param: 'item.call_id' });
    if (typeof item.output !== 'string') throw errors.invalidParameter({ param: 'item.output', expected: 'a string', got: item.output });
    const id = typeof item.id === 'string' && item.id !== '' ? item.id : newId('item');
    this.#addItem(
      { id, role: 'tool', text: item.output, callId: item.call_id },
      { id, object: 'realtime.item', type: 'function_call_output', status: 'completed', call_id: item.call_id, output: item.output },
      place.previous,
      place.at,
    );
  }

  #deleteItem(itemId: unknown): void {
    const at = this.#items.findIndex((i) => i.id === itemId);
    if (at < 0) throw errors.itemNotFound({ itemId });
    this.#items.splice(at, 1);
    this.#send({ type: 'conversation.item.deleted', item_id: itemId });
  }

  /** conversation.item.retrieve: the item as it now is (an assistant message with the text it kept). */
  #retrieveItem(itemId: unknown): void {
    const item = this.#items.find((i) => i.id === itemId);
    if (item?.shown === undefined) throw errors.itemNotFound({ itemId });
    let shown = item.shown;
    if (item.toolCall !== undefined) shown = functionCallObject({ ...item, toolCall: item.toolCall }, String(shown.status));
    else if (this.#spoken.has(item.id) && Array.isArray(shown.content)) {
      // A response's message: the text it kept (a truncation keeps the sentences heard).
      const content = (shown.content as Record<string, unknown>[]).map((part) =>
        'transcript' in part ? { ...part, transcript: item.text } : { ...part, text: item.text },
      );
      shown = { ...shown, content };
    }
    this.#send({ type: 'conversation.item.retrieved', item: shown });
  }

  #truncateByClient(event: Record<string, unknown>): void {
    const item = this.#items.find((i) => i.id === event.item_id);
    if (item === undefined || item.role !== 'assistant') throw errors.itemNotFound({ itemId: event.item_id });
    const audioEndMs = event.audio_end_ms;
    const spoken = this.#spoken.get(item.id);
    const totalMs = spoken?.sentMs ?? 0;
    if (typeof audioEndMs !== 'number' || !Number.isFinite(audioEndMs) || audioEndMs < 0 || audioEndMs > totalMs) {
      throw errors.invalidParameter({ param: 'audio_end_ms', expected: `milliseconds from 0 to ${Math.round(totalMs)}`, got: audioEndMs });
    }
    if (spoken !== undefined) item.text = heardText(spoken.sentences, audioEndMs);
    this.#send({ type: 'conversation.item.truncated', item_id: item.id, content_index: 0, audio_end_ms: Math.round(audioEndMs) });
  }

  // ------------------------------------------------------------------------------------------
  // responses

  #createResponse(overrides: unknown): void {
    if (this.#settings.kind === 'transcription') {
      throw errors.invalidParameter({ param: 'type', expected: 'no response.create in a transcription session', got: 'response.create' });
    }
    this.#startResponse(parseResponseOverrides(overrides));
  }

  #startResponse(overrides: ReturnType<typeof parseResponseOverrides>): void {
    const active = this.#response;
    if (active !== undefined && !active.isFinished) throw errors.conversationAlreadyHasActiveResponse({ responseId: active.id });
    const modality: 'audio' | 'text' = (overrides.outputModalities ?? this.#settings.outputModalities).includes('audio') ? 'audio' : 'text';
    const response: Response = {
      id: newId('resp'),
      itemId: newId('item'),
      abort: new AbortController(),
      isFinished: false,
      modality,
      instructions: overrides.instructions ?? this.#settings.instructions,
      text: '',
      sentences: [],
      sentMs: 0,
      firstAudioAtMs: undefined,
      turn: this.#pendingTurn ?? {},
      responder: 'fallback',
      usage: { inputTokens: 0, outputTokens: 0 },
      speaking: undefined,
      calls: new Map(),
      isAnnounced: false,
      isCut: false,
    };
    this.#pendingTurn = undefined;
    this.#response = response;
    this.#turns += 1;
    this.#send({ type: 'response.created', response: this.#responseObject(response, 'in_progress') });
    this.#runResponse(response).catch((err: unknown) => {
      const error = toServiceError(err, { maxBodyBytes: 0, contentType: undefined });
      if (response.isFinished || error.kind === 'cancelled') return;
      this.#deps.log.warn({ sessionId: this.#options.sessionId, code: error.code, err: error.cause ?? err }, 'realtime response failed');
      response.isFinished = true;
      response.abort.abort();
      this.#deps.metrics.realtimeTurns.inc({ responder: response.responder, outcome: 'failed' });
      this.#closeItems(response);
      this.#sendResponseDone({
        ...this.#responseObject(response, 'failed'),
        status_details: { type: 'failed', error: { type: 'server_error', code: error.code } },
      });
      this.#answerWaitingTurn();
    });
  }

  /** The response object of response.created and response.done, in the client's shape (GA nested, beta flat). */
  #responseObject(response: Response, status: string): Record<string, unknown> {
    const settings = this.#settings;
    const shaped =
      this.#options.shape === 'beta'
        ? {
            modalities: response.modality === 'audio' ? ['audio', 'text'] : ['text'],
            voice: settings.voice,
            output_audio_format: settings.outputFormat,
            temperature: 0.8,
          }
        : {
            output_modalities: [response.modality],
            audio: { output: { format: gaFormatObject(settings.outputFormat), voice: settings.voice } },
          };
    return {
      object: 'realtime.response',
      id: response.id,
      status,
      status_details: null,
      output:
        status === 'in_progress'
          ? []
          : [
              ...(response.isAnnounced ? [this.#assistantItem(response, status === 'completed' ? 'completed' : 'incomplete')] : []),
              ...[...response.calls.values()].map((c) => functionCallObject(c.item, status === 'completed' ? 'completed' : 'incomplete')),
            ],
      conversation_id: this.#options.sessionId,
      ...shaped,
      max_output_tokens: settings.maxOutputTokens,
      usage: status === 'in_progress' ? null : toUsage(response),
      metadata: null,
    };
  }

  /** The response's message item; its part is output_audio or output_text (beta: audio or text). */
  #assistantItem(response: Response, status: string): Record<string, unknown> {
    const prefix = this.#options.shape === 'beta' ? '' : 'output_';
    const part =
      response.modality === 'audio'
        ? { type: `${prefix}audio`, transcript: response.text }
        : { type: `${prefix}text`, text: response.text };
    return { id: response.itemId, object: 'realtime.item', type: 'message', status, role: 'assistant', content: [part] };
  }

  /** Sends an event of `response` unless it has finished (cancelled): nothing of a response follows its response.done. */
  #sendFor(response: Response, event: ServerEvent): boolean {
    if (response.isFinished || this.#isClosed) return false;
    this.#send(event);
    return true;
  }

  async #runResponse(response: Response): Promise<void> {
    const deps = this.#deps;
    const ids = { response_id: response.id, item_id: response.itemId, output_index: 0, content_index: 0 };
    const previous = this.#items.at(-1)?.id ?? null;
    // The user's words are needed before the LLM: wait for every user item's final transcript (an
    // earlier, longer turn may still be transcribed after the last one). Transcripts never reject.
    await Promise.all(this.#items.filter((i) => i.role === 'user' && i.transcript !== undefined).map((i) => i.transcript));
    if (response.isFinished) return;
    const assistant: ConversationItem = { id: response.itemId, role: 'assistant', text: '' };
    this.#items.push(assistant);
    const spoken = { sentences: response.sentences, sentMs: 0 };
    this.#spoken.set(response.itemId, spoken);
    const inProgress = this.#assistantItem(response, 'in_progress');
    response.isAnnounced = this.#sendFor(response, {
      type: 'response.output_item.added',
      response_id: response.id,
      output_index: 0,
      item: inProgress,
    });
    if (response.isAnnounced) assistant.shown = inProgress;
    this.#sendFor(response, { type: 'conversation.item.added', previous_item_id: previous, item: inProgress });
    const partType = response.modality === 'audio' ? 'audio' : 'text';
    this.#sendFor(response, {
      type: 'response.content_part.added',
      ...ids,
      part: partType === 'audio' ? { type: 'audio', transcript: '' } : { type: 'text', text: '' },
    });

    const messages: ChatMessage[] = [{ role: 'system', content: response.instructions }, ...toChatMessages(this.#items, assistant)];
    let responder: ChatResponder | undefined;
    if (deps.llm === undefined) {
      responder = deps.demo;
      response.responder = 'demo';
    } else {
      const admission = deps.gate.admit();
      if (admission === 'allowed') {
        responder = deps.llm;
        response.responder = 'llm';
      } else {
        deps.log.info(
          { sessionId: this.#options.sessionId, responseId: response.id, reason: admission },
          'llm call refused: fallback reply',
        );
      }
    }
    const cutter = createSentenceCutter();
    let speaking: Promise<void> = Promise.resolve();
    // The first sentence whose speech failed: it stops the LLM and fails the response. Caught as
    // each sentence is queued, as the LLM may still stream for a while (a rejection nobody awaits
    // would end the process).
    let speechError: unknown;
    const say = (sentence: string) => {
      if (response.modality !== 'audio') return;
      speaking = speaking
        .then(() => (speechError === undefined ? this.#speakSentence(response, sentence, spoken) : undefined))
        .catch((err: unknown) => {
          speechError ??= err;
          response.abort.abort(err);
        });
    };
    const addText = (text: string) => {
      if (response.turn.firstTokenMs === undefined) {
        response.turn.firstTokenMs = deps.clock.nowMs();
        if (response.turn.transcriptMs !== undefined)
          this.#observe('llm_first_token', response.turn.firstTokenMs - response.turn.transcriptMs);
      }
      response.text += text;
      assistant.text = response.text;
      this.#sendFor(response, {
        type: response.modality === 'audio' ? 'response.output_audio_transcript.delta' : 'response.output_text.delta',
        ...ids,
        delta: text,
      });
      for (const sentence of cutter.push(text)) say(sentence);
    };
    if (responder === undefined) {
      addText(this.#options.fallbackText);
    } else {
      const isLlm = response.responder === 'llm';
      let hasUsage = false;
      try {
        const maxOutputTokens =
          this.#settings.maxOutputTokens === 'inf'
            ? this.#options.maxOutputTokens
            : Math.min(this.#settings.maxOutputTokens, this.#options.maxOutputTokens);
        const { tools, toolChoice } = this.#settings;
        for await (const piece of responder.stream(messages, { signal: response.abort.signal, maxOutputTokens, tools, toolChoice })) {
          if (response.isFinished) break;
          if (piece.type === 'text') addText(piece.text);
          else if (piece.type === 'tool_call') this.#streamFunctionCall(response, piece);
          else if (piece.type === 'cut') response.isCut = true;
          else {
            response.usage = piece.usage;
            hasUsage = true;
          }
        }
      } catch (err) {
        if (response.isFinished) return;
        if (speechError !== undefined) throw speechError;
        const error = toServiceError(err, { maxBodyBytes: 0, contentType: undefined });
        deps.log.warn(
          { sessionId: this.#options.sessionId, responseId: response.id, code: error.code, err: error.cause ?? err },
          'llm failed: fallback reply',
        );
        this.#sendError(error, undefined);
        response.responder = 'fallback';
        addText(response.text === '' ? this.#options.fallbackText : ` ${this.#options.fallbackText}`);
      } finally {
        // Every LLM call counts against the day's budget, one cut short (cancelled, barge-in,
        // failed) at the tokens it was sent and had streamed so far.
        if (isLlm) {
          if (!hasUsage)
            response.usage = {
              inputTokens: estimateTokens(messages.map((m) => m.content).join(' ')),
              outputTokens: estimateTokens(response.text),
            };
          this.#priceLlmTurn(response);
        }
      }
    }
    for (const sentence of cutter.flush()) say(sentence);
    await speaking;
    if (speechError !== undefined) throw speechError;
    if (response.isFinished) return;
    response.isFinished = true;
    const send = (event: ServerEvent) => !this.#isClosed && this.#send(event);
    if (response.modality === 'audio') {
      send({ type: 'response.output_audio.done', ...ids });
      send({ type: 'response.output_audio_transcript.done', ...ids, transcript: response.text });
      send({ type: 'response.content_part.done', ...ids, part: { type: 'audio', transcript: response.text } });
    } else {
      send({ type: 'response.output_text.done', ...ids, text: response.text });
      send({ type: 'response.content_part.done', ...ids, part: { type: 'text', text: response.text } });
    }
    // A reply cut at max_output_tokens ends incomplete, as OpenAI's does.
    const status = response.isCut ? 'incomplete' : 'completed';
    const done = this.#assistantItem(response, status);
    assistant.shown = done;
    send({ type: 'response.output_item.done', response_id: response.id, output_index: 0, item: done });
    send({ type: 'conversation.item.done', previous_item_id: previous, item: done });
    for (const { item, outputIndex } of response.calls.values()) {
      const call = item.toolCall;
      send({
        type: 'response.function_call_arguments.done',
        response_id: response.id,
        item_id: item.id,
        output_index: outputIndex,
        call_id: call.id,
        name: call.name,
        arguments: call.arguments,
      });
      const object = functionCallObject(item, status);
      item.shown = object;
      send({ type: 'response.output_item.done', response_id: response.id, output_index: outputIndex, item: object });
      send({ type: 'conversation.item.done', previous_item_id: null, item: object });
    }
    this.#sendResponseDone({
      ...this.#responseObject(response, status),
      ...(response.isCut ? { status_details: { type: 'incomplete', reason: 'max_output_tokens' } } : {}),
    });
    deps.metrics.realtimeTurns.inc({ responder: response.responder, outcome: 'completed' });
    this.#answerWaitingTurn();
  }

  /** A response ended: a turn that ended while it ran (interrupt_response false) gets its answer now. */
  #answerWaitingTurn(): void {
    if (!this.#hasTurnWaiting || this.#isClosed) return;
    this.#hasTurnWaiting = false;
    this.#startResponse({});
  }

  /** Charges an LLM turn's usage to the day's budget, the session's totals and the metrics. */
  #priceLlmTurn(response: Response): void {
    const deps = this.#deps;
    const costUsd = deps.gate.record(response.usage);
    this.#llmCostUsd += costUsd;
    this.#llmUsage.inputTokens += response.usage.inputTokens;
    this.#llmUsage.outputTokens += response.usage.outputTokens;
    deps.metrics.realtimeLlmTokens.inc({ direction: 'input' }, response.usage.inputTokens);
    deps.metrics.realtimeLlmTokens.inc({ direction: 'output' }, response.usage.outputTokens);
    deps.metrics.realtimeLlmCost.inc(costUsd);
    deps.metrics.realtimeLlmTurnsRemaining.set(deps.gate.snapshot().turnsRemaining ?? -1);
    deps.log.info(
      {
        sessionId: this.#options.sessionId,
        responseId: response.id,
        inputTokens: response.usage.inputTokens,
        outputTokens: response.usage.outputTokens,
        costUsd,
      },
      'llm turn priced',
    );
  }

  /** A piece of a function call the LLM streams: the call's item when it starts, then its arguments as deltas. */
  #streamFunctionCall(response: Response, piece: { index: number; id?: string; name?: string; arguments?: string }): void {
    let call = response.calls.get(piece.index);
    if (call === undefined) {
      const previous = this.#items.at(-1)?.id ?? null;
      const item = {
        id: newId('item'),
        role: 'assistant' as const,
        text: '',
        toolCall: { id: piece.id ?? newId('call'), name: piece.name ?? '', arguments: '' },
      };
      call = { item, outputIndex: response.calls.size + 1 };
      response.calls.set(piece.index, call);
      this.#items.push(item);
      const object = functionCallObject(item, 'in_progress');
      (item as ConversationItem).shown = object;
      this.#sendFor(response, {
        type: 'response.output_item.added',
        response_id: response.id,
        output_index: call.outputIndex,
        item: object,
      });
      this.#sendFor(response, { type: 'conversation.item.added', previous_item_id: previous, item: object });
    } else if (piece.name !== undefined && call.item.toolCall.name === '') {
      call.item.toolCall.name = piece.name;
    }
    if (piece.arguments === undefined || piece.arguments === '') return;
    call.item.toolCall.arguments += piece.arguments;
    this.#sendFor(response, {
      type: 'response.function_call_arguments.delta',
      response_id: response.id,
      item_id: call.item.id,
      output_index: call.outputIndex,
      call_id: call.item.toolCall.id,
      delta: piece.arguments,
    });
  }

  /** Synthesizes one sentence and sends its audio as it comes. */
  async #speakSentence(response: Response, sentence: string, spoken: { sentences: SentenceAudio[]; sentMs: number }): Promise<void> {
    if (response.isFinished) return;
    const deps = this.#deps;
    const format = this.#settings.outputFormat;
    const converter = createOutputConverter(format, deps.kernel);
    response.sentences.push({ text: sentence, startMs: response.sentMs });
    let busy: { instanceId: string; atMs: number } | undefined;
    const stream = await deps.speak(sentence, {
      voice: this.#settings.voice,
      speed: this.#settings.speed,
      signal: response.abort.signal,
      timeoutMs: this.#options.turnTimeoutMs,
      requestId: newId('req'),
      onDispatched: (dispatch) => (busy = { instanceId: dispatch.instanceId, atMs: deps.clock.nowMs() }),
    });
    if (response.isFinished) {
      // Cancelled while the speech model woke.
      stream.cancel();
      return;
    }
    response.speaking = stream;
    const sendAudio = (bytes: Uint8Array) => {
      if (bytes.length === 0 || response.isFinished) return;
      const nowMs = deps.clock.nowMs();
      if (response.firstAudioAtMs === undefined) {
        response.firstAudioAtMs = nowMs;
        const turn = response.turn;
        turn.firstAudioMs = nowMs;
        if (turn.firstTokenMs !== undefined) this.#observe('first_audio', nowMs - turn.firstTokenMs);
        if (turn.speechEndMs !== undefined) this.#observe('end_to_first_audio', nowMs - turn.speechEndMs);
      } else if (nowMs > response.firstAudioAtMs + response.sentMs + STALL_TOLERANCE_MS) {
        // The audio sent so far has finished playing: the listener hears a gap.
        this.#stalls += 1;
        deps.metrics.realtimeAudioStalls.inc();
      }
      this.#hasAssistantAudio = true;
      this.#sendFor(response, {
        type: 'response.output_audio.delta',
        response_id: response.id,
        item_id: response.itemId,
        output_index: 0,
        content_index: 0,
        delta: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64'),
      });
      response.sentMs += audioMs(bytes.length, format);
      this.#audioOutMs += audioMs(bytes.length, format);
      spoken.sentMs = response.sentMs;
    };
    try {
      for await (const chunk of stream) {
        if (response.isFinished) break;
        const rateHz = chunk.meta.sampleRate;
        if (typeof rateHz !== 'number' || !Number.isInteger(rateHz) || rateHz <= 0) {
          throw errors.internal({
            cause: new Error(`Expected a stream chunk's meta.sampleRate to be a positive integer: got ${String(rateHz)}`),
          });
        }
        sendAudio(converter.push(pcm16LittleEndian(chunk.bytes, 0, chunk.bytes.length >> 1), rateHz));
      }
      if (!response.isFinished) sendAudio(converter.flush());
    } catch (err) {
      if (response.isFinished) return;
      throw err;
    } finally {
      stream.cancel();
      response.speaking = undefined;
      this.#noteBusy(busy);
    }
  }

  #bargeIn(response: Response): void {
    this.#finishCancelled(response, 'turn_detected');
  }

  /** `responseId`: the response the client names (OpenAI's optional response_id); another one is not cancelled. */
  #cancelByClient(responseId: unknown): void {
    const response = this.#response;
    if (response === undefined || response.isFinished) throw errors.responseCancelNotActive();
    if (typeof responseId === 'string' && responseId !== response.id) throw errors.responseCancelNotActive();
    this.#finishCancelled(response, 'client_cancelled');
  }

  /** The items a response announced, done as incomplete (it was cancelled or failed): its message and its function calls. */
  #closeItems(response: Response): void {
    if (response.isAnnounced) {
      const item = this.#assistantItem(response, 'incomplete');
      const assistant = this.#items.find((i) => i.id === response.itemId);
      if (assistant !== undefined) assistant.shown = item;
      this.#send({ type: 'response.output_item.done', response_id: response.id, output_index: 0, item });
      this.#send({ type: 'conversation.item.done', item });
    }
    for (const { item, outputIndex } of response.calls.values()) {
      const object = functionCallObject(item, 'incomplete');
      item.shown = object;
      this.#send({ type: 'response.output_item.done', response_id: response.id, output_index: outputIndex, item: object });
      this.#send({ type: 'conversation.item.done', item: object });
    }
  }

  /**
   * Cancels a response now: it is marked finished first, so no event of it (audio above all)
   * can follow the response.done sent here; then the LLM request and the speech stream are aborted.
   */
  #finishCancelled(response: Response, reason: 'turn_detected' | 'client_cancelled'): void {
    response.isFinished = true;
    response.abort.abort(errors.streamCancelled({ requestId: response.id }));
    response.speaking?.cancel();
    const nowMs = this.#deps.clock.nowMs();
    // What the client can have played: audio plays in real time from its first delta.
    const playedMs = response.firstAudioAtMs === undefined ? 0 : Math.min(response.sentMs, nowMs - response.firstAudioAtMs);
    const assistant = this.#items.find((i) => i.id === response.itemId);
    if (response.modality === 'audio' && assistant !== undefined) {
      response.text = heardText(response.sentences, playedMs);
      assistant.text = response.text;
    }
    this.#deps.metrics.realtimeTurns.inc({ responder: response.responder, outcome: 'cancelled' });
    if (this.#isClosed) return;
    this.#closeItems(response);
    this.#sendResponseDone({ ...this.#responseObject(response, 'cancelled'), status_details: { type: 'cancelled', reason } });
    if (reason === 'turn_detected' && assistant !== undefined && response.modality === 'audio') {
      this.#send({ type: 'conversation.item.truncated', item_id: response.itemId, content_index: 0, audio_end_ms: Math.round(playedMs) });
    }
    this.#answerWaitingTurn();
  }

  // ------------------------------------------------------------------------------------------
  // output

  #observe(stage: TurnStage, ms: number): void {
    this.#turnStages[stage].push(ms);
    this.#deps.metrics.realtimeTurnStage.observe({ stage }, ms / 1000);
  }

  #send(event: ServerEvent): void {
    if (this.#isClosed) return;
    this.#deps.send({ ...event, event_id: newId('event') });
  }

  /** response.done, then rate_limits.updated, which OpenAI sends after each response.done. */
  #sendResponseDone(response: Record<string, unknown>): void {
    this.#send({ type: 'response.done', response });
    this.#send({ type: 'rate_limits.updated', rate_limits: toRateLimits(this.#deps.gate.snapshot()) });
  }

  #sendError(error: ServiceError, clientEventId: string | undefined): void {
    if (error.kind === 'internal')
      this.#deps.log.error({ sessionId: this.#options.sessionId, code: error.code, err: error.cause ?? error }, 'realtime event failed');
    this.#send({ type: 'error', error: toRealtimeErrorBody(error, clientEventId) });
  }
}

/** The sentences whose audio started before `playedMs`: what the listener heard (a started sentence counts whole). */
export function heardText(sentences: readonly SentenceAudio[], playedMs: number): string {
  return sentences
    .filter((s) => s.startMs < playedMs)
    .map((s) => s.text)
    .join(' ');
}

/** `usage` of a completed input transcription: the seconds of audio transcribed (16 kHz samples). */
function transcriptionUsage(samples: number): { type: 'duration'; seconds: number } {
  return { type: 'duration', seconds: Math.round((samples / INPUT_RATE_HZ) * 100) / 100 };
}

function toUsage(response: Response): RealtimeResponseUsage {
  const { inputTokens, outputTokens } = response.usage;
  return {
    total_tokens: inputTokens + outputTokens,
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    input_token_details: { text_tokens: inputTokens, audio_tokens: 0, cached_tokens: 0 },
    output_token_details: { text_tokens: outputTokens, audio_tokens: 0 },
  };
}
