/**
 * A gateway thread's stateful routes, passed on to the main thread's own gateway (its address is
 * GatewayOptions.forwardTo): realtime calls (their session count and the LLM's budget live there)
 * and /admin/llm. Requests go through @fastify/reply-from with
 * their bodies unread; WebSocket upgrades are piped as bytes. The main thread checks their keys,
 * answers, logs and counts them; the thread does neither.
 */
import replyFrom from '@fastify/reply-from';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { errors } from '../../core/error-catalog.js';
import { toHttpError, toRawHttpResponse, toServiceError } from '../error-mapping.js';

const FORWARDED_ROUTES: readonly { method: 'GET' | 'PUT'; url: string }[] = [
  { method: 'GET', url: '/admin/llm' },
  { method: 'PUT', url: '/admin/llm' },
];

export async function registerForwardedRoutes(app: FastifyInstance, p: { ownerUrl: string; timeoutMs: number }): Promise<void> {
  await app.register(async (scope) => {
    // Bodies go on unread (the main thread parses them and applies its limits): no multipart parser here.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    await scope.register(replyFrom, {
      base: p.ownerUrl,
      undici: { connections: 256, headersTimeout: p.timeoutMs, bodyTimeout: p.timeoutMs },
    });
    // The scope is registered before the gateway's own hooks and error handler (see gateway.ts):
    // the main thread checks keys, drains, answers and counts; a failure to reach it still gets the envelope.
    // The main thread unreachable (its port closed: it is shutting down) is `shutting_down`; a timeout keeps its own mapping.
    scope.setErrorHandler(async (err, request, reply) => {
      const error = isUnreachable(err)
        ? errors.shuttingDown()
        : toServiceError(err, { maxBodyBytes: 0, contentType: request.headers['content-type'] });
      const http = toHttpError(error);
      return reply.code(http.status).headers(http.headers).type('application/json; charset=utf-8').send(http.body);
    });
    const forward = (request: FastifyRequest, reply: FastifyReply) => {
      request.voxmuxForwarded = true;
      return reply.from(request.url);
    };
    for (const route of FORWARDED_ROUTES) scope.route({ ...route, handler: forward });
  });
  const owner = new URL(p.ownerUrl);
  app.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    pipeUpgrade({ request, socket, head }, connect(Number(owner.port), owner.hostname));
  });
}

/** reply-from's failures to reach or hear from the upstream (a refused or reset connection), as against a timeout. */
function isUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const { code, statusCode } = err as { code?: unknown; statusCode?: unknown };
  return (
    typeof code === 'string' &&
    (code.startsWith('FST_REPLY_FROM_') || code.startsWith('UND_ERR_') || code === 'ECONNRESET') &&
    statusCode !== 504
  );
}

/**
 * Sends the upgrade request to the main thread as it came, then pipes both ways until either side
 * ends. When the main thread cannot be reached (it has closed its port: the server is shutting
 * down), the client gets a 503 `shutting_down` envelope instead of a bare close.
 */
function pipeUpgrade(incoming: { request: IncomingMessage; socket: Duplex; head: Buffer }, upstream: Socket): void {
  const { request, socket, head } = incoming;
  let isConnected = false;
  const endBoth = () => {
    socket.destroy();
    upstream.destroy();
  };
  upstream.once('error', () => {
    if (isConnected || socket.destroyed) return endBoth();
    upstream.destroy();
    socket.end(toRawHttpResponse(errors.shuttingDown()));
  });
  socket.once('error', endBoth);
  upstream.once('close', () => {
    if (isConnected) endBoth();
  });
  socket.once('close', endBoth);
  upstream.once('connect', () => {
    isConnected = true;
    const lines = [`${request.method ?? 'GET'} ${request.url ?? '/'} HTTP/${request.httpVersion}`];
    for (let i = 0; i < request.rawHeaders.length; i += 2) lines.push(`${request.rawHeaders[i]}: ${request.rawHeaders[i + 1]}`);
    upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) upstream.write(head);
    socket.pipe(upstream);
    upstream.pipe(socket);
  });
}
