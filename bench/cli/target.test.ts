import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { isBenchError } from './bench-error.js';
import { preflight, resolveTargetUrls } from './target.js';

describe('resolveTargetUrls', () => {
  it('accepts the server root, the API base and either endpoint itself', () => {
    const expected = {
      origin: 'http://h:8000',
      transcriptions: 'http://h:8000/v1/audio/transcriptions',
      speech: 'http://h:8000/v1/audio/speech',
      models: 'http://h:8000/v1/models',
      metrics: 'http://h:8000/metrics',
    };
    assert.deepEqual(resolveTargetUrls('http://h:8000'), expected);
    assert.deepEqual(resolveTargetUrls('http://h:8000/v1/'), expected);
    assert.deepEqual(resolveTargetUrls('http://h:8000/v1/audio/transcriptions?x=1'), expected);
    assert.deepEqual(resolveTargetUrls('http://h:8000/v1/audio/speech'), expected);
    assert.deepEqual(resolveTargetUrls('https://api.example.com/openai/v1'), {
      origin: 'https://api.example.com',
      transcriptions: 'https://api.example.com/openai/v1/audio/transcriptions',
      speech: 'https://api.example.com/openai/v1/audio/speech',
      models: 'https://api.example.com/openai/v1/models',
      metrics: 'https://api.example.com/metrics',
    });
  });

  it('takes a metrics URL on the same origin only, or off', () => {
    assert.equal(resolveTargetUrls('http://h:8000', { metricsUrl: '/custom/metrics' }).metrics, 'http://h:8000/custom/metrics');
    assert.equal(resolveTargetUrls('http://h:8000', { metricsUrl: 'off' }).metrics, undefined);
    assert.throws(
      () => resolveTargetUrls('http://h:8000', { metricsUrl: 'http://other:9090/metrics' }),
      (err: unknown) => isBenchError(err) && /same origin as --url \(http:\/\/h:8000\)/.test(err.message),
    );
  });

  it('rejects other schemes, garbage and embedded credentials', () => {
    for (const url of ['ftp://h/', 'not a url', 'http://user:pw@h/']) {
      assert.throws(
        () => resolveTargetUrls(url),
        (err: unknown) => isBenchError(err) && err.code === 'usage',
        url,
      );
    }
  });
});

describe('preflight', () => {
  const urls = resolveTargetUrls('http://h:8000');

  it('returns the listed models, and accepts any HTTP answer', async () => {
    const clock = new FakeClock();
    const listing = (async () =>
      new Response(
        JSON.stringify({
          object: 'list',
          data: [
            { id: 'a', object: 'model' },
            { id: 'b', object: 'model' },
          ],
        }),
      )) as typeof fetch;
    assert.deepEqual(await preflight({ urls, timeoutMs: 1000 }, { fetch: listing, clock }), { status: 200, models: ['a', 'b'] });
    const missing = (async () => new Response('no', { status: 404 })) as typeof fetch;
    assert.deepEqual(await preflight({ urls, timeoutMs: 1000 }, { fetch: missing, clock }), { status: 404 });
  });

  it('fails with a clear unreachable error on a transport failure', async () => {
    const clock = new FakeClock();
    const refused = (async () =>
      Promise.reject(Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } }))) as typeof fetch;
    await assert.rejects(preflight({ urls, timeoutMs: 1000 }, { fetch: refused, clock }), (err: unknown) => {
      assert.ok(isBenchError(err));
      assert.equal(err.code, 'unreachable');
      assert.equal(err.exitCode, 2);
      assert.equal(err.message, 'Cannot reach URL: http://h:8000/v1/models: ECONNREFUSED');
      return true;
    });
  });

  it('gives up after its timeout when the server does not answer', async () => {
    const clock = new FakeClock();
    const silent = ((_: unknown, init?: RequestInit) =>
      new Promise<Response>((_resolve, reject) =>
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason)),
      )) as typeof fetch;
    const pending = preflight({ urls, timeoutMs: 3000 }, { fetch: silent, clock });
    const check = assert.rejects(pending, /Cannot reach URL: http:\/\/h:8000\/v1\/models: no answer within 3000 ms/);
    await settle();
    clock.advance(3000);
    await check;
  });
});
