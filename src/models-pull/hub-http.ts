/**
 * GET over HTTP and HTTPS with keep-alive connections and an idle timeout: the only code of the
 * command that opens connections. Redirects are not followed here: hub-client.ts follows them,
 * because whether the token goes along depends on where a redirect leads.
 */
import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import { PullError } from './pull-error.js';

export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body as it arrives; read it to the end, or call discard(). */
  body: AsyncIterable<Buffer>;
  /** Drops the rest of the body and its connection. */
  discard(): void;
}

export interface HttpGetOptions {
  headers: Readonly<Record<string, string>>;
  signal?: AbortSignal;
}

export interface HubTransport {
  get(url: URL, options: HttpGetOptions): Promise<HttpResponse>;
  /** Closes the idle connections it keeps. */
  close(): void;
}

export interface HubTransportOptions {
  /** A connection that sends nothing for this long is dropped (and the download retried). @default 60000 */
  idleTimeoutMs?: number;
}

// Errors after which the same request may succeed: the connection was refused, reset, cut or
// stalled, or a name could not be resolved for now.
const TRANSIENT_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ERR_STREAM_PREMATURE_CLOSE',
]);

const DESCRIPTIONS: Readonly<Record<string, string>> = {
  ECONNRESET: 'the connection was reset',
  ECONNREFUSED: 'the connection was refused',
  ETIMEDOUT: 'the connection timed out',
  ENOTFOUND: 'the host name is unknown',
  EAI_AGAIN: 'the host name could not be resolved for now',
  ERR_STREAM_PREMATURE_CLOSE: 'the connection closed early',
};

/** A failed connection or transfer as a network_error, transient where trying again may help. */
export function toNetworkError(err: unknown, url: URL): PullError {
  if (err instanceof PullError) return err;
  const code = (err as { code?: unknown } | undefined)?.code;
  const codeText = typeof code === 'string' ? code : 'unknown';
  const description = DESCRIPTIONS[codeText] ?? (err instanceof Error ? err.message : String(err));
  return new PullError('network_error', `Could not download from ${url.host}: ${description} (${codeText})`, {
    cause: err,
    isTransient: TRANSIENT_CODES.has(codeText),
  });
}

export function createHubTransport(options: HubTransportOptions = {}): HubTransport {
  const idleTimeoutMs = options.idleTimeoutMs ?? 60_000;
  const httpAgent = new http.Agent({ keepAlive: true });
  const httpsAgent = new https.Agent({ keepAlive: true });
  return {
    get(url, { headers, signal }) {
      return new Promise<HttpResponse>((resolve, reject) => {
        const isHttps = url.protocol === 'https:';
        const request = (isHttps ? https : http).request(url, {
          method: 'GET',
          headers,
          agent: isHttps ? httpsAgent : httpAgent,
          ...(signal === undefined ? {} : { signal }),
        });
        request.setTimeout(idleTimeoutMs, () => {
          request.destroy(Object.assign(new Error(`No data for ${idleTimeoutMs} ms`), { code: 'ETIMEDOUT' }));
        });
        // Kept after the response arrives: a later error reaches the body's reader through the response.
        request.on('error', (err) => reject(signal?.aborted === true ? signal.reason : toNetworkError(err, url)));
        request.once('response', (response) => {
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: response,
            discard: () => response.destroy(),
          });
        });
        request.end();
      });
    },
    close() {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}
