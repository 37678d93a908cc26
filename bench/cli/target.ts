/**
 * The server under test: the URLs derived from --url, all on its origin, and the preflight that
 * fails fast with a clear message when the server cannot be reached.
 */
import { isModelList } from '../../src/api/openai-audio.js';
import type { Clock } from '../../src/core/clock.js';
import { BenchError, usageError } from './bench-error.js';
import { toTransportErrorCode } from './workload.js';

export interface TargetUrls {
  origin: string;
  transcriptions: string;
  speech: string;
  models: string;
  /** Undefined when scraping is off. */
  metrics?: string;
}

/**
 * Derives the endpoints from --url, which may be the server root (`http://host:8000`), the API
 * base (`http://host:8000/v1`, as OpenAI clients take it) or an endpoint itself
 * (`.../v1/audio/transcriptions`, `.../v1/audio/speech`). A --metrics-url must be on the same origin: the bench talks
 * to the one server it was given and nothing else.
 */
const ENDPOINT_PATHS = ['/audio/transcriptions', '/audio/speech'] as const;

export function resolveTargetUrls(rawUrl: string, options: { metricsUrl?: string } = {}): TargetUrls {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw usageError(`Expected --url to be an http(s) URL: got '${rawUrl}'`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw usageError(`Expected --url to be an http(s) URL: got '${rawUrl}'`);
  }
  if (url.username !== '' || url.password !== '') {
    throw usageError('Expected --url without credentials: pass the key with --api-key-file');
  }
  url.search = '';
  url.hash = '';
  const path = url.pathname.replace(/\/+$/, '');
  const endpoint = ENDPOINT_PATHS.find((suffix) => path.endsWith(suffix));
  const apiBase = endpoint !== undefined ? path.slice(0, -endpoint.length) : /\/v\d+$/.test(path) ? path : `${path}/v1`;
  const origin = url.origin;
  let metrics: string | undefined = `${origin}/metrics`;
  if (options.metricsUrl === 'off') metrics = undefined;
  else if (options.metricsUrl !== undefined) {
    let parsed: URL;
    try {
      parsed = new URL(options.metricsUrl, origin);
    } catch {
      throw usageError(`Expected --metrics-url to be a URL or 'off': got '${options.metricsUrl}'`);
    }
    if (parsed.origin !== origin) {
      throw usageError(`Expected --metrics-url on the same origin as --url (${origin}): got '${parsed.origin}'`);
    }
    metrics = parsed.href;
  }
  return {
    origin,
    transcriptions: `${origin}${apiBase}/audio/transcriptions`,
    speech: `${origin}${apiBase}/audio/speech`,
    models: `${origin}${apiBase}/models`,
    ...(metrics === undefined ? {} : { metrics }),
  };
}

export interface PreflightResult {
  status: number;
  /** Model ids, when the server answered GET /v1/models with a model list. */
  models?: string[];
}

/**
 * One GET of the model list with a short timeout. Any HTTP answer proves the server reachable
 * (servers without /v1/models answer 404); only a transport failure stops the run.
 * @throws BenchError unreachable: refused, DNS failure, TLS failure or no answer in time
 */
export async function preflight(
  options: { urls: TargetUrls; timeoutMs: number; apiKey?: string },
  deps: { fetch: typeof globalThis.fetch; clock: Clock },
): Promise<PreflightResult> {
  const { urls } = options;
  const controller = new AbortController();
  const timer = deps.clock.setTimeout(() => controller.abort(new Error('timeout')), options.timeoutMs);
  try {
    const response = await deps.fetch(urls.models, {
      signal: controller.signal,
      redirect: 'manual',
      headers: options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` },
    });
    const text = await response.text();
    let models: string[] | undefined;
    if (response.ok) {
      try {
        const body: unknown = JSON.parse(text);
        if (isModelList(body)) models = body.data.map((model) => model.id);
      } catch {
        // Not a model list: fine for a server that does not implement the route.
      }
    }
    return { status: response.status, ...(models === undefined ? {} : { models }) };
  } catch (err) {
    const reason = controller.signal.aborted ? `no answer within ${options.timeoutMs} ms` : toTransportErrorCode(err, controller.signal);
    throw new BenchError('unreachable', `Cannot reach URL: ${urls.models}: ${reason}`, { cause: err });
  } finally {
    timer.cancel();
  }
}
