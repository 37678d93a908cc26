/**
 * Realtime sessions at their edges, with fakes for the engines and the LLM: a speech failure while
 * the LLM streams, an LLM reply longer than the connect timeout, cancels and failures with
 * function calls, turns transcribed out of order, cancelled LLM turns and the budget, response_id
 * on response.cancel, and turns that end while a response they do not interrupt runs.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { setImmediate as tick, setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fake-clock.js';
import { silentLogger } from '../../../test/support/test-logger.js';
import type { StreamCall, StreamChunk } from '../../scheduler/index.js';
import { createMetrics } from '../../telemetry/metrics.js';
import { createFirKernel } from '../audio/fir-kernel.js';
import { framedStream } from '../pieces/voice-activity.js';
import { createChatClient } from './chat-client.js';
import type { ChatMessage, ChatResponder } from './chat-responder.js';
import { createDemoResponder } from './demo-responder.js';
import { createLlmGate } from './llm-gate.js';
import { createRealtimeSession, type RealtimeSessionDeps, type ServerEvent } from './realtime-session.js';
import { newSessionSettings } from './session-config.js';

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

function harness(o: { llm?: ChatResponder; speak?: RealtimeSessionDeps['speak']; transcribe?: RealtimeSessionDeps['transcribe'] } = {}) {
  const events: ServerEvent[] = [];
  const clock = new FakeClock();
  const streams: ReturnType<typeof gatedStream>[] = [];
  const gate = createLlmGate({ isBlocked: false, dailyBudgetUsd: 0, inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }, { clock });
  const deps: RealtimeSessionDeps = {
    send: (event) => events.push(event),
    transcribe: o.transcribe ?? (async (audio) => Array.from({ length: Math.floor(audio.length / 1600) }, (_, i) => `w${i}`).join(' ')),
    speak:
      o.speak ??
      (() => {
        const s = gatedStream();
        streams.push(s);
        return s.call;
      }),
    llm: o.llm,
    demo: createDemoResponder(),
    gate,
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
      shape: 'ga',
      settings: newSessionSettings({ kind: 'realtime', model: 'gpt-realtime', instructions: 'Be brief.' }),
      maxAppendBytes: 1 << 20,
      maxBufferMs: 60_000,
      partialIntervalMs: 0,
      turnTimeoutMs: 10_000,
      fallbackText: 'Fallback.',
      maxOutputTokens: 100,
      gpuHourUsd: 0,
    },
    deps,
  );
  const send = (event: Record<string, unknown>) => session.receive(JSON.stringify(event));
  const pcm = (ms: number, kind: 'speech' | 'silence') => {
    const samples = new Int16Array(24 * ms);
    if (kind === 'speech') for (let j = 0; j < samples.length; j++) samples[j] = Math.round(Math.sin(j / 3) * 8000);
    return Buffer.from(samples.buffer).toString('base64');
  };
  const append = (kind: 'speech' | 'silence', count = 1) => {
    for (let i = 0; i < count; i++) send({ type: 'input_audio_buffer.append', audio: pcm(100, kind) });
  };
  const settle = async () => {
    for (let i = 0; i < 50; i++) await tick();
  };
  return { events, clock, streams, gate, session, send, append, pcm, settle, types: () => events.map((e) => e.type) };
}

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

  it('an LLM reply that streams longer than the connect timeout is read whole', async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'One.' } }] })}\n\n`);
      setTimeout(() => {
        res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: ' Two.' } }] })}\n\ndata: [DONE]\n\n`);
        res.end();
      }, 300);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    try {
      const client = createChatClient({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: '', model: 'm', connectTimeoutMs: 150 });
      const texts: string[] = [];
      let failure: unknown;
      try {
        for await (const p of client.stream([{ role: 'user', content: 'x' }], {
          signal: new AbortController().signal,
          maxOutputTokens: 10,
        }))
          if (p.type === 'text') texts.push(p.text);
      } catch (err) {
        failure = err;
      }
      assert.equal(failure, undefined, `head came at once, yet: ${String((failure as Error)?.message)}`);
      assert.deepEqual(texts, ['One.', ' Two.']);
    } finally {
      server.close();
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
    const seen: ChatMessage[][] = [];
    const llm: ChatResponder = {
      kind: 'llm',
      async *stream(m) {
        seen.push([...m]);
        yield { type: 'text', text: 'Ok.' };
      },
    };
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
