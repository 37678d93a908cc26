/**
 * The HTTP server's connections and whether each is serving a request, so that a draining server
 * can close the ones that serve none. Node's own `closeIdleConnections()` closes only keep-alive
 * connections that have finished a request: a connection opened but with no request yet (clients
 * open spares, e.g. after cancelling a call) would otherwise hold the drain until the server's
 * headers timeout (about a minute). A WebSocket (an upgraded connection) counts as serving until
 * it closes. Also: how many requests are being served (countServing).
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionTracker {
  /** Destroys every connection that is serving no request; returns how many. */
  closeIdle(): number;
}

export function trackConnections(server: Server): ConnectionTracker {
  /** Each open connection and the number of its requests in progress. */
  const busy = new Map<Socket, number>();
  const release = (socket: Socket) => {
    const n = busy.get(socket);
    if (n !== undefined) busy.set(socket, Math.max(0, n - 1));
  };
  server.on('connection', (socket: Socket) => {
    busy.set(socket, 0);
    socket.once('close', () => busy.delete(socket));
  });
  server.on('request', (request, response) => {
    const socket = request.socket;
    if (!busy.has(socket)) return;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    response.once('close', () => release(socket));
  });
  server.on('upgrade', (request) => {
    const socket = request.socket;
    if (busy.has(socket)) busy.set(socket, (busy.get(socket) ?? 0) + 1);
  });
  return {
    closeIdle() {
      let closed = 0;
      for (const [socket, n] of busy) {
        if (n > 0 || socket.destroyed) continue;
        socket.destroy();
        closed += 1;
      }
      return closed;
    },
  };
}

/**
 * How many requests the server is answering now, an upgraded connection (a WebSocket) counting as
 * one until it closes: what decides whether a pause (a full garbage collection) would delay a call.
 */
export function countServing(server: Server): () => number {
  let serving = 0;
  const done = () => {
    serving -= 1;
  };
  server.on('request', (_request, response) => {
    serving += 1;
    response.once('close', done);
  });
  server.on('upgrade', (request) => {
    serving += 1;
    request.socket.once('close', done);
  });
  return () => serving;
}
