import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { countServing, trackConnections } from './connections.js';

let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
});

/** A server whose requests stay open until the test ends them. */
async function listen(): Promise<{ port: number; responses: ServerResponse[]; tracker: ReturnType<typeof trackConnections> }> {
  const responses: ServerResponse[] = [];
  server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first');
    responses.push(res);
  });
  const tracker = trackConnections(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as AddressInfo).port, responses, tracker };
}

async function open(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.resume(); // read what comes, so that the server's close is seen
  return socket;
}

const closed = (socket: Socket) => new Promise<void>((resolve) => (socket.closed ? resolve() : socket.once('close', () => resolve())));

describe('trackConnections', { timeout: 5000 }, () => {
  it('closes a connection with no request yet and one whose request finished, never one serving a request', async () => {
    const { port, responses, tracker } = await listen();
    const spare = await open(port);
    const serving = await open(port);
    serving.write('GET /a HTTP/1.1\r\nHost: x\r\n\r\n');
    const keptAlive = await open(port);
    keptAlive.write('GET /b HTTP/1.1\r\nHost: x\r\n\r\n');
    while (responses.length < 2) await new Promise((r) => setTimeout(r, 5));
    // The second request ends; its keep-alive connection stays open, serving nothing.
    const finished = responses[1]!;
    finished.end();
    await once(finished, 'close');
    await new Promise((r) => setTimeout(r, 20));

    assert.equal(tracker.closeIdle(), 2);
    await Promise.all([closed(spare), closed(keptAlive)]);
    assert.equal(serving.destroyed, false);
    assert.equal(tracker.closeIdle(), 0);

    // Once its response ends, the last connection is idle too.
    responses[0]!.end();
    await once(responses[0]!, 'close');
    assert.equal(tracker.closeIdle(), 1);
    await closed(serving);
  });

  it('counts an upgraded connection (a WebSocket) as serving', async () => {
    const { port, tracker } = await listen();
    server!.on('upgrade', (_req, socket: Socket) =>
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n'),
    );
    const upgraded = await open(port);
    upgraded.write('GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n');
    await once(upgraded, 'data');
    assert.equal(tracker.closeIdle(), 0);
    assert.equal(upgraded.destroyed, false);
    upgraded.destroy();
  });
});

describe('countServing', { timeout: 5000 }, () => {
  it('counts requests until their responses close and upgraded connections until they close', async () => {
    const responses: ServerResponse[] = [];
    server = createServer((_req: IncomingMessage, res: ServerResponse) => responses.push(res));
    const serving = countServing(server);
    // As a WebSocket server does: answer the upgrade, and end the connection when the client does.
    server.on('upgrade', (_request: IncomingMessage, socket: Socket) => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\n\r\n');
      socket.once('end', () => socket.end());
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    assert.equal(serving(), 0);
    const call = await open(port);
    call.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    const upgraded = await open(port);
    upgraded.write('GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n');
    while (serving() < 2) await new Promise((resolve) => setImmediate(resolve));
    responses[0]!.end('done');
    while (serving() > 1) await new Promise((resolve) => setImmediate(resolve));
    upgraded.destroy();
    while (serving() > 0) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(serving(), 0);
    call.destroy();
  });
});
