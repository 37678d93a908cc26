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
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { silentLogger } from '../support/test-logger.js';
import { waitFor } from '../support/wait-for.js';

const KEY = 'sk-realtime-test-key';
const SPOKEN = 'please book a table for two people tomorrow evening';
const REPLY = 'Sure. I booked a table for two tomorrow at seven. Anything else?';
const CERT = readFileSync(new URL('../fixtures/tls/localhost.crt', import.meta.url));
const TLS_KEY = readFileSync(new URL('../fixtures/tls/localhost.key', import.meta.url));
/** 100 ms of 24 kHz 16-bit mono. */
const FRAME_BYTES = 4800;

let server: Server;
let llm: FakeLlm;
let port: number;
let tls: TlsServer;
let tlsPort: number;
/** The caller's utterance as 24 kHz pcm16, followed by a second of silence. */
let speech: Buffer;

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
  server = await buildServer(config, { log: silentLogger(), clock: systemClock, spawn: spawnInstance, baseEnv: readProcessEnvironment() });
  await server.startInstances();
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  port = (server.app.server.address() as AddressInfo).port;
  tls = createTlsServer({ key: TLS_KEY, cert: CERT }, (secure) => {
    const plain = connect(port, '127.0.0.1');
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
  tls?.close();
  await server?.destroy();
  await llm?.close();
});

function sdkClient(): OpenAI {
  return new OpenAI({ apiKey: KEY, baseURL: `https://localhost:${tlsPort}/v1` });
}

type Event = { type: string } & Record<string, unknown>;

/** Collects every event of an SDK client; resolves `until` when an event matches. */
function recorder(rt: { on(event: 'event', listener: (event: Event) => void): unknown }) {
  const events: Event[] = [];
  const waiters: { match: (e: Event) => boolean; resolve: (e: Event) => void }[] = [];
  rt.on('event', (event) => {
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

function sendSpeech(send: (event: Record<string, unknown>) => void, audio = speech): void {
  for (let at = 0; at < audio.length; at += FRAME_BYTES) {
    send({ type: 'input_audio_buffer.append', audio: audio.subarray(at, at + FRAME_BYTES).toString('base64') });
  }
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
    const log = recorder(rt);
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
  });
});
