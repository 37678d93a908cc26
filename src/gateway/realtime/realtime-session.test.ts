import assert from 'node:assert/strict';
import { setImmediate as tick, setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fake-clock.js';
import { silentLogger } from '../../../test/support/test-logger.js';
import { errors } from '../../core/error-catalog.js';
import type { StreamCall, StreamChunk } from '../../scheduler/index.js';
import { createMetrics } from '../../telemetry/metrics.js';
import { createFirKernel } from '../audio/fir-kernel.js';
import { framedStream } from '../pieces/voice-activity.js';
import type { ChatMessage, ChatResponder } from './chat-responder.js';
import { createDemoResponder } from './demo-responder.js';
import { createLlmGate } from './llm-gate.js';
import { createRealtimeSession, type RealtimeSessionDeps, type ServerEvent } from './realtime-session.js';
import { newSessionSettings } from './session-config.js';

/** A speech stream whose chunks the test releases one by one. */
function gatedStream() {
  const chunks: StreamChunk[] = [];
  let wake: (() => void) | undefined;
  let isEnded = false;
  const state = { isCancelled: false };
  const call: StreamCall = {
    done: new Promise(() => {}),
    cancel: () => {
      state.isCancelled = true;
      wake?.();
    },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        if (state.isCancelled) return;
        const next = chunks.shift();
        if (next !== undefined) {
          yield next;
          continue;
        }
        if (isEnded) return;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
  return {
    call,
    state,
    push(samples: number) {
      chunks.push({ index: 0, meta: { sampleRate: 24000 }, bytes: new Uint8Array(samples * 2).fill(1) });
      wake?.();
    },
    end() {
      isEnded = true;
      wake?.();
    },
  };
}

function harness(
  options: {
    partialIntervalMs?: number;
    llm?: ChatResponder;
    transcribeError?: Error;
    transcribe?: RealtimeSessionDeps['transcribe'];
    speak?: RealtimeSessionDeps['speak'];
    shape?: 'ga' | 'beta';
    /** The LLM's daily budget, in US dollars, at 1 US dollar per million tokens in and out (0: no limit). */
    dailyBudgetUsd?: number;
  } = {},
) {
  const events: ServerEvent[] = [];
  const clock = new FakeClock();
  const streams: ReturnType<typeof gatedStream>[] = [];
  const transcribed: { samples: number; priority: string }[] = [];
  const gate = createLlmGate(
    options.dailyBudgetUsd === undefined
      ? { isBlocked: false, dailyBudgetUsd: 0, inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }
      : { isBlocked: false, dailyBudgetUsd: options.dailyBudgetUsd, inputUsdPerMillionTokens: 1, outputUsdPerMillionTokens: 1 },
    { clock },
  );
  const deps: RealtimeSessionDeps = {
    send: (event) => events.push(event),
    // One word per 100 ms of audio: a growing utterance gets a growing transcript.
    transcribe: async (audio, work) => {
      transcribed.push({ samples: audio.length, priority: work.priority });
      if (options.transcribe !== undefined) return options.transcribe(audio, work);
      if (options.transcribeError !== undefined) throw options.transcribeError;
      return Array.from({ length: Math.floor(audio.length / 1600) }, (_, i) => `w${i}`).join(' ');
    },
    speak: (text, work) => {
      if (options.speak !== undefined) return options.speak(text, work);
      const stream = gatedStream();
      streams.push(stream);
      return stream.call;
    },
    llm: options.llm,
    demo: createDemoResponder(),
    gate,
    // Speech is any frame that is not all zeros.
    openVad: () => framedStream(512, (frame) => (frame.some((s) => s !== 0) ? 1 : 0)),
    kernel: createFirKernel(),
    instanceGpu: () => undefined,
    clock,
    log: silentLogger(),
    metrics: createMetrics(),
  };
  const session = createRealtimeSession(
    {
      sessionId: 'sess_test',
      shape: options.shape ?? 'ga',
      settings: newSessionSettings({ kind: 'realtime', model: 'gpt-realtime', instructions: 'Be brief.' }),
      maxAppendBytes: 1 << 20,
      maxBufferMs: 60_000,
      partialIntervalMs: options.partialIntervalMs ?? 0,
      turnTimeoutMs: 10_000,
      fallbackText: 'Fallback.',
      maxOutputTokens: 100,
      gpuHourUsd: 0,
    },
    deps,
  );
  const send = (event: Record<string, unknown>) => session.receive(JSON.stringify(event));
  /** 100 ms of 24 kHz audio: speech (a tone) or silence. */
  const append = (kind: 'speech' | 'silence', count = 1) => {
    for (let i = 0; i < count; i++) {
      const samples = new Int16Array(2400);
      if (kind === 'speech') for (let j = 0; j < samples.length; j++) samples[j] = Math.round(Math.sin(j / 3) * 8000);
      send({ type: 'input_audio_buffer.append', audio: Buffer.from(samples.buffer).toString('base64') });
    }
  };
  const settle = async () => {
    for (let i = 0; i < 50; i++) await tick();
  };
  return { events, clock, streams, transcribed, gate, session, send, append, settle, types: () => events.map((e) => e.type) };
}

/** An LLM that answers 'Ok.' and keeps the messages of each request. */
function recordingLlm(): { seen: ChatMessage[][]; llm: ChatResponder } {
  const seen: ChatMessage[][] = [];
  const llm: ChatResponder = {
    kind: 'llm',
    async *stream(messages) {
      seen.push([...messages]);
      yield { type: 'text', text: 'Ok.' };
    },
  };
  return { seen, llm };
}

const CONFIGURE = { type: 'session.update', session: { type: 'realtime', audio: { input: { transcription: { model: 'whisper-1' } } } } };
/** Server VAD that commits turns and transcribes them, without starting responses. */
const SERVER_VAD_NO_RESPONSE = {
  ...CONFIGURE,
  session: {
    ...CONFIGURE.session,
    audio: { input: { transcription: { model: 'whisper-1' }, turn_detection: { type: 'server_vad', create_response: false } } },
  },
};

describe('RealtimeSession', () => {
  it('server VAD: speech_started, partial transcripts of the growing utterance, speech_stopped, committed, then the final transcript at high priority', async () => {
    const h = harness({ partialIntervalMs: 500 });
    h.send(SERVER_VAD_NO_RESPONSE);
    h.append('silence', 5);
    await h.settle();
    h.append('speech', 6);
    await h.settle();
    h.append('speech', 6);
    await h.settle();
    h.append('silence', 8);
    await h.settle();
    const started = h.events.find((e) => e.type === 'input_audio_buffer.speech_started')!;
    // The tone starts at 500 ms; 300 ms of prefix padding before it.
    assert.ok(Math.abs(Number(started.audio_start_ms) - 200) <= 40, String(started.audio_start_ms));
    const deltas = h.events.filter((e) => e.type === 'conversation.item.input_audio_transcription.delta');
    assert.ok(deltas.length >= 2, h.types().join(', '));
    assert.ok(deltas.every((d) => d.item_id === started.item_id));
    const order = [
      'input_audio_buffer.speech_started',
      'input_audio_buffer.speech_stopped',
      'input_audio_buffer.committed',
      'conversation.item.input_audio_transcription.completed',
    ];
    assert.deepEqual(
      h.types().filter((t) => order.includes(t)),
      order,
    );
    const completed = h.events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')!;
    assert.equal(completed.item_id, started.item_id);
    assert.equal(h.transcribed.at(-1)!.priority, 'high');
    assert.ok(h.transcribed.slice(0, -1).every((t) => t.priority === 'normal'));
    assert.ok(String(completed.transcript).startsWith(deltas.map((d) => String(d.delta)).join('')));
    assert.ok(!h.types().includes('response.created'), 'create_response false');
  });

  it('barge-in: speech during a response cancels it at once, truncates the item at what was played, aborts the LLM and the stream; no audio follows', async () => {
    let llmSignal: AbortSignal | undefined;
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream(_messages, { signal }) {
        llmSignal = signal;
        yield { type: 'text', text: 'First sentence. ' };
        yield { type: 'text', text: 'Second sentence. ' };
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
      },
    };
    const h = harness({ llm });
    h.send(CONFIGURE);
    h.append('speech', 5);
    h.append('silence', 8);
    await h.settle();
    assert.ok(h.types().includes('response.created'), h.types().join(', '));
    assert.equal(h.streams.length, 1);
    h.streams[0]!.push(2400); // 100 ms
    await h.settle();
    h.clock.advance(60);
    h.streams[0]!.push(2400);
    await h.settle();
    const responseId = h.events.find((e) => e.type === 'response.created')!.response as { id: string };
    h.append('speech', 2);
    await h.settle();
    const doneAt = h.events.findIndex((e) => e.type === 'response.done');
    const done = h.events[doneAt]!.response as {
      id: string;
      status: string;
      status_details: { reason: string };
      output: { content: { transcript: string }[] }[];
    };
    assert.equal(done.id, responseId.id);
    assert.deepEqual([done.status, done.status_details.reason], ['cancelled', 'turn_detected']);
    assert.equal(done.output[0]!.content[0]!.transcript, 'First sentence.');
    const truncated = h.events.find((e) => e.type === 'conversation.item.truncated')!;
    assert.equal(truncated.audio_end_ms, 60);
    assert.equal(llmSignal?.aborted, true);
    assert.equal(h.streams[0]!.state.isCancelled, true);
    h.streams[0]!.push(2400);
    await h.settle();
    assert.deepEqual(
      h.events.slice(doneAt + 1).filter((e) => e.response_id === responseId.id),
      [],
    );
  });

  it('conversation.item.truncate: audio_end_ms past the audio sent is an error; within it the item is truncated', async () => {
    const h = harness();
    h.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
    h.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] } });
    h.send({ type: 'response.create' });
    await h.settle();
    for (const stream of h.streams) {
      stream.push(4800);
      stream.end();
    }
    for (let i = 0; i < 5 && !h.types().includes('response.done'); i++) {
      await h.settle();
      for (const stream of h.streams) {
        stream.push(4800);
        stream.end();
      }
    }
    const done = h.events.find((e) => e.type === 'response.done')!.response as { status: string; output: { id: string }[] };
    assert.equal(done.status, 'completed');
    const itemId = done.output[0]!.id;
    h.send({ type: 'conversation.item.truncate', event_id: 'c1', item_id: itemId, content_index: 0, audio_end_ms: 999_999 });
    h.send({ type: 'conversation.item.truncate', event_id: 'c2', item_id: itemId, content_index: 0, audio_end_ms: 100 });
    h.send({ type: 'conversation.item.truncate', event_id: 'c3', item_id: 'item_nope', content_index: 0, audio_end_ms: 0 });
    await h.settle();
    const errorsSeen = h.events.filter((e) => e.type === 'error').map((e) => e.error as { code: string; event_id: string });
    assert.deepEqual(errorsSeen, [
      { ...errorsSeen[0]!, code: 'invalid_parameter', event_id: 'c1' },
      { ...errorsSeen[1]!, code: 'item_not_found', event_id: 'c3' },
    ]);
    assert.deepEqual(
      h.events.filter((e) => e.type === 'conversation.item.truncated').map((e) => e.audio_end_ms),
      [100],
    );
  });

  it('closing frees the session: the open response is cancelled and nothing more is sent', async () => {
    const h = harness();
    h.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
    h.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] } });
    h.send({ type: 'response.create' });
    await h.settle();
    const count = h.events.length;
    h.session.close();
    h.streams[0]?.push(2400);
    await h.settle();
    assert.equal(h.events.length, count);
    assert.equal(h.streams[0]?.state.isCancelled, true);
  });

  it('an LLM that fails mid-reply gets an error event (llm_failed) and the fallback text ends the reply', async () => {
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream() {
        yield { type: 'text', text: 'Let me see' };
        throw Object.assign(new Error('boom'), { code: 'llm_failed' });
      },
    };
    const h = harness({ llm });
    h.send({
      type: 'session.update',
      session: { type: 'realtime', output_modalities: ['text'], audio: { input: { turn_detection: null } } },
    });
    h.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] } });
    h.send({ type: 'response.create' });
    await h.settle();
    const done = h.events.find((e) => e.type === 'response.done')!.response as {
      status: string;
      output: { content: { text: string }[] }[];
    };
    assert.equal(done.status, 'completed');
    assert.equal(done.output[0]!.content[0]!.text, 'Let me see Fallback.');
    assert.ok(h.events.some((e) => e.type === 'error'));
  });

  it('a function call the client never answered is left out of the next LLM request, as chat completions require', async () => {
    const seen: ChatMessage[][] = [];
    let calls = 0;
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream(messages) {
        seen.push([...messages]);
        calls += 1;
        if (calls === 1) yield { type: 'tool_call', index: 0, id: 'call_a', name: 'f', arguments: '{}' };
        else yield { type: 'text', text: 'Done.' };
      },
    };
    const h = harness({ llm });
    h.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        output_modalities: ['text'],
        audio: { input: { turn_detection: null } },
        tools: [{ type: 'function', name: 'f' }],
      },
    });
    const say = (text: string) =>
      h.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
    say('first');
    h.send({ type: 'response.create' });
    await h.settle();
    say('second');
    h.send({ type: 'response.create' });
    await h.settle();
    assert.deepEqual(seen[1], [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'first' },
      { role: 'user', content: 'second' },
    ]);
    // Answered now: the call goes to the LLM where it was made, its result right after it.
    h.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: 'call_a', output: 'ok' } });
    h.send({ type: 'response.create' });
    await h.settle();
    assert.deepEqual(seen[2]!.slice(1), [
      { role: 'user', content: 'first' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_a', name: 'f', arguments: '{}' }] },
      { role: 'tool', toolCallId: 'call_a', content: 'ok' },
      { role: 'user', content: 'second' },
      { role: 'assistant', content: 'Done.' },
    ]);
  });

  it('input_audio parts of a user item are transcribed (or their transcript taken) before the LLM hears the item', async () => {
    const { seen, llm } = recordingLlm();
    const h = harness({ llm });
    h.send({ ...CONFIGURE, session: { ...CONFIGURE.session, output_modalities: ['text'] } });
    // One second of 24 kHz pcm16: ten words from the fake transcriber (one per 100 ms).
    const second = Buffer.from(new Int16Array(24_000).fill(1000).buffer).toString('base64');
    h.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'listen:' },
          { type: 'input_audio', audio: second },
          { type: 'input_audio', audio: second, transcript: 'already known' },
        ],
      },
    });
    h.send({ type: 'response.create' });
    await h.settle();
    assert.equal(h.transcribed.length, 1, 'only the part without a transcript is transcribed');
    assert.equal(h.transcribed[0]!.priority, 'high');
    const words = seen[0]!.at(-1)!.content.split(' ');
    assert.deepEqual([words[0], words.at(-2), words.at(-1)], ['listen:', 'already', 'known']);
    assert.ok(words.length >= 12, words.join(' '));
    const added = h.events.find((e) => e.type === 'conversation.item.added')!.item as { content: { type: string; audio?: unknown }[] };
    assert.equal(added.content[1]!.audio, undefined, 'the audio is not echoed back');
    assert.ok(h.types().includes('conversation.item.input_audio_transcription.completed'));
    h.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_audio', audio: 'not base64!' }] },
    });
    await h.settle();
    assert.equal((h.events.at(-1)!.error as { code: string }).code, 'invalid_audio_data');
  });

  it('a failed transcription of a turn or of an item’s audio is a failed event naming the code; the session goes on', async () => {
    const h = harness({ transcribeError: errors.instanceCrashed({ instanceId: 'asr-0-g1', reason: 'exit code 1' }) });
    h.send(SERVER_VAD_NO_RESPONSE);
    h.append('speech', 6);
    h.append('silence', 8);
    await h.settle();
    const second = Buffer.from(new Int16Array(2_400).fill(1000).buffer).toString('base64');
    h.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_audio', audio: second }] },
    });
    h.send({ type: 'response.create' });
    await h.settle();
    const failed = h.events.filter((e) => e.type === 'conversation.item.input_audio_transcription.failed');
    assert.equal(failed.length, 2, h.types().join(', '));
    const committed = h.events.find((e) => e.type === 'input_audio_buffer.committed')!;
    const added = h.events
      .filter((e) => e.type === 'conversation.item.added')
      .map((e) => e.item as { id: string; role: string })
      .filter((item) => item.role === 'user')
      .at(-1)!;
    assert.deepEqual(
      failed.map((e) => e.item_id),
      [committed.item_id, added.id],
    );
    for (const e of failed) assert.equal((e.error as { code: string }).code, 'instance_crashed');
    assert.ok(!h.types().includes('conversation.item.input_audio_transcription.completed'));
    assert.ok(h.types().includes('response.created'), 'the response still runs, on what the item said (nothing)');
  });

  it('a binary frame, or a response.create while one is in progress, is an error event', async () => {
    const h = harness();
    h.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
    h.session.receiveBinary();
    h.send({ type: 'response.create' });
    h.send({ type: 'response.create', event_id: 'again' });
    await h.settle();
    const codes = h.events.filter((e) => e.type === 'error').map((e) => (e.error as { code: string }).code);
    assert.deepEqual(codes, ['invalid_event', 'conversation_already_has_active_response']);
  });
});

const say = (h: ReturnType<typeof harness>, text: string) =>
  h.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
const NO_VAD = (extra: Record<string, unknown> = {}) => ({
  type: 'session.update',
  session: { type: 'realtime', audio: { input: { turn_detection: null } }, ...extra },
});

describe('realtime session edges', () => {
  it('a sentence whose speech fails while the LLM still streams fails the response, with no unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const llm: ChatResponder = {
        kind: 'llm',
        async *stream() {
          yield { type: 'text', text: 'First sentence. Sec' };
          await sleep(30); // the next tokens are still on the network
          yield { type: 'text', text: 'ond.' };
        },
      };
      const h = harness({
        llm,
        speak: () => {
          throw Object.assign(new Error('unknown voice'), { code: 'unknown_voice' });
        },
      });
      h.send(NO_VAD());
      say(h, 'hi');
      h.send({ type: 'response.create' });
      await sleep(80);
      await h.settle();
      assert.deepEqual(unhandled, []);
      const done = h.events.find((e) => e.type === 'response.done')!.response as { status: string };
      assert.equal(done.status, 'failed');
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('a response cancelled while a function call streams sends output_item.done for every item it added', async () => {
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream(_m, { signal }) {
        yield { type: 'tool_call', index: 0, id: 'call_a', name: 'f', arguments: '{"a":' };
        await new Promise((r) => signal.addEventListener('abort', r));
      },
    };
    const h = harness({ llm });
    h.send(NO_VAD({ output_modalities: ['text'], tools: [{ type: 'function', name: 'f' }] }));
    say(h, 'hi');
    h.send({ type: 'response.create' });
    await h.settle();
    h.send({ type: 'response.cancel' });
    await h.settle();
    const added = h.events.filter((e) => e.type === 'response.output_item.added').map((e) => (e.item as { id: string }).id);
    const done = h.events.filter((e) => e.type === 'response.output_item.done').map((e) => (e.item as { id: string }).id);
    assert.equal(added.length, 2);
    assert.deepEqual(done, added, h.types().join(', '));
  });

  it('a response waits for every user transcript: an earlier turn transcribed after the last one is in the LLM request', async () => {
    const { seen, llm } = recordingLlm();
    // Two ASR instances: the longer utterance takes longer.
    const transcribe: RealtimeSessionDeps['transcribe'] = async (audio) => {
      await sleep(audio.length / 160); // 10 ms per 100 ms of audio
      return audio.length > 16_000 ? 'I want to book a flight' : 'to Paris';
    };
    const h = harness({ llm, transcribe });
    h.send(NO_VAD({ output_modalities: ['text'] }));
    h.append('speech', 20); // 2 s
    h.send({ type: 'input_audio_buffer.commit' });
    h.append('speech', 5); // 0.5 s
    h.send({ type: 'input_audio_buffer.commit' });
    h.send({ type: 'response.create' });
    await sleep(300);
    await h.settle();
    assert.deepEqual(
      seen[0]!.slice(1).map((m) => m.content),
      ['I want to book a flight', 'to Paris'],
    );
  });

  it('an LLM turn cancelled mid-stream counts against the daily budget', async () => {
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream(_m, { signal }) {
        yield { type: 'text', text: 'Long answer' };
        await new Promise((r) => signal.addEventListener('abort', r));
        throw signal.reason;
      },
    };
    const h = harness({ llm });
    h.send(NO_VAD({ output_modalities: ['text'] }));
    say(h, 'hi');
    h.send({ type: 'response.create' });
    await h.settle();
    h.send({ type: 'response.cancel' });
    await h.settle();
    assert.ok(h.types().includes('response.done'));
    assert.equal(h.gate.snapshot().turnsToday, 1, 'the LLM was called once');
  });
});

describe('realtime session edges: responses', () => {
  it('response.cancel naming a finished response_id cancels nothing', async () => {
    let n = 0;
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream(_m, { signal }) {
        n += 1;
        yield { type: 'text', text: 'Hi.' };
        if (n === 2) await new Promise((r) => signal.addEventListener('abort', r));
      },
    };
    const h = harness({ llm });
    h.send(NO_VAD({ output_modalities: ['text'] }));
    say(h, 'one');
    h.send({ type: 'response.create' });
    await h.settle();
    const first = (h.events.find((e) => e.type === 'response.done')!.response as { id: string }).id;
    say(h, 'two');
    h.send({ type: 'response.create' });
    await h.settle();
    h.send({ type: 'response.cancel', response_id: first });
    await h.settle();
    const cancelled = h.events.filter((e) => e.type === 'response.done').map((e) => (e.response as { status: string }).status);
    assert.deepEqual(cancelled, ['completed'], 'the second response must not be cancelled by a cancel for the first');
  });

  it('a response cancelled before any output lists no item in response.done', async () => {
    const h = harness({ transcribe: () => new Promise(() => {}) }); // transcript still pending
    h.send(NO_VAD());
    h.append('speech', 5);
    h.send({ type: 'input_audio_buffer.commit' });
    h.send({ type: 'response.create' });
    await h.settle();
    h.send({ type: 'response.cancel' });
    await h.settle();
    const done = h.events.find((e) => e.type === 'response.done')!.response as { output: { id: string }[] };
    const added = h.events.filter((e) => e.type === 'response.output_item.added');
    assert.deepEqual([added.length, done.output.length], [0, 0]);
  });

  it('with interrupt_response false, a turn that ends during a response is answered after it, without an error', async () => {
    let n = 0;
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream() {
        n += 1;
        yield { type: 'text', text: 'Hello.' };
        if (n === 1) await new Promise((r) => setTimeout(r, 50));
      },
    };
    const h = harness({ llm });
    h.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        output_modalities: ['text'],
        audio: { input: { turn_detection: { type: 'server_vad', interrupt_response: false } } },
      },
    });
    h.append('speech', 5);
    h.append('silence', 8);
    await h.settle();
    h.append('speech', 5);
    h.append('silence', 8); // second turn while the first response runs
    await sleep(100);
    await h.settle();
    const errs = h.events.filter((e) => e.type === 'error').map((e) => (e.error as { code: string }).code);
    const commits = h.events.filter((e) => e.type === 'input_audio_buffer.committed').length;
    const responses = h.events.filter((e) => e.type === 'response.created').length;
    assert.deepEqual({ errs, commits, responses }, { errs: [], commits: 2, responses: 2 });
  });
});

describe('realtime session: the response object', () => {
  it('GA: response.audio.output.format is the GA format object, as in the session', async () => {
    for (const [format, expected] of [
      [
        { type: 'audio/pcm', rate: 24000 },
        { type: 'audio/pcm', rate: 24000 },
      ],
      [{ type: 'audio/pcmu' }, { type: 'audio/pcmu' }],
    ] as const) {
      const h = harness({ llm: recordingLlm().llm });
      h.send(NO_VAD({ output_modalities: ['text'], audio: { input: { turn_detection: null }, output: { format } } }));
      say(h, 'hi');
      h.send({ type: 'response.create' });
      await h.settle();
      for (const type of ['response.created', 'response.done']) {
        const response = h.events.find((e) => e.type === type)!.response as { audio: { output: { format: unknown; voice: string } } };
        assert.deepEqual(response.audio.output, { format: expected, voice: 'alloy' }, type);
      }
      const updated = h.events.find((e) => e.type === 'session.updated')!.session as { audio: { output: { format: unknown } } };
      assert.deepEqual(updated.audio.output.format, expected);
    }
  });

  it('beta: the response and its message item have the beta shape (modalities, voice, output_audio_format; audio and text parts)', async () => {
    for (const [modalities, partType] of [
      [['audio', 'text'], 'audio'],
      [['text'], 'text'],
    ] as const) {
      const h = harness({ llm: recordingLlm().llm, shape: 'beta' });
      h.send({ type: 'session.update', session: { modalities, turn_detection: null, output_audio_format: 'g711_ulaw', voice: 'echo' } });
      say(h, 'hi');
      h.send({ type: 'response.create' });
      await h.settle();
      h.streams.forEach((s) => s.end());
      await h.settle();
      for (const type of ['response.created', 'response.done']) {
        const response = h.events.find((e) => e.type === type)!.response as Record<string, unknown>;
        assert.deepEqual(
          [response.modalities, response.voice, response.output_audio_format, response.audio, response.output_modalities],
          [modalities, 'echo', 'g711_ulaw', undefined, undefined],
          type,
        );
      }
      const done = h.events.find((e) => e.type === 'response.done')!.response as { output: { content: { type: string }[] }[] };
      assert.equal(done.output[0]!.content[0]!.type, partType);
      for (const type of ['response.output_item.added', 'response.output_item.done']) {
        const item = h.events.find((e) => e.type === type)!.item as { content: { type: string }[] };
        assert.equal(item.content[0]!.type, partType, type);
      }
    }
  });

  it('the transcription of a user item’s input_audio parts is completed with its usage (seconds of the audio transcribed), as a turn’s is', async () => {
    const h = harness();
    h.send(CONFIGURE);
    const second = Buffer.from(new Int16Array(24_000).fill(1000).buffer).toString('base64');
    const half = Buffer.from(new Int16Array(12_000).fill(1000).buffer).toString('base64');
    h.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_audio', audio: second },
          { type: 'input_audio', audio: half },
        ],
      },
    });
    await h.settle();
    const completed = h.events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')!;
    assert.deepEqual(completed.usage, { type: 'duration', seconds: 1.5 });
  });

  it('conversation.item.create with previous_item_id inserts the item after that one (root: first); an unknown one is item_not_found and adds nothing', async () => {
    const { seen, llm } = recordingLlm();
    const h = harness({ llm });
    h.send(NO_VAD({ output_modalities: ['text'] }));
    const create = (id: string, previous?: string) =>
      h.send({
        type: 'conversation.item.create',
        ...(previous === undefined ? {} : { previous_item_id: previous }),
        item: { id, type: 'message', role: 'user', content: [{ type: 'input_text', text: id }] },
      });
    create('a');
    create('b');
    create('c', 'a');
    create('r', 'root');
    h.send({
      type: 'conversation.item.create',
      event_id: 'bad',
      previous_item_id: 'nope',
      item: { id: 'x', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x' }] },
    });
    await h.settle();
    const added = h.events
      .filter((e) => e.type === 'conversation.item.added')
      .map((e) => [(e.item as { id: string }).id, e.previous_item_id]);
    assert.deepEqual(added, [
      ['a', null],
      ['b', 'a'],
      ['c', 'a'],
      ['r', null],
    ]);
    const error = h.events.find((e) => e.type === 'error')!.error as { code: string; param: string; event_id: string };
    assert.deepEqual([error.code, error.param, error.event_id], ['item_not_found', 'previous_item_id', 'bad']);
    h.send({ type: 'response.create' });
    await h.settle();
    assert.deepEqual(
      seen[0]!.slice(1).map((m) => m.content),
      ['r', 'a', 'c', 'b'],
    );
  });

  it('conversation.item.retrieve answers conversation.item.retrieved with the item as it now is; an unknown item is item_not_found', async () => {
    const h = harness({ llm: recordingLlm().llm });
    h.send(NO_VAD({ output_modalities: ['text'], audio: { input: { turn_detection: null, transcription: { model: 'whisper-1' } } } }));
    say(h, 'hello');
    h.append('speech', 5);
    h.send({ type: 'input_audio_buffer.commit' });
    h.send({ type: 'response.create' });
    await h.settle();
    const userId = (h.events.find((e) => e.type === 'conversation.item.added')!.item as { id: string }).id;
    const committedId = String(h.events.find((e) => e.type === 'input_audio_buffer.committed')!.item_id);
    const assistantId = (h.events.find((e) => e.type === 'response.output_item.added')!.item as { id: string }).id;
    const retrieve = async (itemId: string) => {
      h.send({ type: 'conversation.item.retrieve', event_id: `get-${itemId}`, item_id: itemId });
      await h.settle();
      return h.events.at(-1)!;
    };
    const user = await retrieve(userId);
    assert.equal(user.type, 'conversation.item.retrieved');
    assert.deepEqual(user.item, {
      id: userId,
      object: 'realtime.item',
      type: 'message',
      status: 'completed',
      role: 'user',
      content: [{ type: 'input_text', text: 'hello' }],
    });
    const committed = await retrieve(committedId);
    assert.deepEqual((committed.item as { content: unknown[] }).content, [
      {
        type: 'input_audio',
        transcript: h.events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')!.transcript,
      },
    ]);
    const assistant = await retrieve(assistantId);
    assert.deepEqual(assistant.item, {
      id: assistantId,
      object: 'realtime.item',
      type: 'message',
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: 'Ok.' }],
    });
    const missing = await retrieve('nope');
    assert.equal(missing.type, 'error');
    assert.deepEqual(
      [(missing.error as { code: string }).code, (missing.error as { event_id: string }).event_id],
      ['item_not_found', 'get-nope'],
    );
  });

  it('speech_stopped: audio_end_ms is the end of the audio committed, the silence that ended the turn included, as OpenAI defines it', async () => {
    const h = harness();
    h.send(SERVER_VAD_NO_RESPONSE);
    h.append('silence', 5);
    h.append('speech', 6);
    h.append('silence', 8);
    await h.settle();
    const started = h.events.find((e) => e.type === 'input_audio_buffer.speech_started')!;
    const stopped = h.events.find((e) => e.type === 'input_audio_buffer.speech_stopped')!;
    const transcribedMs = (h.transcribed.at(-1)!.samples / 16_000) * 1000;
    // Speech ends at 1100 ms; the turn ends after 500 ms of silence (whole 32 ms frames).
    assert.ok(Number(stopped.audio_end_ms) >= 1600 && Number(stopped.audio_end_ms) < 1600 + 64, String(stopped.audio_end_ms));
    assert.ok(
      // Within the resampler's delay (the 16 kHz timeline runs that much behind the audio sent).
      Math.abs(Number(stopped.audio_end_ms) - Number(started.audio_start_ms) - transcribedMs) <= 32,
      `${String(stopped.audio_end_ms)} - ${String(started.audio_start_ms)} vs ${transcribedMs} ms committed`,
    );
  });

  it('a voice turn: response.created comes at the commit, the final transcript before the response’s first item (the order docs/realtime.md gives)', async () => {
    const h = harness({ llm: recordingLlm().llm });
    h.send({ ...CONFIGURE, session: { ...CONFIGURE.session, output_modalities: ['text'] } });
    h.append('speech', 6);
    h.append('silence', 8);
    await h.settle();
    const order = [
      'input_audio_buffer.speech_started',
      'input_audio_buffer.speech_stopped',
      'input_audio_buffer.committed',
      'conversation.item.added',
      'conversation.item.done',
      'response.created',
      'conversation.item.input_audio_transcription.completed',
      'response.output_item.added',
    ];
    const firsts = order.map((type) => h.types().indexOf(type));
    assert.ok(
      firsts.every((at, i) => at >= 0 && (i === 0 || at > firsts[i - 1]!)),
      h.types().join(', '),
    );
  });

  it('a reply the LLM cut at max_output_tokens ends incomplete (status_details reason max_output_tokens), its item incomplete', async () => {
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream() {
        yield { type: 'text', text: 'One two' };
        yield { type: 'cut', reason: 'max_output_tokens' };
        yield { type: 'usage', usage: { inputTokens: 3, outputTokens: 2 } };
      },
    };
    const h = harness({ llm });
    h.send(NO_VAD({ output_modalities: ['text'], max_output_tokens: 2 }));
    say(h, 'count');
    h.send({ type: 'response.create' });
    await h.settle();
    const done = h.events.find((e) => e.type === 'response.done')!.response as {
      status: string;
      status_details: unknown;
      output: { status: string }[];
    };
    assert.deepEqual([done.status, done.status_details], ['incomplete', { type: 'incomplete', reason: 'max_output_tokens' }]);
    assert.equal(done.output[0]!.status, 'incomplete');
    const itemDone = h.events.find((e) => e.type === 'response.output_item.done')!.item as { status: string };
    assert.equal(itemDone.status, 'incomplete');
    assert.ok(h.types().includes('response.output_text.done'));
  });

  it('response.create: output_modalities or instructions that are not valid are invalid_parameter, and no response starts', async () => {
    const h = harness({ llm: recordingLlm().llm });
    h.send(NO_VAD({ output_modalities: ['text'] }));
    say(h, 'hi');
    for (const [response, param] of [
      [{ output_modalities: ['video'] }, 'response.output_modalities'],
      [{ output_modalities: 'audio' }, 'response.output_modalities'],
      [{ instructions: 42 }, 'response.instructions'],
    ] as const) {
      h.send({ type: 'response.create', event_id: 'r', response });
      await h.settle();
      const error = h.events.at(-1)!.error as { code: string; param: string } | undefined;
      assert.deepEqual([error?.code, error?.param], ['invalid_parameter', param], JSON.stringify(response));
    }
    assert.ok(!h.types().includes('response.created'));
  });

  it('the input transcription’s language (audio.input.transcription.language) reaches the recogniser, for turns and partials', async () => {
    const languages: (string | null | undefined)[] = [];
    const h = harness({
      partialIntervalMs: 300,
      transcribe: async (_audio, work) => {
        languages.push((work as { language?: string | null }).language);
        return 'hallo';
      },
    });
    h.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        audio: {
          input: { transcription: { model: 'whisper-1', language: 'de' }, turn_detection: { type: 'server_vad', create_response: false } },
        },
      },
    });
    h.append('speech', 6);
    await h.settle();
    h.append('silence', 8);
    await h.settle();
    assert.ok(languages.length >= 2, String(languages.length));
    assert.ok(
      languages.every((l) => l === 'de'),
      JSON.stringify(languages),
    );
  });
});

/** `ms` of a 24 kHz tone, as one append. */
function appendTone(h: ReturnType<typeof harness>, ms: number, kind: 'speech' | 'silence' = 'speech'): void {
  const samples = new Int16Array((ms * 24_000) / 1000);
  if (kind === 'speech') for (let j = 0; j < samples.length; j++) samples[j] = Math.round(Math.sin(j / 3) * 8000);
  h.send({ type: 'input_audio_buffer.append', audio: Buffer.from(samples.buffer).toString('base64') });
}

describe('realtime session: input transcription prompt', () => {
  it('the input transcription’s prompt (audio.input.transcription.prompt) reaches the recogniser, for turns and partials, and the session shows it', async () => {
    const prompts: unknown[] = [];
    const h = harness({
      partialIntervalMs: 300,
      transcribe: async (_audio, work) => {
        prompts.push((work as { prompt?: unknown }).prompt);
        return 'voxmux';
      },
    });
    h.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        audio: {
          input: {
            transcription: { model: 'whisper-1', language: 'en', prompt: 'voxmux, Silero' },
            turn_detection: { type: 'server_vad', create_response: false },
          },
        },
      },
    });
    h.append('speech', 6);
    await h.settle();
    h.append('silence', 8);
    await h.settle();
    assert.ok(prompts.length >= 2, String(prompts.length));
    assert.ok(
      prompts.every((p) => p === 'voxmux, Silero'),
      JSON.stringify(prompts),
    );
    const session = h.events.find((e) => e.type === 'session.updated')!.session as { audio: { input: { transcription: unknown } } };
    assert.deepEqual(session.audio.input.transcription, { model: 'whisper-1', language: 'en', prompt: 'voxmux, Silero' });
  });

  it('beta: input_audio_transcription.prompt reaches the recogniser; without a prompt the recogniser gets none', async () => {
    const prompts: unknown[] = [];
    const h = harness({
      shape: 'beta',
      transcribe: async (_audio, work) => {
        prompts.push((work as { prompt?: unknown }).prompt);
        return 'hello';
      },
    });
    h.send({
      type: 'session.update',
      session: { turn_detection: null, input_audio_transcription: { model: 'whisper-1', prompt: 'Zürich' } },
    });
    appendTone(h, 200);
    h.send({ type: 'input_audio_buffer.commit' });
    await h.settle();
    h.send({ type: 'session.update', session: { input_audio_transcription: { model: 'whisper-1' } } });
    appendTone(h, 200);
    h.send({ type: 'input_audio_buffer.commit' });
    await h.settle();
    assert.deepEqual(prompts, ['Zürich', null]);
    const sessions = h.events
      .filter((e) => e.type === 'session.updated')
      .map((e) => (e.session as { input_audio_transcription: unknown }).input_audio_transcription);
    assert.deepEqual(sessions, [{ model: 'whisper-1', prompt: 'Zürich' }, { model: 'whisper-1' }]);
  });

  it('a prompt that is not a string is invalid_parameter, the session unchanged', async () => {
    const h = harness();
    h.send({
      type: 'session.update',
      event_id: 'p',
      session: { type: 'realtime', audio: { input: { transcription: { model: 'whisper-1', prompt: 7 } } } },
    });
    await h.settle();
    const error = h.events.at(-1)!.error as { code: string; param: string };
    assert.deepEqual([error.code, error.param], ['invalid_parameter', 'session.audio.input.transcription.prompt']);
  });
});

describe('realtime session: input_audio_buffer.commit needs 100 ms of audio', () => {
  it('input_audio_buffer.commit of less than 100 ms of audio is input_audio_buffer_commit_empty, in OpenAI’s words, and commits nothing; 100 ms commits', async () => {
    const h = harness();
    h.send(NO_VAD());
    h.send({ type: 'input_audio_buffer.commit', event_id: 'c0' });
    appendTone(h, 50);
    h.send({ type: 'input_audio_buffer.commit', event_id: 'c1' });
    await h.settle();
    const refused = h.events.filter((e) => e.type === 'error').map((e) => e.error);
    const message = (ms: string) =>
      `Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has ${ms}ms of audio.`;
    assert.deepEqual(refused, [
      { type: 'invalid_request_error', code: 'input_audio_buffer_commit_empty', message: message('0.00'), param: null, event_id: 'c0' },
      { type: 'invalid_request_error', code: 'input_audio_buffer_commit_empty', message: message('50.00'), param: null, event_id: 'c1' },
    ]);
    assert.ok(!h.types().includes('input_audio_buffer.committed'));
    // The refused commit kept the buffer: 50 ms more make the 100 ms a commit needs.
    appendTone(h, 50);
    h.send({ type: 'input_audio_buffer.commit', event_id: 'c2' });
    await h.settle();
    assert.equal(h.events.filter((e) => e.type === 'error').length, 2);
    assert.ok(h.types().includes('input_audio_buffer.committed'));
    assert.ok(Math.abs(h.transcribed.at(-1)!.samples - 1600) <= 64, String(h.transcribed.at(-1)!.samples));
  });

  it('server VAD commits a turn shorter than 100 ms: the 100 ms rule is the client commit’s', async () => {
    const h = harness();
    h.send({
      ...CONFIGURE,
      session: {
        type: 'realtime',
        audio: {
          input: {
            transcription: { model: 'whisper-1' },
            turn_detection: { type: 'server_vad', create_response: false, prefix_padding_ms: 0, silence_duration_ms: 0 },
          },
        },
      },
    });
    appendTone(h, 100, 'silence');
    appendTone(h, 40);
    appendTone(h, 200, 'silence');
    await h.settle();
    assert.ok(h.types().includes('input_audio_buffer.committed'), h.types().join(', '));
    assert.ok(!h.types().includes('error'), h.types().join(', '));
    assert.ok(h.transcribed.at(-1)!.samples < 1600, String(h.transcribed.at(-1)!.samples));
  });
});

/** Ends every speech stream opened so far, each after `samples` of 24 kHz audio, until the response is done. */
async function playOut(h: ReturnType<typeof harness>, samples = 2400): Promise<void> {
  const ended = new Set<ReturnType<typeof gatedStream>>();
  const before = h.events.filter((e) => e.type === 'response.done').length;
  for (let i = 0; i < 10 && h.events.filter((e) => e.type === 'response.done').length === before; i++) {
    for (const stream of h.streams.filter((s) => !ended.has(s))) {
      stream.push(samples);
      stream.end();
      ended.add(stream);
    }
    await h.settle();
  }
}

describe('realtime session: the voice after assistant audio', () => {
  it('session.update: the voice cannot change once the session sent assistant audio (cannot_update_voice, the session unchanged); before that, or to the same voice, it can', async () => {
    const h = harness({ llm: recordingLlm().llm });
    h.send(NO_VAD({ audio: { input: { turn_detection: null }, output: { voice: 'ash' } } }));
    say(h, 'hi');
    // A text reply plays no audio: the voice may still change after it.
    h.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    await h.settle();
    h.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { voice: 'echo' } } } });
    await h.settle();
    assert.equal(h.events.at(-1)!.type, 'session.updated');
    h.send({ type: 'response.create' });
    await h.settle();
    await playOut(h);
    assert.ok(h.types().includes('response.output_audio.delta'), h.types().join(', '));
    h.send({
      type: 'session.update',
      event_id: 'v1',
      session: { type: 'realtime', instructions: 'Be terse.', audio: { output: { voice: 'cedar' } } },
    });
    await h.settle();
    assert.deepEqual(h.events.at(-1)!.error, {
      type: 'invalid_request_error',
      code: 'cannot_update_voice',
      message: "Cannot update a conversation's voice if assistant audio is present.",
      param: null,
      event_id: 'v1',
    });
    // The same voice is no change; the refused update changed nothing (its instructions neither).
    h.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { voice: 'echo' } } } });
    await h.settle();
    const updated = h.events.at(-1)!;
    assert.equal(updated.type, 'session.updated');
    const session = updated.session as { instructions: string; audio: { output: { voice: string } } };
    assert.deepEqual([session.audio.output.voice, session.instructions], ['echo', 'Be brief.']);
  });

  it('beta: session.update with another voice after assistant audio is cannot_update_voice', async () => {
    const h = harness({ llm: recordingLlm().llm, shape: 'beta' });
    h.send({ type: 'session.update', session: { turn_detection: null, voice: 'ash' } });
    say(h, 'hi');
    h.send({ type: 'response.create' });
    await h.settle();
    await playOut(h);
    h.send({ type: 'session.update', event_id: 'v2', session: { voice: 'coral' } });
    await h.settle();
    const error = h.events.at(-1)!.error as { code: string; event_id: string };
    assert.deepEqual([error.code, error.event_id], ['cannot_update_voice', 'v2']);
  });
});

describe('realtime session: rate_limits.updated', () => {
  it('follows every response.done (completed or cancelled), GA and beta; with no LLM budget no limit applies and the list is empty', async () => {
    for (const shape of ['ga', 'beta'] as const) {
      const h = harness({ llm: recordingLlm().llm, shape });
      h.send(
        shape === 'ga'
          ? NO_VAD({ output_modalities: ['text'] })
          : { type: 'session.update', session: { turn_detection: null, modalities: ['text'] } },
      );
      say(h, 'hi');
      h.send({ type: 'response.create' });
      await h.settle();
      say(h, 'again');
      h.send({ type: 'response.create', response: { output_modalities: ['audio'], modalities: ['audio', 'text'] } });
      await h.settle();
      h.send({ type: 'response.cancel' });
      await h.settle();
      const types = h.types();
      const done = types.flatMap((t, i) => (t === 'response.done' ? [i] : []));
      assert.equal(done.length, 2, types.join(', '));
      for (const at of done) assert.equal(types[at + 1], 'rate_limits.updated', `${shape}: ${types.join(', ')}`);
      const limits = h.events.filter((e) => e.type === 'rate_limits.updated');
      assert.equal(limits.length, 2);
      for (const event of limits) assert.deepEqual(event.rate_limits, []);
    }
  });

  it('with an LLM budget: requests is the LLM turns the day’s budget pays for (done today plus left, at the average cost), resetting at the next UTC midnight', async () => {
    // Each turn costs 0.5 US dollars (a million tokens at 1 US dollar per million): a budget of 10 turns.
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream() {
        yield { type: 'text', text: 'Ok.' };
        yield { type: 'usage', usage: { inputTokens: 250_000, outputTokens: 250_000 } };
      },
    };
    const h = harness({ llm, dailyBudgetUsd: 5 });
    h.send(NO_VAD({ output_modalities: ['text'] }));
    for (const text of ['one', 'two']) {
      say(h, text);
      h.send({ type: 'response.create' });
      await h.settle();
    }
    const limits = h.events.filter((e) => e.type === 'rate_limits.updated').map((e) => e.rate_limits);
    // FakeClock's wall clock is 80,000 s into its UTC day: 6,400 s to the next.
    assert.deepEqual(limits, [
      [{ name: 'requests', limit: 10, remaining: 9, reset_seconds: 6400 }],
      [{ name: 'requests', limit: 10, remaining: 8, reset_seconds: 6400 }],
    ]);
  });
});
