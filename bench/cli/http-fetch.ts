/**
 * The bench client's HTTP transport: the subset of `fetch` the bench uses, over node:http with
 * keep-alive connections. A request body given as bytes is written to the socket as is; Node's
 * fetch copies it and streams it again in small cloned chunks, which at hundreds of 1.4 MB
 * uploads a second made the client, not the server, the bottleneck. Redirects are never followed
 * (the response is returned, as with `redirect: 'manual'`).
 */
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';

const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/** Builds a fetch-compatible function with its own keep-alive agents (one connection per request in flight). */
export function createHttpFetch(): typeof globalThis.fetch {
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY }),
  };
  return (async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    if (input instanceof Request) throw new TypeError('Expected a URL: Request objects are not supported');
    const url = new URL(input);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`Expected an http(s) URL: got ${url.protocol}`);
    const body = bodyBytes(init.body);
    const headers: Record<string, string> = { ...toHeaderRecord(init.headers) };
    if (body !== undefined) headers['content-length'] = String(body.byteLength);
    const signal = init.signal ?? undefined;
    signal?.throwIfAborted();
    const module = url.protocol === 'https:' ? https : http;
    return new Promise<Response>((resolve, reject) => {
      const request = module.request(url, { method: init.method ?? 'GET', headers, agent: agents[url.protocol as 'http:' | 'https:'] });
      const onAbort = () => request.destroy(signal?.reason instanceof Error ? signal.reason : new Error('Aborted'));
      signal?.addEventListener('abort', onAbort, { once: true });
      request.once('close', () => signal?.removeEventListener('abort', onAbort));
      request.once('error', (err) => reject(new TypeError('fetch failed', { cause: err })));
      request.once('response', (response) => {
        const status = response.statusCode ?? 0;
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(response.headers)) {
          if (value === undefined) continue;
          for (const item of Array.isArray(value) ? value : [value]) responseHeaders.append(name, item);
        }
        if (NULL_BODY_STATUSES.has(status)) {
          response.resume();
          resolve(new Response(null, { status, headers: responseHeaders }));
          return;
        }
        resolve(new Response(Readable.toWeb(response) as ReadableStream<Uint8Array>, { status, headers: responseHeaders }));
      });
      request.end(body);
    });
  }) as typeof globalThis.fetch;
}

function bodyBytes(body: RequestInit['body']): Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError('Expected a string or bytes as the request body');
}

function toHeaderRecord(headers: RequestInit['headers']): Record<string, string> {
  if (headers === undefined) return {};
  return Object.fromEntries(new Headers(headers).entries());
}
