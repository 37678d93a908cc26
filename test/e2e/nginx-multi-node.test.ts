/**
 * Several voxmux nodes behind Debian's nginx, configured with the committed deploy/nginx files
 * (only the listen address and the node list are filled in): real nginx on a private prefix, real
 * voxmux processes on the test engine, all on loopback. Which node served a call is read from the
 * nodes themselves: their metrics, and the request id (passed on by nginx) in their call log.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest, type IncomingMessage } from 'node:http';
import { createHash } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';
import { waitFor } from '../support/wait-for.js';

const NGINX_DIR = fileURLToPath(new URL('../../deploy/nginx/', import.meta.url));
const NGINX = spawnSync('sh', ['-c', 'command -v nginx || ls /usr/sbin/nginx'], { encoding: 'utf8' }).stdout.trim().split('\n')[0] ?? '';
const TRANSCRIPTIONS = '/v1/audio/transcriptions';

const nodeConfig = {
  models: { echo: { adapter: 'test', instances: 1, maxBatchSize: 8, maxQueueDelayMs: 2 } },
  supervisor: { heartbeatIntervalMs: 200, restartInitialBackoffMs: 100 },
};

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const hostPort = (node: RunningServer): string => new URL(node.url).host;

/** nginx on a private prefix, running deploy/nginx/nginx.conf in the foreground as this user. */
class Nginx {
  readonly prefix = mkdtempSync(join(tmpdir(), 'voxmux-nginx-'));
  readonly url: string;
  #process: ChildProcess | undefined;
  #stderr = '';

  constructor(port: number, nodes: string[]) {
    cpSync(NGINX_DIR, this.prefix, { recursive: true });
    mkdirSync(join(this.prefix, 'temp'));
    // Started as root, nginx's workers run as nobody: they must reach the prefix too.
    chmodSync(this.prefix, 0o755);
    const site = join(this.prefix, 'voxmux.conf');
    const conf = readFileSync(site, 'utf8');
    assert.equal(conf.split('listen 127.0.0.1:8080;').length, 2, 'voxmux.conf has one listen line to fill in');
    writeFileSync(site, conf.replace('listen 127.0.0.1:8080;', `listen 127.0.0.1:${port};`));
    this.setNodes(nodes);
    this.url = `http://127.0.0.1:${port}`;
  }

  /** Rewrites voxmux-nodes.conf (host:port each) the way the committed example writes each node. */
  setNodes(nodes: string[]): void {
    const lines = nodes.map((node) => `server ${node} max_fails=1 fail_timeout=5s;`);
    writeFileSync(join(this.prefix, 'voxmux-nodes.conf'), `${lines.join('\n')}\n`);
  }

  #args(...more: string[]): string[] {
    return ['-p', this.prefix, '-c', join(this.prefix, 'nginx.conf'), '-e', 'stderr', ...more];
  }

  /** Starts nginx; `probe` waits for /health/live through it (a voxmux node behind it). */
  async start(options: { probe?: boolean } = {}): Promise<void> {
    const test = spawnSync(NGINX, this.#args('-t'), { encoding: 'utf8' });
    assert.equal(test.status, 0, test.stderr);
    const child = spawn(NGINX, this.#args('-g', 'daemon off;'), { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (d: Buffer) => (this.#stderr += d.toString()));
    this.#process = child;
    // Listening; with a voxmux node behind it, /health/live answers 200 through nginx.
    const isUp = (status: number) => (options.probe === false ? status !== 0 : status === 200);
    const deadline = Date.now() + 15_000;
    for (;;) {
      assert.equal(child.exitCode, null, `nginx exited: ${this.#stderr}`);
      const status = await fetch(`${this.url}/health/live`).then(
        (res) => res.status,
        () => 0,
      );
      if (isUp(status)) break;
      assert.ok(Date.now() < deadline, `nginx did not answer in 15 s: ${this.#stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** `nginx -s reload`: the master re-reads the configuration; old workers finish their calls. */
  reload(): void {
    const reload = spawnSync(NGINX, this.#args('-s', 'reload'), { encoding: 'utf8' });
    assert.equal(reload.status, 0, reload.stderr);
  }

  accessLog(): string {
    return readFileSync(join(this.prefix, 'access.log'), 'utf8');
  }

  async stop(): Promise<void> {
    const child = this.#process;
    if (child !== undefined && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(this.prefix, { recursive: true, force: true });
  }
}

function wavForm(seed: number): FormData {
  const form = new FormData();
  form.append('model', 'echo');
  form.append('file', new Blob([floatWav(noise(1600 + seed, seed))]), 'a.wav');
  return form;
}

async function transcribe(url: string, seed: number): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(`${url}${TRANSCRIPTIONS}`, { method: 'POST', body: wavForm(seed) });
    return { status: res.status, body: await res.text() };
  } catch (err) {
    throw new Error(`call ${seed}: ${String(err)} (${String((err as Error).cause)})`);
  }
}

/** A call for a session: answered by a node (whatever the route says), never by nginx itself. */
async function sessionCall(
  url: string,
  call: { method: string; path: string; requestId: string; sessionId?: string },
): Promise<{ status: number; body: string }> {
  const headers: Record<string, string> = { 'x-request-id': call.requestId };
  if (call.sessionId !== undefined) headers['voxmux-session-id'] = call.sessionId;
  const res = await fetch(`${url}${call.path}`, {
    method: call.method,
    headers,
    ...(call.method === 'POST' ? { body: floatWav(noise(800, 7)) } : {}),
  });
  return { status: res.status, body: await res.text() };
}

/** A WebSocket handshake for /v1/realtime, sent with node:http (fetch may not send Upgrade). */
async function realtimeHandshake(url: string, requestId: string, sessionId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}/v1/realtime?model=echo&intent=transcription`, {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': Buffer.from('voxmux-nginx-key').toString('base64'),
        'x-request-id': requestId,
        'voxmux-session-id': sessionId,
      },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 101);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The node that logged a call, or a realtime session's opening, with this request id (nginx passes x-request-id through). */
function servedBy(nodes: RunningServer[], requestId: string): number[] {
  const isServed = (l: { msg?: unknown; requestId?: unknown }) =>
    (l.msg === 'call completed' || l.msg === 'realtime session opened') && l.requestId === requestId;
  return nodes.flatMap((node, i) => (node.logs.some(isServed) ? [i] : []));
}

const okCalls = (node: RunningServer) => node.metric('voxmux_gateway_calls_total', { endpoint: TRANSCRIPTIONS, outcome: 'ok' });

/**
 * One transcription on a connection of its own (Connection: close). NOTE: a reload closes the old
 * workers' idle keep-alive connections, and a call a client writes onto one at that instant is
 * reset before nginx reads it; that race is the client's to handle (it belongs to HTTP/1.1
 * keep-alive, not to nginx or voxmux: docs/deploy.md), so the reload test measures what nginx
 * itself guarantees: no call it accepted is lost.
 */
async function transcribeOnOwnConnection(url: string, seed: number): Promise<{ status: number; body: string }> {
  const call = new Request(`${url}${TRANSCRIPTIONS}`, { method: 'POST', body: wavForm(seed) });
  const body = Buffer.from(await call.arrayBuffer());
  return new Promise((resolve, reject) => {
    const req = httpRequest(call.url, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': call.headers.get('content-type') ?? '', 'content-length': String(body.length) },
    });
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Closed-loop load: `workers` clients calling back to back until stop(); every answer is kept. */
function startLoad(url: string, workers: number) {
  let isStopped = false;
  const statuses: number[] = [];
  const failures: string[] = [];
  let seed = 10_000;
  const loops = Array.from({ length: workers }, async () => {
    while (!isStopped) {
      try {
        const answer = await transcribeOnOwnConnection(url, seed++);
        statuses.push(answer.status);
        if (answer.status !== 200) failures.push(`${answer.status} ${answer.body}`);
      } catch (err) {
        failures.push(String(err));
      }
    }
  });
  return {
    statuses,
    failures,
    async stop() {
      isStopped = true;
      await Promise.all(loops);
    },
  };
}

describe('voxmux nodes behind nginx (deploy/nginx)', { skip: NGINX === '' ? 'nginx is not installed' : false }, () => {
  let nodes: RunningServer[] = [];
  let nginx: Nginx;

  before(async () => {
    // A, B serve from the start; C joins at the reload.
    nodes = await Promise.all([0, 1, 2].map(() => startServer({ config: nodeConfig })));
    nginx = new Nginx(await freePort(), nodes.slice(0, 2).map(hostPort));
    await nginx.start();
  });

  after(async () => {
    await nginx?.stop();
    await Promise.all(nodes.map((node) => node.stop('SIGKILL')));
  });

  it('spreads concurrent stateless calls over the nodes with least connections', async () => {
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => transcribe(nginx.url, i + 1)));
    for (const answer of answers) assert.equal(answer.status, 200, answer.body);
    const served = await Promise.all(nodes.slice(0, 2).map(okCalls));
    assert.equal(served[0]! + served[1]!, 16);
    assert.ok(
      served.every((n) => n >= 3),
      `calls per node: ${served.join(', ')}`,
    );
    assert.equal(await okCalls(nodes[2]!), 0, 'node C is not in the configuration yet');
    // Each node measured its instance's busy time (the autoscaling metrics, docs/deploy.md).
    for (const node of nodes.slice(0, 2)) {
      assert.ok((await node.metric('voxmux_instance_busy_seconds_total', { model: 'echo', instance_index: '0' })) > 0);
    }
  });

  it('sends every call of one session id to one node, by path, header and realtime handshake', async () => {
    const sessionIds = Array.from({ length: 16 }, (_, i) => `sess-${i}-${process.pid}`);
    const owners = new Map<string, number>();
    for (const id of sessionIds) {
      const calls = [
        { method: 'POST', path: '/v1/audio/diarization/sessions', requestId: `${id}-create`, sessionId: id },
        { method: 'POST', path: `/v1/audio/diarization/sessions/${id}/chunks`, requestId: `${id}-chunk-0` },
        { method: 'POST', path: `/v1/audio/diarization/sessions/${id}/chunks`, requestId: `${id}-chunk-1` },
        { method: 'GET', path: `/v1/audio/diarization/sessions/${id}`, requestId: `${id}-get` },
        { method: 'POST', path: `/v1/realtime/calls/${id}/hangup`, requestId: `${id}-hangup` },
      ];
      for (const call of calls) {
        const answer = await sessionCall(nginx.url, call);
        // The routes may not exist on a node yet: what matters is that a node answered (its envelope).
        assert.ok(answer.body.includes('"error"') || answer.status < 400, `${call.requestId}: ${answer.status} ${answer.body}`);
      }
      const status = await realtimeHandshake(nginx.url, `${id}-realtime`, id);
      assert.notEqual(status, 502, `${id}: the realtime handshake reached no node`);
      const requestIds = [...calls.map((c) => c.requestId), `${id}-realtime`];
      await waitFor(() => requestIds.every((r) => servedBy(nodes, r).length === 1), `${id}: each call logged by one node`);
      const served = new Set(requestIds.flatMap((r) => servedBy(nodes, r)));
      assert.equal(served.size, 1, `${id}: calls went to nodes ${[...served].join(', ')}`);
      owners.set(id, [...served][0]!);
    }
    // Consistent hashing spreads the sessions themselves over both nodes.
    assert.deepEqual(new Set(owners.values()), new Set([0, 1]), `owners: ${JSON.stringify([...owners])}`);
  });

  it('keeps stateless calls succeeding through the others when a node is killed, and puts new sessions on live nodes', async () => {
    const load = startLoad(nginx.url, 4);
    await waitFor(() => load.statuses.length >= 20, '20 calls before the kill');
    process.kill(nodes[1]!.gatewayPid(), 'SIGKILL');
    const atKill = load.statuses.length;
    await waitFor(() => load.statuses.length >= atKill + 40, '40 calls after the kill', 30_000);
    await load.stop();
    assert.deepEqual(load.failures, []);
    for (let i = 0; i < 12; i++) {
      const id = `after-kill-${i}-${process.pid}`;
      const answer = await sessionCall(nginx.url, {
        method: 'POST',
        path: '/v1/audio/diarization/sessions',
        requestId: `${id}-create`,
        sessionId: id,
      });
      assert.notEqual(answer.status, 502, answer.body);
      await waitFor(() => servedBy(nodes, `${id}-create`).length === 1, `${id} logged`);
      assert.deepEqual(servedBy(nodes, `${id}-create`), [0], `${id} went to a live node`);
    }
  });

  it('loses no call under concurrent load when nginx reloads with a node added', async () => {
    const load = startLoad(nginx.url, 4);
    await waitFor(() => load.statuses.length >= 20, '20 calls before the reload');
    nginx.setNodes([nodes[0]!, nodes[2]!].map(hostPort));
    nginx.reload();
    // The new node is in use once the new workers run; the load continues past that point.
    const deadline = Date.now() + 30_000;
    while ((await okCalls(nodes[2]!)) < 10) {
      assert.ok(Date.now() < deadline, 'node C served no calls within 30 s of the reload');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const atJoin = load.statuses.length;
    await waitFor(() => load.statuses.length >= atJoin + 20, '20 more calls');
    await load.stop();
    assert.deepEqual(load.failures, []);
    assert.ok(load.statuses.length >= 50, `${load.statuses.length} calls`);
    assert.match(nginx.accessLog(), new RegExp(`upstream=${hostPort(nodes[2]!).replace('.', '\\.')}`));
  });
});

/**
 * A loopback WebSocket endpoint standing in for a node's /v1/realtime route (which lives elsewhere
 * than these nodes): it completes the handshake and echoes the bytes, so the test sees whether
 * nginx passes the upgrade through and then relays both ways.
 */
async function startWebSocketEcho(): Promise<{ hostPort: string; close(): Promise<void>; paths: string[] }> {
  const paths: string[] = [];
  const server = createHttpServer((_req, res) => res.writeHead(426).end());
  server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    paths.push(req.url ?? '');
    const accept = createHash('sha1')
      .update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
      .digest('base64');
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    hostPort: `127.0.0.1:${port}`,
    paths,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('WebSocket upgrade through nginx (deploy/nginx)', { skip: NGINX === '' ? 'nginx is not installed' : false }, () => {
  it('passes a /v1/realtime handshake through and relays bytes both ways', async () => {
    const echo = await startWebSocketEcho();
    const nginx = new Nginx(await freePort(), [echo.hostPort]);
    try {
      await nginx.start({ probe: false });
      const key = Buffer.from('voxmux-nginx-ws!').toString('base64');
      const socket = await new Promise<Duplex>((resolve, reject) => {
        const req = httpRequest(`${nginx.url}/v1/realtime?model=echo`, {
          headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': key },
        });
        req.on('upgrade', (res: IncomingMessage, upgraded: Duplex) => {
          assert.equal(res.statusCode, 101);
          resolve(upgraded);
        });
        req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
        req.on('error', reject);
        req.end();
      });
      const echoed = new Promise<string>((resolve) => socket.once('data', (d: Buffer) => resolve(d.toString())));
      socket.write('ping over the tunnel');
      assert.equal(await echoed, 'ping over the tunnel');
      socket.destroy();
      assert.deepEqual(echo.paths, ['/v1/realtime?model=echo']);
    } finally {
      await nginx.stop();
      await echo.close();
    }
  });
});
