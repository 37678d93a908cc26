/**
 * buildGateway: the HTTP API as a fastify instance, not yet listening (app/main.ts listens).
 * Routes raise ServiceErrors; the error handler maps them once, through error-mapping.ts.
 */
import multipart from '@fastify/multipart';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { errors } from '../core/error-catalog.js';
import { ServiceError } from '../core/errors.js';
import { authorizationOf, createKeyChecker } from './auth.js';
import { toRequestLogLine, type CallRecord } from './call-record.js';
import { fromClientError, toErrorKind, toHttpError, toRawHttpResponse, toServiceError } from './error-mapping.js';
import type { GatewayDeps, GatewayOptions } from './gateway-types.js';
import { registerDiarizationRoutes } from './routes/diarization.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerMetricsRoute } from './routes/metrics.js';
import { registerModelRoutes } from './routes/models.js';
import { registerSpeechRoute } from './routes/speech.js';
import { registerTranscriptionRoute } from './routes/transcriptions.js';
import { registerTranslationRoute } from './routes/translations.js';
import { registerVoicesRoute } from './routes/voices.js';
import { registerRealtimeRoutes } from './realtime/realtime-route.js';
import { UploadPool } from './upload-pool.js';
import { countServing } from './connections.js';
import { createIdleRelease } from './idle-release.js';

const OPEN_PATHS = ['/health/live', '/health/ready', '/metrics'];
/** Paths answered as usual while draining: liveness and metrics; readiness then answers 503 like the API. */
const DRAIN_OPEN_PATHS = ['/health/live', '/metrics'];
/** Multipart framing and form fields on top of the file itself. */
const FORM_OVERHEAD_BYTES = 256 * 1024;
/** How long a connection answered on the client-error path may take to read the answer. */
const CLIENT_ERROR_LINGER_MS = 1000;

declare module 'fastify' {
  interface FastifyRequest {
    voxmuxOutcome?: string;
    /** The error code the call was answered with (set with voxmuxOutcome). */
    voxmuxCode?: string;
    /** What the request log records of an API call; set by the transcription and speech routes. */
    voxmuxCall?: CallRecord;
    /** A gateway thread passed the call on to the main thread (routes/forward.ts), which counts it. */
    voxmuxForwarded?: boolean;
  }
}

export async function buildGateway(options: GatewayOptions, deps: GatewayDeps): Promise<FastifyInstance> {
  const { log, metrics, clock } = deps;
  const gatewayLog = log.child({ component: 'gateway' });
  const app = Fastify({
    loggerInstance: gatewayLog as FastifyBaseLogger,
    disableRequestLogging: true,
    bodyLimit: options.maxBodyBytes + FORM_OVERHEAD_BYTES,
    requestIdHeader: 'x-request-id',
    genReqId: () => crypto.randomUUID(),
    return503OnClosing: true,
    // A request Node's HTTP parser rejects (control characters in a header, broken chunked
    // encoding, headers over the size limit, a header timeout) never reaches a route: answer it
    // here, on the bare socket, with the same envelope and catalogued code as everything else.
    clientErrorHandler(err: Error & { code?: string }, socket) {
      const error = fromClientError(err, { bodyTimeoutMs: options.bodyTimeoutMs });
      // Node keeps the response in flight on the socket as `_httpMessage`: once it has sent its
      // head, another answer would corrupt the stream, so the connection is only closed.
      const inFlight: unknown = Reflect.get(socket, '_httpMessage');
      const isAnswered = typeof inFlight === 'object' && inFlight !== null && Reflect.get(inFlight, 'headersSent') === true;
      if (error !== undefined && !socket.destroyed && socket.writable && !isAnswered) {
        metrics.gatewayCalls.inc({ endpoint: 'unparsed', outcome: error.kind });
        gatewayLog.debug({ code: error.code, err }, 'client error');
        socket.end(toRawHttpResponse(error));
      }
      // end() lets the answer out first; the timer makes sure a peer that never reads goes too.
      clock.setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS);
    },
  });
  // Registered before multipart, which the forwarding scope neither uses nor should see (forward.ts).
  // NOTE: imported only here: loading @fastify/reply-from (and its undici) in a gateway that never
  // forwards left its glibc heap 10 to 25 MiB larger after the memory test's burst (e2e memory-idle).
  if (options.forwardTo !== undefined) {
    const { registerForwardedRoutes } = await import('./routes/forward.js');
    await registerForwardedRoutes(app, { ownerUrl: options.forwardTo, timeoutMs: options.maxRequestTimeoutMs ?? 600_000 });
  }
  await app.register(multipart, {
    throwFileSizeLimit: true,
    limits: { fileSize: options.maxBodyBytes, files: 1, fields: 32, fieldSize: 64 * 1024, parts: 40, headerPairs: 100 },
  });

  const checkKey = createKeyChecker(options.apiKeys);
  const startedAt = new WeakMap<FastifyRequest, { nowMs: number; wallMs: number }>();

  app.addHook('onRequest', async (request, reply) => {
    const started = { nowMs: clock.nowMs(), wallMs: clock.wallMs() };
    startedAt.set(request, started);
    // NOTE: the request log listens for the response's close, not fastify's onResponse, which runs
    // only on 'finish': a call whose client left, or whose stream was cut, must be recorded too.
    const requestLog = deps.requestLog;
    if (requestLog !== undefined) {
      // Tracked here rather than read from writableFinished, which inject()'s responses do not keep.
      let isWhole = false;
      reply.raw.once('finish', () => (isWhole = true));
      reply.raw.once('close', () =>
        writeCallLine(requestLog, request, { res: reply.raw, isWhole, started }, { clock, instanceGpu: deps.instanceGpu }),
      );
    }
    const path = request.url.split('?')[0] ?? '';
    // A draining node keeps listening until its pending requests finish, so that a new call learns
    // at once to go elsewhere (503 with Retry-After) instead of finding the port closed.
    if (deps.isDraining?.() === true && !DRAIN_OPEN_PATHS.includes(path)) throw errors.shuttingDown();
    if (!OPEN_PATHS.includes(path)) checkKey(authorizationOf(request.headers));
    const declared = Number(request.headers['content-length']);
    if (Number.isFinite(declared) && declared > options.maxBodyBytes + FORM_OVERHEAD_BYTES) {
      throw errors.bodyTooLarge({ maxBodyBytes: options.maxBodyBytes });
    }
  });

  app.addHook('onResponse', async (request, reply) => {
    if (request.voxmuxForwarded === true) return;
    const endpoint = request.routeOptions.url ?? 'unmatched';
    const endMs = clock.nowMs();
    const started = startedAt.get(request) ?? { nowMs: endMs, wallMs: clock.wallMs() };
    const durationMs = endMs - started.nowMs;
    const outcome = request.voxmuxOutcome ?? (reply.statusCode < 400 ? 'ok' : (toErrorKind(reply.statusCode) ?? 'internal'));
    metrics.gatewayCalls.inc({ endpoint, outcome });
    metrics.gatewayCallDuration.observe({ endpoint }, durationMs / 1000);
    if (!OPEN_PATHS.includes(endpoint)) {
      request.log.info(
        {
          requestId: request.id,
          method: request.method,
          url: request.url,
          statusCode: reply.statusCode,
          durationMs: Math.round(durationMs),
          code: request.voxmuxOutcome === 'ok' ? undefined : request.voxmuxOutcome,
        },
        'call completed',
      );
    }
  });

  // A call still running when close (or the drain before it) begins would otherwise leave a
  // keep-alive connection open, and close waits for every connection: answer it with
  // Connection: close instead.
  let isClosing = false;
  app.addHook('preClose', async () => {
    isClosing = true;
  });
  // NOTE: only once the request's body is all in. Closing a connection whose client is still
  // sending its body resets it, and the client sees the reset instead of the answer; Node reads and
  // drops the rest of an unread body by itself, and close() then ends the idle connection.
  app.addHook('onSend', async (request, reply, payload) => {
    if ((isClosing || deps.isDraining?.() === true) && isBodyIn(request)) reply.header('connection', 'close');
    return payload;
  });

  app.setErrorHandler(async (err, request, reply) => {
    // A body cut short because the client left is that client's leaving, not a fault of the body.
    const isClientGone = request.raw.destroyed && !request.raw.complete && !(err instanceof ServiceError);
    const error: ServiceError = isClientGone
      ? errors.clientDisconnected({ requestId: String(request.id) })
      : toServiceError(err, { maxBodyBytes: options.maxBodyBytes, contentType: request.headers['content-type'] });
    request.voxmuxOutcome = error.kind;
    request.voxmuxCode = error.code;
    if (error.kind === 'internal')
      request.log.error({ err: error.cause ?? err, code: error.code, requestId: request.id }, 'request failed');
    if (error.kind === 'cancelled' || reply.raw.destroyed) return;
    // A body that stopped arriving will not end: the connection goes with the answer. Any other
    // unread body is read and dropped by Node, so the client still gets the answer (see onSend).
    if (error.code === 'body_timeout' && !request.raw.complete) reply.header('connection', 'close');
    const http = toHttpError(error);
    return reply.code(http.status).headers(http.headers).type('application/json; charset=utf-8').send(http.body);
  });

  app.setNotFoundHandler(async (request) => {
    throw errors.routeNotFound({ method: request.method, url: request.url.split('?')[0] ?? '' });
  });

  // One pool for every route that takes audio uploads (transcriptions, translations, diarization);
  // when it goes idle, the rest of the idle memory goes back too (idle-release.ts).
  const releaseIdleMemory = deps.releaseIdleMemory;
  const onIdleRelease =
    releaseIdleMemory === undefined
      ? undefined
      : createIdleRelease(options.uploadPoolIdleMs, { clock: deps.clock, serving: countServing(app.server), release: releaseIdleMemory });
  const uploads = new UploadPool(
    { maxPooledBytes: options.uploadPoolBytes, idleMs: options.uploadPoolIdleMs },
    {
      clock: deps.clock,
      onChange: ({ pooledBytes, allocatedBytes }) => {
        deps.metrics.uploadPoolBytes.set(pooledBytes);
        if (allocatedBytes > 0) deps.metrics.uploadAllocatedBytes.inc(allocatedBytes);
      },
      ...(onIdleRelease === undefined ? {} : { onIdleRelease }),
    },
  );
  registerTranscriptionRoute(app, options, deps, uploads);
  registerTranslationRoute(app, options, deps, uploads);
  registerSpeechRoute(app, options, deps);
  registerDiarizationRoutes(app, options, deps, uploads);
  registerModelRoutes(app, deps);
  registerVoicesRoute(app, deps);
  if (options.forwardTo === undefined) registerRealtimeRoutes(app, options, deps);
  registerHealthRoutes(app, deps);
  registerMetricsRoute(app, deps);
  return app;
}

/** Status recorded for a call whose response was cut before it was sent whole, before any status went out (nginx's). */
export const CLOSED_BEFORE_ANSWER_STATUS = 499;

function writeCallLine(
  requestLog: NonNullable<GatewayDeps['requestLog']>,
  request: FastifyRequest,
  end: { res: FastifyReply['raw']; isWhole: boolean; started: { nowMs: number; wallMs: number } },
  context: { clock: GatewayDeps['clock']; instanceGpu: GatewayDeps['instanceGpu'] },
): void {
  const record = request.voxmuxCall;
  if (record === undefined) return;
  const { res, isWhole, started } = end;
  const endMs = context.clock.nowMs();
  requestLog.write(
    toRequestLogLine(record, {
      arrivedWallMs: started.wallMs,
      durationMs: endMs - started.nowMs,
      endMs,
      status: isWhole || res.headersSent ? res.statusCode : CLOSED_BEFORE_ANSWER_STATUS,
      // The route learns of a cut only after this event: a cut without a code of its own is the client's leaving.
      code: request.voxmuxCode ?? (isWhole ? undefined : 'client_disconnected'),
      gpuOf: (instanceId) => context.instanceGpu?.(instanceId),
    }),
  );
}

/** Whether a request's body has all arrived: it has none, or the parser has read it to its end. */
function isBodyIn(request: FastifyRequest): boolean {
  if (request.raw.complete) return true;
  const hasBody = request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
  return !hasBody;
}
