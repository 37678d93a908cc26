/**
 * Realtime voice calls end to end (#19): the server as app/build-server.ts wires it, with the
 * default CPU engines (pocketsphinx hears, Debian voices speak), Silero VAD, and a local fake
 * OpenAI-compatible LLM. The unmodified openai SDK's realtime WebSocket clients (GA and beta)
 * connect through TLS (the SDK always dials wss:), terminated by a proxy in the test as a load
 * balancer would. The caller's speech is flite's slt voice, which pocketsphinx understands.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { OpenAIRealtimeWS as BetaRealtimeWS } from 'openai/beta/realtime/ws';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { WebSocket } from 'ws';
import { buildServer, type Server } from '../../src/app/build-server.js';
import { systemClock } from '../../src/core/clock.js';
import { readProcessEnvironment } from '../../src/config/env.js';
import { loadConfig } from '../../src/config/load.js';
import { spawnInstance } from '../../src/supervisor/index.js';
import { ffmpegTranscode, fliteWav, joinPath, wordErrorRate } from '../support/audio.js';
import { startFakeLlm, type FakeLlm } from '../../bench/cli/fake-llm.js';
import { captureLogger } from '../support/test-logger.js';
import { waitFor } from '../support/wait-for.js';

const KEY = 'sk-realtime-test-key';
const SPOKEN = 'please book a table for two people tomorrow evening';
const REPLY = 'Sure. I booked a table for two tomorrow at seven. Anything else?';
const CERT = readFileSync(new URL('../fixtures/tls/localhost.crt', import.meta.url));
const TLS_KEY = readFileSync(new URL('../fixtures/tls/localhost.key', import.meta.url));
/** 100 ms of 24 kHz 16-bit mono. */
const FRAME_BYTES = 4800;

let server: Server;
let logLines: () => Record<string, unknown>[];
let llm: FakeLlm;
let port: number;
let tls: TlsServer;
let tlsPort: number;
/** The caller's utterance as 24 kHz pcm16, followed by a second of silence. */
let speech: Buffer;
/** Every client connection the tests open, ended before the server closes so that nothing holds its close. */
const clientSockets = new Set<{ terminate(): void } | { destroy(): void }>();

before(async () => {
  llm = await startFakeLlm({ reply: REPLY });
  const config = loadConfig({
    file: {
      gateway: { apiKeys: [KEY] },
      models: {
        'pocketsphinx-en-us': { adapter: 'pocketsphinx', aliases: ['whisper-1'], instances: 1 },
        'voxmux-speech-cpu': { adapter: 'debian-voices', aliases: ['tts-1'], instances: 1 },
      },
      realtime: {
        maxAppendBytes: 64 * 1024,
        maxSessions: 3,
        partialIntervalMs: 0,
        gpuHourUsd: 2,
        llm: {
          baseUrl: llm.baseUrl,
          allowedBaseUrls: [llm.baseUrl],
          model: 'fake-llm',
          inputUsdPerMillionTokens: 1,
          outputUsdPerMillionTokens: 2,
          fallbackText: 'The assistant is unavailable.',
        },
      },
    },
  });
  const captured = captureLogger();
  logLines = captured.lines;
  server = await buildServer(config, { log: captured.log, clock: systemClock, spawn: spawnInstance, baseEnv: readProcessEnvironment() });
  await server.startInstances();
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  port = (server.app.server.address() as AddressInfo).port;
  tls = createTlsServer({ key: TLS_KEY, cert: CERT }, (secure) => {
    const plain = connect(port, '127.0.0.1');
    clientSockets.add(secure);
    clientSockets.add(plain);
    secure.pipe(plain).pipe(secure);
    const end = () => {
      secure.destroy();
      plain.destroy();
    };
    secure.on('error', end).on('close', end);
    plain.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
  tlsPort = (tls.address() as AddressInfo).port;
  const dir = mkdtempSync(joinPath(tmpdir(), 'voxmux-realtime-'));
  const pcm = ffmpegTranscode(fliteWav(SPOKEN, joinPath(dir, 'spoken.wav')), joinPath(dir, 'spoken.pcm'), [
    '-ar',
    '24000',
    '-ac',
    '1',
    '-f',
    's16le',
  ]);
  speech = Buffer.concat([Buffer.alloc(4800 * 3), pcm, Buffer.alloc(48_000)]);
});

after(async () => {
  for (const socket of clientSockets) {
    if ('terminate' in socket) socket.terminate();
    else socket.destroy();
  }
  tls?.close();
  await server?.destroy();
  await llm?.close();
});

function sdkClient(): OpenAI {
  return new OpenAI({ apiKey: KEY, baseURL: `https://localhost:${tlsPort}/v1` });
}

type Event = { type: string } & Record<string, unknown>;

/** Collects every event of a client; resolves `until` when an event matches. */
function recorder(subscribe: (listener: (event: Event) => void) => void) {
  const events: Event[] = [];
  const waiters: { match: (e: Event) => boolean; resolve: (e: Event) => void }[] = [];
  subscribe((event) => {
    events.push(event);
    for (const w of [...waiters]) {
      if (w.match(event)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(event);
      }
    }
  });
  return {
    events,
    until(match: (e: Event) => boolean): Promise<Event> {
      const seen = events.find(match);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

function sendSpeech(send: (event: Record<string, unknown>) => void, audio = speech, frameBytes = FRAME_BYTES): void {
  for (let at = 0; at < audio.length; at += frameBytes) {
    send({ type: 'input_audio_buffer.append', audio: audio.subarray(at, at + frameBytes).toString('base64') });
  }
}

/** A session over a plain ws client (no TLS), with the Bearer header unless `protocols` carry the key. */
async function rawSession(options: { protocols?: string[]; headers?: Record<string, string>; query?: string } = {}) {
  const socket: WebSocket = new WebSocket(
    `ws://127.0.0.1:${port}/v1/realtime?${options.query ?? 'model=gpt-realtime'}`,
    options.protocols ?? [],
    {
      headers: options.headers ?? (options.protocols === undefined ? { authorization: `Bearer ${KEY}` } : {}),
    },
  );
  clientSockets.add(socket);
  const log = recorder((listener) => socket.on('message', (data) => listener(JSON.parse(String(data)) as Event)));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
    // The refused upgrade's connection is closed here: left open, it would hold the server's close.
    socket.once('unexpected-response', (request, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => {
        request.destroy();
        const retryAfter = response.headers['retry-after'];
        reject(Object.assign(new Error(`HTTP ${response.statusCode}`), { body, retryAfter }));
      });
    });
  });
  await log.until((e) => e.type === 'session.created');
  const send = (event: Record<string, unknown>) => socket.send(JSON.stringify(event));
  return { socket, log, send };
}

const TEXT_SESSION = {
  type: 'session.update',
  session: { type: 'realtime', output_modalities: ['text'], audio: { input: { turn_detection: null } } },
};

async function admin(method: 'GET' | 'PUT', body?: unknown): Promise<Record<string, unknown>> {
  const res = await server.app.inject({
    method,
    url: '/admin/llm',
    headers: { authorization: `Bearer ${KEY}` },
    ...(body === undefined ? {} : { payload: body as object }),
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<Record<string, unknown>>();
}

function assertHeard(transcript: string): void {
  const { errors, words } = wordErrorRate(SPOKEN, transcript);
  assert.ok(errors / words <= 0.25, `WER ${errors}/${words}: heard '${transcript}'`);
}

describe('realtime voice calls with the openai SDK (#19)', () => {
  it('GA client: a spoken turn is transcribed, answered by the LLM, spoken back, and response.done reports usage', async () => {
    const rt = new OpenAIRealtimeWS({ model: 'gpt-realtime', options: { ca: CERT } }, sdkClient());
    const errors: unknown[] = [];
    rt.on('error', (err) => errors.push(err));
    const log = recorder((listener) => rt.on('event', (e) => listener(e as unknown as Event)));
    await log.until((e) => e.type === 'session.created');
    rt.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        instructions: 'You book tables.',
        output_modalities: ['audio'],
        audio: {
          input: {
            format: { type: 'audio/pcm', rate: 24000 },
            transcription: { model: 'whisper-1' },
            turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 },
          },
          output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'alloy' },
        },
      },
    });
    await log.until((e) => e.type === 'session.updated');
    const requestsBefore = llm.requests.length;
    sendSpeech((event) => rt.send(event as never));
    const done = await log.until((e) => e.type === 'response.done');
    rt.close();
    const types = log.events.map((e) => e.type);
    for (const type of [
      'input_audio_buffer.speech_started',
      'input_audio_buffer.speech_stopped',
      'input_audio_buffer.committed',
      'conversation.item.input_audio_transcription.completed',
      'response.created',
      'response.output_audio_transcript.delta',
      'response.output_audio.done',
      'response.output_audio_transcript.done',
    ]) {
      assert.ok(types.includes(type), `${type} missing: got ${types.join(', ')}`);
    }
    const completed = log.events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')!;
    assertHeard(String(completed.transcript));
    const audio = Buffer.concat(
      log.events.filter((e) => e.type === 'response.output_audio.delta').map((e) => Buffer.from(String(e.delta), 'base64')),
    );
    const seconds = audio.length / 2 / 24000;
    assert.ok(seconds > 1.5 && seconds < 15, `${seconds} s of reply audio`);
    const transcriptDone = log.events.find((e) => e.type === 'response.output_audio_transcript.done')!;
    assert.equal(transcriptDone.transcript, REPLY);
    const response = done.response as { status: string; usage: { total_tokens: number; input_tokens: number; output_tokens: number } };
    assert.equal(response.status, 'completed');
    assert.equal(response.usage.output_tokens, REPLY.split(' ').length);
    assert.ok(response.usage.input_tokens > 0);
    assert.equal(response.usage.total_tokens, response.usage.input_tokens + response.usage.output_tokens);
    assert.equal(llm.requests.length, requestsBefore + 1);
    const sent = llm.requests.at(-1)!.body;
    assert.equal(sent.messages[0]!.content, 'You book tables.');
    assert.equal(sent.messages.at(-1)!.content, String(completed.transcript));
    assert.deepEqual(errors, []);
    // The per-call line and the per-stage metrics.
    const sessionId = (log.events[0]!.session as { id: string }).id;
    await waitFor(() => logLines().some((l) => l.msg === 'realtime call completed' && l.sessionId === sessionId), 'the call line');
    const line = logLines().find((l) => l.msg === 'realtime call completed' && l.sessionId === sessionId)!;
    assert.equal(line.turns, 1);
    for (const field of ['transcriptMsP50', 'llmFirstTokenMsP50', 'firstAudioMsP50', 'endToFirstAudioMsP50'])
      assert.equal(typeof line[field], 'number', field);
    assert.equal(line.llmOutputTokens, response.usage.output_tokens);
    assert.ok(Number(line.llmCostUsd) > 0 && Number(line.costPerMinuteUsd) > 0, JSON.stringify(line));
    const stages = await server.metrics.realtimeTurnStage.get();
    const counted = stages.values.find(
      (v) => v.metricName === 'voxmux_realtime_turn_stage_seconds_count' && v.labels.stage === 'end_to_first_audio',
    );
    assert.ok(Number(counted?.value) >= 1);
  });

  it('beta client (OpenAI-Beta: realtime=v1), pcm16 in and G.711 A-law out: beta event names, a transcript, 8 kHz audio', async () => {
    const rt = new BetaRealtimeWS({ model: 'gpt-4o-realtime-preview', options: { ca: CERT } }, sdkClient());
    const log = recorder((listener) => rt.on('event', (e) => listener(e as unknown as Event)));
    await log.until((e) => e.type === 'session.created');
    rt.send({
      type: 'session.update',
      session: {
        modalities: ['audio', 'text'],
        voice: 'alloy',
        input_audio_format: 'pcm16',
        output_audio_format: 'g711_alaw',
        input_audio_transcription: { model: 'whisper-1' },
        turn_detection: { type: 'server_vad', silence_duration_ms: 500 },
      },
    });
    const updated = await log.until((e) => e.type === 'session.updated');
    assert.equal((updated.session as Record<string, unknown>).output_audio_format, 'g711_alaw');
    sendSpeech((event) => rt.send(event as never));
    const done = await log.until((e) => e.type === 'response.done');
    rt.close();
    const types = new Set(log.events.map((e) => e.type));
    for (const type of ['response.audio.delta', 'response.audio.done', 'response.audio_transcript.done', 'conversation.item.created'])
      assert.ok(types.has(type), type);
    for (const type of ['response.output_audio.delta', 'conversation.item.added', 'conversation.item.done'])
      assert.ok(!types.has(type), type);
    assertHeard(String(log.events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')?.transcript));
    const bytes = log.events
      .filter((e) => e.type === 'response.audio.delta')
      .reduce((n, e) => n + Buffer.from(String(e.delta), 'base64').length, 0);
    assert.ok(bytes / 8000 > 1.5 && bytes / 8000 < 15, `${bytes / 8000} s of A-law audio`);
    assert.equal((done.response as { status: string }).status, 'completed');
  });

  it('G.711 mu-law input at 8 kHz (telephony) is heard: a transcription session', async () => {
    const dir = mkdtempSync(joinPath(tmpdir(), 'voxmux-realtime-'));
    const ulaw = ffmpegTranscode(fliteWav(SPOKEN, joinPath(dir, 'spoken.wav')), joinPath(dir, 'spoken.ulaw'), [
      '-ar',
      '8000',
      '-ac',
      '1',
      '-f',
      'mulaw',
    ]);
    const { socket, log, send } = await rawSession({ query: 'intent=transcription' });
    send({
      type: 'session.update',
      session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcmu' }, transcription: { model: 'whisper-1' } } } },
    });
    await log.until((e) => e.type === 'session.updated');
    const silence = Buffer.alloc(8000, 0xff);
    sendSpeech(send, Buffer.concat([silence.subarray(0, 2400), ulaw, silence]), 800);
    const completed = await log.until((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    socket.close();
    // Telephone-band audio is outside the wideband model pocketsphinx ships with: it hears it, less well.
    const { errors, words } = wordErrorRate(SPOKEN, String(completed.transcript));
    assert.ok(errors / words <= 0.5, `WER ${errors}/${words}: heard '${String(completed.transcript)}'`);
  });

  it('barge-in: speech during a response cancels it, truncates the item, and no audio of it follows the cancel', async () => {
    const long = `${REPLY} ${'The restaurant is on the main square next to the old theatre. '.repeat(6)}`.trim();
    llm.reply = long;
    llm.tokenDelayMs = 25;
    try {
      const { socket, log, send } = await rawSession();
      send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: { type: 'server_vad' } } } } });
      await log.until((e) => e.type === 'session.updated');
      const before = llm.requests.length;
      sendSpeech(send);
      const firstAudio = await log.until((e) => e.type === 'response.output_audio.delta');
      const responseId = firstAudio.response_id;
      sendSpeech(send);
      const cancelled = await log.until((e) => e.type === 'response.done' && (e.response as { id: string }).id === responseId);
      const second = await log.until((e) => e.type === 'response.created' && (e.response as { id: string }).id !== responseId);
      send({ type: 'response.cancel' });
      await log.until((e) => e.type === 'response.done' && (e.response as { id: string }).id === (second.response as { id: string }).id);
      socket.close();
      const response = cancelled.response as { status: string; status_details: { reason: string } };
      assert.equal(response.status, 'cancelled');
      assert.equal(response.status_details.reason, 'turn_detected');
      const at = log.events.indexOf(cancelled);
      assert.ok(
        log.events
          .slice(0, at)
          .some((e) => e.type === 'input_audio_buffer.speech_started' && log.events.indexOf(e) > log.events.indexOf(firstAudio)),
      );
      const late = log.events.slice(at + 1).filter((e) => e.response_id === responseId);
      assert.deepEqual(
        late.map((e) => e.type),
        [],
      );
      const truncated = log.events.find((e) => e.type === 'conversation.item.truncated' && e.item_id === firstAudio.item_id);
      assert.ok(truncated !== undefined, 'conversation.item.truncated');
      const sentMs = log.events
        .filter((e) => e.type === 'response.output_audio.delta' && e.response_id === responseId)
        .reduce((n, e) => n + Buffer.from(String(e.delta), 'base64').length / 48, 0);
      assert.ok(Number(truncated.audio_end_ms) <= Math.ceil(sentMs), `${String(truncated.audio_end_ms)} ms truncated of ${sentMs} ms sent`);
      await waitFor(() => llm.requests[before]?.isAborted === true, 'the cancelled LLM request to be aborted');
    } finally {
      llm.reply = REPLY;
      llm.tokenDelayMs = 0;
    }
  });

  it('function calling: the LLM’s call streams as a function_call item, and its result answered by the client reaches the LLM', async () => {
    const { socket, log, send } = await rawSession();
    const tool = {
      type: 'function',
      name: 'book_table',
      description: 'Books a table.',
      parameters: { type: 'object', properties: { people: { type: 'integer' } }, required: ['people'] },
    };
    send({ ...TEXT_SESSION, session: { ...TEXT_SESSION.session, tools: [tool], tool_choice: 'auto' } });
    const updated = await log.until((e) => e.type === 'session.updated');
    assert.deepEqual((updated.session as { tools: unknown[] }).tools, [tool]);
    llm.toolCall = { name: 'book_table', arguments: '{"people": 2}' };
    try {
      const before = llm.requests.length;
      send({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a table for two' }] },
      });
      send({ type: 'response.create' });
      const first = await log.until((e) => e.type === 'response.done');
      const asked = llm.requests[before]!.body;
      assert.deepEqual(asked.tools, [
        { type: 'function', function: { name: 'book_table', description: 'Books a table.', parameters: tool.parameters } },
      ]);
      assert.equal(asked.tool_choice, 'auto');
      const argsDone = log.events.find((e) => e.type === 'response.function_call_arguments.done')!;
      assert.deepEqual([argsDone.name, argsDone.arguments, argsDone.output_index], ['book_table', '{"people": 2}', 1]);
      const deltas = log.events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta);
      assert.equal(deltas.join(''), '{"people": 2}');
      const output = (first.response as { output: { type: string; call_id?: string; status: string }[] }).output;
      const call = output.find((o) => o.type === 'function_call')!;
      assert.equal(call.call_id, argsDone.call_id);
      assert.equal(call.status, 'completed');
      // The client runs the function and answers; the next response gives the LLM the call and its result.
      send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: call.call_id, output: '{"booked": true}' } });
      await log.until((e) => e.type === 'conversation.item.done' && (e.item as { type?: string }).type === 'function_call_output');
      send({ type: 'response.create' });
      const second = await log.until((e) => e.type === 'response.done' && e !== first);
      assert.equal((second.response as { output: { content: { text: string }[] }[] }).output[0]!.content[0]!.text, REPLY);
      const messages = llm.requests[before + 1]!.body.messages;
      const assistant = messages.find((m) => m.role === 'assistant' && m.tool_calls !== undefined)!;
      assert.deepEqual(assistant.tool_calls, [
        { id: call.call_id, type: 'function', function: { name: 'book_table', arguments: '{"people": 2}' } },
      ]);
      assert.deepEqual(messages.at(-1), { role: 'tool', tool_call_id: call.call_id, content: '{"booked": true}' });
      // A function result without its call's id is an error event; the session goes on.
      send({ type: 'conversation.item.create', event_id: 'bad', item: { type: 'function_call_output', output: 'x' } });
      const error = await log.until((e) => e.type === 'error');
      assert.equal((error.error as { code: string }).code, 'missing_parameter');
    } finally {
      llm.toolCall = undefined;
      socket.close();
    }
  });

  it('the LLM block switch (PUT /admin/llm) stops LLM calls from the next turn: the fallback text answers', async () => {
    const { socket, log, send } = await rawSession();
    send(TEXT_SESSION);
    await log.until((e) => e.type === 'session.updated');
    const turn = async (n: number) => {
      send({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello there' }] },
      });
      send({ type: 'response.create' });
      const done = await log.until((e) => e.type === 'response.done' && log.events.filter((x) => x.type === 'response.done').length === n);
      return (done.response as { output: { content: { text: string }[] }[] }).output[0]!.content[0]!.text;
    };
    const before = llm.requests.length;
    assert.equal((await admin('PUT', { blocked: true })).blocked, true);
    try {
      assert.equal(await turn(1), 'The assistant is unavailable.');
      assert.equal(llm.requests.length, before);
      assert.equal((await admin('GET')).blocked, true);
    } finally {
      await admin('PUT', { blocked: false });
    }
    assert.equal(await turn(2), REPLY);
    assert.equal(llm.requests.length, before + 1);
    const state = await admin('GET');
    assert.ok(Number(state.spent_today_usd) > 0, JSON.stringify(state));
    socket.close();
  });

  it('bad input gets error events that leave the session usable', async () => {
    const { socket, log, send } = await rawSession();
    const errorFor = async (eventId: string) => {
      const event = await log.until((e) => e.type === 'error' && (e.error as { event_id: string }).event_id === eventId);
      return (event.error as { code: string }).code;
    };
    send({ type: 'input_audio_buffer.append', event_id: 'e1', audio: speech.subarray(0, 4800).toString('base64') });
    assert.equal(await errorFor('e1'), 'session_not_configured');
    socket.send('{"type": "session.update", ');
    const malformed = await log.until((e) => e.type === 'error' && (e.error as { code: string }).code === 'invalid_event');
    assert.equal((malformed.error as { type: string }).type, 'invalid_request_error');
    send({ type: 'session.dance', event_id: 'e2' });
    assert.equal(await errorFor('e2'), 'unknown_event');
    send({
      type: 'session.update',
      event_id: 'e3',
      session: { type: 'realtime', audio: { input: { format: { type: 'audio/pcm', rate: 16000 } } } },
    });
    assert.equal(await errorFor('e3'), 'unsupported_realtime_audio_format');
    send({ type: 'session.update', event_id: 'e4', session: { type: 'realtime', audio: { input: { format: { type: 'audio/opus' } } } } });
    assert.equal(await errorFor('e4'), 'unsupported_realtime_audio_format');
    send({ ...TEXT_SESSION, event_id: 'e5' });
    await log.until((e) => e.type === 'session.updated');
    send({ type: 'session.update', event_id: 'e5b', session: { type: 'realtime', audio: { output: { voice: 'no-such-voice' } } } });
    assert.equal(await errorFor('e5b'), 'unknown_voice');
    send({ type: 'input_audio_buffer.append', event_id: 'e6', audio: Buffer.alloc(100 * 1024).toString('base64') });
    assert.equal(await errorFor('e6'), 'append_too_large');
    send({ type: 'input_audio_buffer.append', event_id: 'e7', audio: Buffer.alloc(3).toString('base64') });
    assert.equal(await errorFor('e7'), 'invalid_audio_data');
    send({ type: 'input_audio_buffer.append', event_id: 'e8', audio: 'not base64!' });
    assert.equal(await errorFor('e8'), 'invalid_audio_data');
    send({ type: 'input_audio_buffer.commit', event_id: 'e9' });
    assert.equal(await errorFor('e9'), 'input_audio_buffer_commit_empty');
    send({ type: 'response.cancel', event_id: 'e10' });
    assert.equal(await errorFor('e10'), 'response_cancel_not_active');
    // Without turn detection nothing commits: appends past realtime.maxBufferMs (120 s) are refused.
    const silence = Buffer.alloc(64 * 1024).toString('base64'); // 1.37 s at 24 kHz
    for (let i = 0; i < 90; i++) send({ type: 'input_audio_buffer.append', event_id: `b${i}`, audio: silence });
    const full = await log.until((e) => e.type === 'error' && (e.error as { code: string }).code === 'input_audio_buffer_full');
    assert.equal((full.error as { event_id: string }).event_id, 'b87', 'the first append past 120 s');
    send({ type: 'input_audio_buffer.clear' });
    await log.until((e) => e.type === 'input_audio_buffer.cleared');
    send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] } });
    send({ type: 'response.create' });
    const done = await log.until((e) => e.type === 'response.done');
    assert.equal((done.response as { status: string }).status, 'completed');
    assert.equal(socket.readyState, WebSocket.OPEN);
    socket.close();
  });

  it('OpenAI’s session rules: a commit under 100 ms is refused, rate_limits.updated follows response.done, the voice is fixed once audio was sent', async () => {
    const { socket, log, send } = await rawSession();
    send({
      type: 'session.update',
      session: {
        type: 'realtime',
        audio: {
          input: { turn_detection: null, transcription: { model: 'whisper-1', language: 'en', prompt: 'table, tomorrow, evening' } },
          output: { voice: 'alloy' },
        },
      },
    });
    const updated = await log.until((e) => e.type === 'session.updated');
    const transcription = (updated.session as { audio: { input: { transcription: unknown } } }).audio.input.transcription;
    assert.deepEqual(transcription, { model: 'whisper-1', language: 'en', prompt: 'table, tomorrow, evening' });
    send({ type: 'input_audio_buffer.append', audio: speech.subarray(0, FRAME_BYTES / 2).toString('base64') });
    send({ type: 'input_audio_buffer.commit', event_id: 'short' });
    const short = await log.until((e) => e.type === 'error' && (e.error as { event_id: string }).event_id === 'short');
    assert.deepEqual(short.error, {
      type: 'invalid_request_error',
      code: 'input_audio_buffer_commit_empty',
      message:
        'Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has 50.00ms of audio.',
      param: null,
      event_id: 'short',
    });
    sendSpeech(send, speech.subarray(FRAME_BYTES / 2));
    send({ type: 'input_audio_buffer.commit' });
    const completed = await log.until((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assertHeard(String(completed.transcript));
    send({ type: 'response.create' });
    const done = await log.until((e) => e.type === 'response.done');
    assert.equal((done.response as { status: string }).status, 'completed');
    const limits = await log.until((e) => e.type === 'rate_limits.updated');
    assert.equal(log.events.indexOf(limits), log.events.indexOf(done) + 1);
    // No LLM budget is configured here: no limit applies.
    assert.deepEqual(limits.rate_limits, []);
    assert.ok(log.events.some((e) => e.type === 'response.output_audio.delta'));
    send({ type: 'session.update', event_id: 'voice', session: { type: 'realtime', audio: { output: { voice: 'echo' } } } });
    const refused = await log.until((e) => e.type === 'error' && (e.error as { event_id: string }).event_id === 'voice');
    assert.equal((refused.error as { code: string }).code, 'cannot_update_voice');
    assert.equal(log.events.filter((e) => e.type === 'session.updated').length, 1);
    socket.close();
  });

  it('a client that vanishes mid-response frees its resources: the LLM request is aborted, no stream or request is left', async () => {
    llm.reply = 'One moment please. '.repeat(30);
    llm.tokenDelayMs = 30;
    try {
      const { socket, log, send } = await rawSession();
      send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
      await log.until((e) => e.type === 'session.updated');
      const before = llm.requests.length;
      send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'wait' }] } });
      send({ type: 'response.create' });
      await log.until((e) => e.type === 'response.output_audio.delta');
      socket.terminate();
      await waitFor(() => llm.requests[before]?.isAborted === true, 'the LLM request to be aborted');
      await waitFor(() => {
        const stats = server.scheduler.stats();
        return stats.running === 0 && stats.queued === 0 && stats.streamsRunning === 0 && stats.streamsQueued === 0;
      }, 'the scheduler to hold nothing');
      const sessions = await server.metrics.realtimeSessions.get();
      assert.equal(sessions.values[0]?.value ?? 0, 0);
    } finally {
      llm.reply = REPLY;
      llm.tokenDelayMs = 0;
    }
  });

  it('authentication: the key in the subprotocols as the SDK browser client sends it; a wrong or missing key gets 401', async () => {
    const { socket } = await rawSession({ protocols: ['realtime', `openai-insecure-api-key.${KEY}`] });
    assert.equal(socket.protocol, 'realtime');
    socket.close();
    await assert.rejects(rawSession({ protocols: ['realtime', 'openai-insecure-api-key.sk-wrong-key-0000'] }), /HTTP 401/);
    await assert.rejects(rawSession({ headers: {} }), /HTTP 401/);
  });

  it('a transcription session (intent=transcription) gets the transcript and no response', async () => {
    const { socket, log, send } = await rawSession({ query: 'intent=transcription' });
    send({ type: 'session.update', session: { type: 'transcription', audio: { input: { transcription: { model: 'whisper-1' } } } } });
    const updated = await log.until((e) => e.type === 'session.updated');
    assert.equal((updated.session as { type: string }).type, 'transcription');
    sendSpeech(send);
    const completed = await log.until((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assertHeard(String(completed.transcript));
    socket.close();
    assert.ok(!log.events.some((e) => e.type.startsWith('response.')));
  });

  it('sessions beyond realtime.maxSessions get 429 too_many_sessions before the WebSocket opens', async () => {
    // The sessions of the tests before are gone once the server has seen their sockets close.
    for (let i = 0; i < 100 && ((await server.metrics.realtimeSessions.get()).values[0]?.value ?? 0) > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const open = [await rawSession(), await rawSession(), await rawSession()];
    await assert.rejects(rawSession(), (err: Error & { body: string; retryAfter: string | undefined }) => {
      assert.match(err.message, /HTTP 429/);
      const envelope = JSON.parse(err.body) as { error: { code: string; type: string } };
      assert.deepEqual([envelope.error.code, envelope.error.type], ['too_many_sessions', 'rate_limit_error']);
      assert.ok(err.retryAfter !== undefined && Number(err.retryAfter) > 0, `Retry-After ${err.retryAfter}`);
      return true;
    });
    open[0]!.socket.close();
    await new Promise((resolve) => open[0]!.socket.once('close', resolve));
    let reopened: Awaited<ReturnType<typeof rawSession>> | undefined;
    for (let i = 0; i < 50 && reopened === undefined; i++) {
      reopened = await rawSession().catch(async () => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        return undefined;
      });
    }
    assert.ok(reopened !== undefined, 'a freed slot takes a new session');
    for (const s of [...open.slice(1), reopened]) s.socket.close();
  });
});
