/**
 * GET /v1/realtime (WebSocket): the OpenAI Realtime API over the transcription and speech models
 * and an OpenAI-compatible LLM; GET and PUT /admin/llm: the LLM block switch and today's budget.
 * Authentication is the gateway's (Bearer header, or the key a browser client puts in its
 * subprotocols); a beta client (OpenAI-Beta: realtime=v1) gets beta event names and session shape.
 */
import websocket from '@fastify/websocket';
import type { RequestLogLine } from '../../api/request-log.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import { REALTIME_BETA_HEADER_VALUE, REALTIME_BETA_SUBPROTOCOL, REALTIME_SUBPROTOCOL } from '../../api/realtime.js';
import { errors } from '../../core/error-catalog.js';
import { createFirKernel, type FirKernel } from '../audio/fir-kernel.js';
import { toRealtimeErrorBody } from '../error-mapping.js';
import type { GatewayDeps, GatewayOptions, ModelEntry } from '../gateway-types.js';
import { resolveVoice, resolveVoiceAfterWake } from '../routes/speech.js';
import { createChatClient } from './chat-client.js';
import type { ChatResponder } from './chat-responder.js';
import { createDemoResponder } from './demo-responder.js';
import { toClientEventName } from './event-names.js';
import { createLlmGate } from './llm-gate.js';
import { createRealtimeSession, type RealtimeSessionOptions } from './realtime-session.js';
import { newSessionSettings } from './session-config.js';

/** A realtime session's settings (the `realtime` config section). */
export interface RealtimeOptions {
  transcriptionModel: string;
  speechModel: string;
  instructions: string;
  maxAppendBytes: number;
  maxBufferMs: number;
  maxSessions: number;
  partialIntervalMs: number;
  turnTimeoutMs: number;
  gpuHourUsd: number;
  llm: {
    baseUrl: string;
    apiKey: string;
    model: string;
    isBlocked: boolean;
    fallbackText: string;
    inputUsdPerMillionTokens: number;
    outputUsdPerMillionTokens: number;
    dailyBudgetUsd: number;
    connectTimeoutMs: number;
    maxOutputTokens: number;
  };
}

const SESSION_RETRY_AFTER_MS = 1000;

/** Frames above this close the socket (1009); appends up to maxAppendBytes of audio fit, as base64 in JSON. */
function maxPayloadBytes(maxAppendBytes: number): number {
  return Math.ceil((maxAppendBytes * 4) / 3) * 2 + 1024 * 1024;
}

function firstOf(models: readonly ModelEntry[], task: 'transcription' | 'speech', named: string): ModelEntry | undefined {
  if (named !== '') return models.find((m) => m.id === named);
  return models.find((m) => (m.task ?? 'transcription') === task);
}

function isBeta(request: FastifyRequest): boolean {
  const header = request.headers['openai-beta'];
  const values = Array.isArray(header) ? header : [header ?? ''];
  if (values.some((v) => v.split(',').some((part) => part.trim() === REALTIME_BETA_HEADER_VALUE))) return true;
  const protocols = String(request.headers['sec-websocket-protocol'] ?? '').split(',');
  return protocols.some((p) => p.trim() === REALTIME_BETA_SUBPROTOCOL);
}

export function registerRealtimeRoutes(app: FastifyInstance, options: GatewayOptions, deps: GatewayDeps): void {
  const realtime = options.realtime;
  if (realtime === undefined) return;
  const { llm: llmOptions } = realtime;
  const gate = createLlmGate(llmOptions, { clock: deps.clock });
  const llm: ChatResponder | undefined =
    llmOptions.baseUrl === ''
      ? undefined
      : createChatClient({
          baseUrl: llmOptions.baseUrl,
          apiKey: llmOptions.apiKey,
          model: llmOptions.model,
          connectTimeoutMs: llmOptions.connectTimeoutMs,
        });
  const demo = createDemoResponder();
  const log = deps.log.child({ component: 'realtime' });
  deps.metrics.realtimeLlmTurnsRemaining.set(-1);
  if (llm === undefined) log.info('realtime: no LLM configured (realtime.llm.baseUrl): calls are answered by the demo responder');
  let kernel: FirKernel | undefined;
  let sessions = 0;

  void app.register(async (scope) => {
    await scope.register(websocket, {
      options: {
        maxPayload: maxPayloadBytes(realtime.maxAppendBytes),
        handleProtocols: (protocols) => (protocols.has(REALTIME_SUBPROTOCOL) ? REALTIME_SUBPROTOCOL : false),
      },
    });

    // An upgrade refused with an HTTP answer (401, 429, 503) leaves no HTTP connection to keep:
    // its socket is closed, else it would hold the server's close open.
    scope.addHook('onResponse', async (request) => {
      if (request.headers.upgrade !== undefined) request.raw.socket.destroy();
    });
    // Refused before the upgrade, so a full server answers an HTTP 429 with Retry-After.
    scope.addHook('preHandler', async (request) => {
      if (request.routeOptions.url !== '/v1/realtime' || sessions < realtime.maxSessions) return;
      throw errors.tooManySessions({ maxSessions: realtime.maxSessions, retryAfterMs: SESSION_RETRY_AFTER_MS });
    });
    scope.get('/v1/realtime', { websocket: true }, (socket, request) => {
      const query = request.query as Record<string, string | undefined>;
      const shape = isBeta(request) ? 'beta' : 'ga';
      const models = deps.models.list();
      const transcription = firstOf(models, 'transcription', realtime.transcriptionModel);
      const speech = firstOf(models, 'speech', realtime.speechModel);
      const sessionId = `sess_${randomUUID().replaceAll('-', '').slice(0, 20)}`;
      const arrivedWallMs = deps.clock.wallMs();
      const send = (event: { type: string } & Record<string, unknown>) => {
        const type = toClientEventName(event.type, shape);
        if (type === undefined || socket.readyState !== socket.OPEN) return;
        socket.send(JSON.stringify({ ...event, type }));
      };
      if (transcription === undefined || (speech === undefined && query.intent !== 'transcription')) {
        const missing = transcription === undefined ? 'transcription' : 'speech';
        const error = errors.modelNotFound({ model: `(a ${missing} model for realtime sessions)` });
        send({
          type: 'error',
          event_id: `event_${randomUUID().replaceAll('-', '').slice(0, 20)}`,
          error: toRealtimeErrorBody(error, undefined),
        });
        socket.close(1008, 'no model');
        return;
      }
      kernel ??= createFirKernel();
      const settings = newSessionSettings({
        kind: query.intent === 'transcription' ? 'transcription' : 'realtime',
        model: query.model ?? 'voxmux-realtime',
        instructions: realtime.instructions,
      });
      const sessionOptions: RealtimeSessionOptions = {
        sessionId,
        shape,
        settings,
        maxAppendBytes: realtime.maxAppendBytes,
        maxBufferMs: realtime.maxBufferMs,
        partialIntervalMs: realtime.partialIntervalMs,
        turnTimeoutMs: realtime.turnTimeoutMs,
        fallbackText: llmOptions.fallbackText,
        maxOutputTokens: llmOptions.maxOutputTokens,
        gpuHourUsd: realtime.gpuHourUsd,
      };
      const session = createRealtimeSession(sessionOptions, {
        send,
        transcribe: async (audio, work) => {
          const result = await deps.transcribe(
            transcription.id,
            { audio, language: work.language, prompt: work.prompt, wordTimestamps: false },
            {
              priority: work.priority,
              signal: work.signal,
              timeoutMs: work.timeoutMs,
              requestId: work.requestId,
              onDispatched: work.onDispatched,
            },
          );
          return result.text.trim();
        },
        speak: async (text, work) => {
          const model = speech!;
          const voiceSettings = model.speech ?? { voiceAliases: {}, hasVoiceResources: false };
          // As on POST /v1/audio/speech: an OpenAI voice of a model that has declared no voice yet
          // waits for its wake.
          const voice = await resolveVoiceAfterWake(work.voice, { model: model.id, settings: voiceSettings, deps });
          return deps.openStream(
            model.id,
            {
              requestId: work.requestId,
              resource: voiceSettings.hasVoiceResources ? voice : null,
              params: { sentences: [text], voice, speed: work.speed },
              body: new Uint8Array(0),
            },
            { priority: 'high', signal: work.signal, timeoutMs: work.timeoutMs, onDispatched: work.onDispatched },
          );
        },
        checkVoice: (voice) => {
          const catalog = speech === undefined ? [] : deps.voices.catalog(speech.id);
          // A model that lists no voices yet (stopped until a call wakes it) is asked at the first reply.
          if (speech === undefined || catalog.length === 0) return;
          resolveVoice(voice, { model: speech.id, settings: speech.speech ?? { voiceAliases: {}, hasVoiceResources: false }, catalog });
        },
        checkLanguage: (language, param) => {
          const languages = transcription.languages;
          if (languages !== undefined && !languages.includes(language))
            throw errors.unsupportedLanguage({ model: transcription.id, language, languages, param });
        },
        llm,
        demo,
        gate,
        openVad: () => deps.voiceActivity.openStream(),
        kernel,
        instanceGpu: (instanceId) => deps.instanceGpu?.(instanceId),
        clock: deps.clock,
        log,
        metrics: deps.metrics,
        onCallEnded: (call) =>
          deps.requestLog?.write({
            time: new Date(arrivedWallMs).toISOString(),
            durationMs: Math.round(call.durationMs * 1000) / 1000,
            model: settings.model,
            kind: 'realtime',
            audioInSeconds: call.audioInSeconds,
            audioOutSeconds: call.audioOutSeconds,
            queueMs: null,
            serviceMs: null,
            status: 101,
            code: null,
            instanceId: null,
            gpu: null,
            gpuSeconds: call.gpuSeconds,
          } satisfies RequestLogLine),
      });
      sessions += 1;
      log.info({ sessionId, requestId: request.id, shape, intent: settings.kind }, 'realtime session opened');
      socket.on('message', (data, isBinary) => {
        if (isBinary) {
          session.receiveBinary();
          return;
        }
        session.receive(Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8'));
      });
      socket.on('close', () => {
        sessions -= 1;
        session.close();
      });
    });

    scope.get('/admin/llm', async () => ({ responder: llm === undefined ? 'demo' : 'llm', ...toSnapshotBody(gate.snapshot()) }));
    scope.put('/admin/llm', async (request) => {
      const body = request.body as Record<string, unknown> | undefined;
      if (typeof body?.blocked !== 'boolean')
        throw errors.invalidParameter({ param: 'blocked', expected: 'a boolean', got: body?.blocked });
      gate.setBlocked(body.blocked);
      log.warn({ isBlocked: body.blocked }, body.blocked ? 'llm calls blocked' : 'llm calls unblocked');
      return { responder: llm === undefined ? 'demo' : 'llm', ...toSnapshotBody(gate.snapshot()) };
    });
  });
}

function toSnapshotBody(snapshot: ReturnType<ReturnType<typeof createLlmGate>['snapshot']>): Record<string, unknown> {
  return {
    blocked: snapshot.isBlocked,
    daily_budget_usd: snapshot.dailyBudgetUsd,
    spent_today_usd: snapshot.spentTodayUsd,
    turns_today: snapshot.turnsToday,
    turns_remaining: snapshot.turnsRemaining,
  };
}
