import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createHttpFetch } from '../../../bench/cli/http-fetch.js';

describe('createHttpFetch', () => {
  let server: http.Server;
  let base: string;
  const seen: { method: string; headers: http.IncomingHttpHeaders; body: Buffer }[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', headers: req.headers, body: Buffer.concat(chunks) });
        if (req.url === '/redirect') {
          res.writeHead(307, { location: '/elsewhere' }).end();
        } else if (req.url === '/empty') {
          res.writeHead(204).end();
        } else if (req.url === '/slow') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('first');
          setTimeout(() => res.end(' last'), 50);
        } else if (req.url === '/hang') {
          // never answers
        } else {
          res.writeHead(201, { 'content-type': 'application/json', 'x-two': ['a', 'b'] }).end(JSON.stringify({ ok: true }));
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it('posts bytes with their length and returns status, headers and body', async () => {
    const fetch = createHttpFetch();
    const body = Uint8Array.from([1, 2, 3, 250]);
    const response = await fetch(`${base}/echo`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/octet-stream', authorization: 'Bearer k' },
    });
    assert.equal(response.status, 201);
    assert.equal(response.headers.get('content-type'), 'application/json');
    assert.equal(response.headers.get('x-two'), 'a, b');
    assert.deepEqual(await response.json(), { ok: true });
    const last = seen.at(-1)!;
    assert.equal(last.method, 'POST');
    assert.equal(last.headers['content-length'], '4');
    assert.equal(last.headers.authorization, 'Bearer k');
    assert.deepEqual([...last.body], [1, 2, 3, 250]);
  });

  it('streams the response body as it arrives', async () => {
    const response = await createHttpFetch()(`${base}/slow`);
    const reader = response.body!.getReader();
    const first = await reader.read();
    assert.equal(Buffer.from(first.value!).toString(), 'first');
    let rest = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += Buffer.from(chunk.value).toString();
    assert.equal(rest, ' last');
  });

  it('returns redirects and null-body statuses without following them', async () => {
    const fetch = createHttpFetch();
    const redirect = await fetch(`${base}/redirect`, { method: 'POST', body: 'x', redirect: 'manual' });
    assert.equal(redirect.status, 307);
    assert.equal(redirect.headers.get('location'), '/elsewhere');
    await redirect.body?.cancel();
    assert.equal((await fetch(`${base}/empty`)).status, 204);
  });

  it('rejects on abort, and with the cause code when the server cannot be reached', async () => {
    const fetch = createHttpFetch();
    const controller = new AbortController();
    const pending = fetch(`${base}/hang`, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('stop')), 20);
    await assert.rejects(pending);
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await assert.rejects(
      fetch(`http://127.0.0.1:${port}/`),
      (err: unknown) => (err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED',
    );
  });
});
