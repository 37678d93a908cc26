/**
 * A gateway thread's passed-on routes (forward.ts) against a real upstream on loopback: a WebSocket
 * upgrade is piped both ways, /admin/llm goes through as it came, and when the upstream cannot be
 * reached (the main thread has closed its port) both get the OpenAI envelope instead of a bare close.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import fastify, { type FastifyInstance } from 'fastify';
import { WebSocket, WebSocketServer } from 'ws';
import { registerForwardedRoutes } from './forward.js';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** An upstream that echoes WebSocket messages and answers GET /admin/llm with what it received. */
async function startUpstream(): Promise<{ url: string; server: Server }> {
  const server = createServer((request, response) => {
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify({ method: request.method, url: request.url, key: request.headers.authorization ?? null }));
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (socket, request) => {
    socket.on('message', (data) => socket.send(`${request.url} ${String(data)}`));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** A port nothing listens on (bound, read, released). */
async function deadUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

async function startForwarder(ownerUrl: string): Promise<{ app: FastifyInstance; url: string }> {
  const app = fastify();
  await registerForwardedRoutes(app, { ownerUrl, timeoutMs: 5000 });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  closers.push(() => app.close());
  return { app, url };
}

function openSocket(url: string): Promise<{ socket?: WebSocket; status?: number; body?: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${url.replace('http', 'ws')}/v1/realtime?model=m`);
    socket.once('open', () => resolve({ socket }));
    socket.once('unexpected-response', (_request, response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode, body }));
    });
    socket.once('error', reject);
  });
}

describe('passed-on routes', () => {
  it('pipes a WebSocket upgrade to the upstream and back, and passes /admin/llm on with its headers', async () => {
    const upstream = await startUpstream();
    const { url } = await startForwarder(upstream.url);
    const { socket } = await openSocket(url);
    assert.ok(socket !== undefined);
    const echoed = new Promise<string>((resolve) => socket.once('message', (data) => resolve(String(data))));
    socket.send('hello');
    assert.equal(await echoed, '/v1/realtime?model=m hello');
    socket.close();
    const res = await fetch(`${url}/admin/llm`, { headers: { authorization: 'Bearer k' } });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { method: 'GET', url: '/admin/llm', key: 'Bearer k' });
  });

  it('answers an upgrade it cannot pass on with a 503 shutting_down envelope', async () => {
    const { url } = await startForwarder(await deadUrl());
    const answer = await openSocket(url);
    assert.equal(answer.socket, undefined);
    assert.equal(answer.status, 503);
    const body = JSON.parse(answer.body ?? '') as { error: { code: string; type: string } };
    assert.equal(body.error.code, 'shutting_down');
    assert.equal(body.error.type, 'server_error');
  });

  it('answers /admin/llm it cannot pass on with a 503 shutting_down envelope', async () => {
    const { url } = await startForwarder(await deadUrl());
    const res = await fetch(`${url}/admin/llm`);
    assert.equal(res.status, 503);
    const body = (await res.json()) as { error: { code: string; type: string } };
    assert.equal(body.error.code, 'shutting_down');
  });
});
