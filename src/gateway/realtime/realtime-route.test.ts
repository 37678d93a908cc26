import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { WebSocket } from 'ws';
import { FakeClock, settle } from '../../../test/support/fake-clock.js';
import type { CatalogEntry, StreamCall, StreamOpenInput, TranscriptionRequest } from '../../scheduler/index.js';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics } from '../../telemetry/metrics.js';
import {
  buildGateway,
  createEnergyDetector,
  type GatewayDeps,
  type ModelCatalog,
  type ModelEntry,
  type ModelLifecycleControl,
} from '../index.js';
import type { RealtimeOptions } from './realtime-route.js';

const ENTRIES: ModelEntry[] = [
  { id: 'asr', created: 1, ownedBy: 'voxmux', task: 'transcription', languages: ['en', 'de'] },
  // OpenAI's names follow the catalogue (vits' defaults); 'cold' declares its voices once woken.
  {
    id: 'cold',
    created: 1,
    ownedBy: 'voxmux',
    task: 'speech',
    speech: { voiceAliases: {}, catalogVoiceAliases: ['alloy', 'ash'], hasVoiceResources: true },
  },
];
const catalog: ModelCatalog = { list: () => ENTRIES, resolve: (name) => (ENTRIES.some((m) => m.id === name) ? name : undefined) };

const VOICE = (name: string): CatalogEntry => ({
  name,
  kind: 'voice',
  language: 'en-US',
  sampleRate: 16000,
  gender: null,
  description: name,
});

const REALTIME: RealtimeOptions = {
  transcriptionModel: 'asr',
  speechModel: 'cold',
  instructions: 'Be brief.',
  maxAppendBytes: 1 << 20,
  maxBufferMs: 60_000,
  maxSessions: 4,
  partialIntervalMs: 0,
  turnTimeoutMs: 10_000,
  gpuHourUsd: 0,
  llm: {
    baseUrl: '',
    apiKey: '',
    model: '',
    isBlocked: false,
    fallbackText: 'Fallback.',
    inputUsdPerMillionTokens: 0,
    outputUsdPerMillionTokens: 0,
    dailyBudgetUsd: 0,
    connectTimeoutMs: 1000,
    maxOutputTokens: 100,
  },
};

/** A speech stream that sends one chunk of 24 kHz audio and ends. */
function oneChunkStream(): StreamCall {
  return {
    done: Promise.resolve({ chunks: 1 }) as unknown as StreamCall['done'],
    cancel: () => undefined,
    async *[Symbol.asyncIterator]() {
      yield { index: 0, meta: { sampleRate: 24000 }, bytes: new Uint8Array(480).fill(1) };
    },
  };
}

let current: FastifyInstance | undefined;
afterEach(async () => {
  await current?.close();
  current = undefined;
});

async function setup(options: {
  catalogs: Record<string, CatalogEntry[]>;
  lifecycle?: ModelLifecycleControl;
  transcribe?: GatewayDeps['transcribe'];
}) {
  const clock = new FakeClock();
  const metrics = createMetrics();
  const opened: StreamOpenInput[] = [];
  const app = await buildGateway(
    {
      maxBodyBytes: 64 * 1024,
      requestTimeoutMs: 30_000,
      apiKeys: [],
      uploadPoolBytes: 0,
      uploadPoolIdleMs: 10_000,
      bodyTimeoutMs: 60_000,
      splitAboveMs: 0,
      pieceTargetMs: 1000,
      maxPieceMs: 2000,
      realtime: REALTIME,
    },
    {
      transcribe: options.transcribe ?? (() => assert.fail('This test transcribes nothing')),
      openStream: (_model, input) => {
        opened.push(input);
        return oneChunkStream();
      },
      voices: { models: () => [], catalog: (model) => options.catalogs[model] ?? [], residency: () => [] },
      models: catalog,
      ...(options.lifecycle === undefined ? {} : { lifecycle: options.lifecycle }),
      readiness: () => ({ isReady: true, body: {} }),
      metricsText: () => metrics.registry.metrics(),
      metricsContentType: metrics.registry.contentType,
      decoder: { decode: () => assert.fail('These tests decode nothing') },
      voiceActivity: createEnergyDetector(),
      clock,
      log: createLogger({ level: 'silent' }),
      metrics,
    },
  );
  current = app;
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  /** A realtime call over a real socket. */
  const dial = async (path: string) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`);
    // Listened to before it opens: session.created may come with the upgrade.
    const client = listen(ws);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    return { ws, ...client };
  };
  return { dial, opened };
}

/** The server events of a socket, and a wait for the first of a type. */
function listen(ws: WebSocket) {
  const events: Record<string, unknown>[] = [];
  const waiters: { type: string; resolve: (e: Record<string, unknown>) => void }[] = [];
  ws.on('message', (data) => {
    const event = JSON.parse(String(data)) as Record<string, unknown>;
    events.push(event);
    for (const w of waiters.filter((x) => x.type === event.type)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(event);
    }
  });
  const next = (type: string) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const seen = events.find((e) => e.type === type);
      if (seen !== undefined) resolve(seen);
      else waiters.push({ type, resolve });
    });
  const send = (event: Record<string, unknown>) => ws.send(JSON.stringify(event));
  return { events, next, send };
}

describe('GET /v1/realtime', () => {
  it(
    'wakes a speech model that has declared no voices yet, and waits for it, before a reply speaks in an OpenAI voice',
    { timeout: 10_000 },
    async () => {
      const catalogs: Record<string, CatalogEntry[]> = { cold: [] };
      const woken: string[] = [];
      const lifecycle: ModelLifecycleControl = {
        state: () => 'ready',
        wake: async (model, { isWaiting }) => {
          woken.push(`${model} waiting=${isWaiting}`);
          await settle();
          catalogs[model] = [VOICE(`${model}-0`), VOICE(`${model}-1`)];
          return 'ready';
        },
        sleep: async () => 'stopped',
      };
      const { dial, opened } = await setup({ catalogs, lifecycle });
      const client = await dial('/v1/realtime?model=gpt-realtime');
      await client.next('session.created');
      client.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { voice: 'ash' } } } });
      await client.next('session.updated');
      client.send({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello.' }] },
      });
      client.send({ type: 'response.create' });
      const done = await client.next('response.done');
      client.ws.terminate();
      assert.equal(
        (done.response as { status: string }).status,
        'completed',
        JSON.stringify(client.events.filter((e) => e.type === 'error')),
      );
      assert.deepEqual(woken, ['cold waiting=true']);
      assert.ok(opened.length > 0);
      assert.ok(opened.every((input) => input.resource === 'cold-1' && (input.params as { voice: string }).voice === 'cold-1'));
      assert.ok(client.events.some((e) => e.type === 'response.output_audio.delta'));
    },
  );

  it(
    'session.update: an input transcription language the transcription model does not recognise is unsupported_option, the session unchanged',
    { timeout: 10_000 },
    async () => {
      const { dial } = await setup({ catalogs: { cold: [VOICE('cold-0')] } });
      const client = await dial('/v1/realtime?model=gpt-realtime');
      await client.next('session.created');
      const update = (language: string) =>
        client.send({
          type: 'session.update',
          event_id: `lang-${language}`,
          session: { type: 'realtime', audio: { input: { transcription: { model: 'whisper-1', language } } } },
        });
      update('fr');
      const error = (await client.next('error')).error as { code: string; param: string; event_id: string };
      assert.deepEqual(
        [error.code, error.param, error.event_id],
        ['unsupported_option', 'session.audio.input.transcription.language', 'lang-fr'],
      );
      update('de');
      const updated = await client.next('session.updated');
      client.ws.terminate();
      const transcription = (updated.session as { audio: { input: { transcription: unknown } } }).audio.input.transcription;
      assert.deepEqual(transcription, { model: 'whisper-1', language: 'de' });
      assert.equal(client.events.filter((e) => e.type === 'session.updated').length, 1);
    },
  );

  it(
    'the transcription request of a committed turn carries the session’s input transcription language and prompt',
    { timeout: 10_000 },
    async () => {
      const requests: TranscriptionRequest[] = [];
      const { dial } = await setup({
        catalogs: { cold: [VOICE('cold-0')] },
        transcribe: async (_model, request) => {
          requests.push(request);
          return { text: ' hallo ' } as Awaited<ReturnType<GatewayDeps['transcribe']>>;
        },
      });
      const client = await dial('/v1/realtime?intent=transcription');
      await client.next('session.created');
      client.send({
        type: 'session.update',
        session: {
          type: 'transcription',
          audio: { input: { turn_detection: null, transcription: { model: 'whisper-1', language: 'de', prompt: 'Grüezi, voxmux' } } },
        },
      });
      await client.next('session.updated');
      client.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(9600).toString('base64') });
      client.send({ type: 'input_audio_buffer.commit' });
      const completed = await client.next('conversation.item.input_audio_transcription.completed');
      client.ws.terminate();
      assert.equal(completed.transcript, 'hallo');
      assert.deepEqual(
        requests.map((r) => [r.language, r.prompt]),
        [['de', 'Grüezi, voxmux']],
      );
    },
  );
});
