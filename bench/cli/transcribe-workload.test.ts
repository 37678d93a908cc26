import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { createSseParser, createTranscribeWorkload, type TranscribeWorkloadOptions } from './transcribe-workload.js';
import { RequestAbort, type RequestOutcome } from './workload.js';

describe('createSseParser', () => {
  it('assembles events across chunk boundaries, CRLF and CR line ends, comments and multi-line data', () => {
    const parser = createSseParser();
    assert.deepEqual(parser.push(': keep-alive\n\ndata: {"a"'), []);
    assert.deepEqual(parser.push(':1}\r'), []);
    assert.deepEqual(parser.push('\n\r\nevent: error\ndata: x\ndata: y\n'), [{ data: '{"a":1}' }]);
    // A trailing CR may be half of a CRLF: the parser waits for the next text to decide.
    assert.deepEqual(parser.push('\nid: 3\ndata:no-space\r\r'), [{ event: 'error', data: 'x\ny' }]);
    assert.deepEqual(parser.end('data: last'), [{ data: 'no-space' }, { data: 'last' }]);
  });

  it('ignores events without data', () => {
    const parser = createSseParser();
    assert.deepEqual(parser.push('event: ping\n\n'), []);
  });
});

const WAV_A = { fileName: 'a.wav', contentType: 'audio/wav', bytes: new Uint8Array([1, 2, 3]), audioSeconds: 2 };
const MP3_B = { fileName: 'b.mp3', contentType: 'audio/mpeg', bytes: new Uint8Array([4, 5]) };

function options(overrides: Partial<TranscribeWorkloadOptions> = {}): TranscribeWorkloadOptions {
  return {
    endpoint: 'http://server/v1/audio/transcriptions',
    model: 'm1',
    inputs: [WAV_A, MP3_B],
    isStreaming: false,
    responseFormat: 'json',
    extraFields: [['language', 'en']],
    ...overrides,
  };
}

interface Sent {
  url: string;
  init: RequestInit;
  form: FormData;
}

function recordingFetch(respond: (sent: Sent) => Response | Promise<Response>) {
  const sent: Sent[] = [];
  const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    // The body is multipart bytes: read it back as a server's parser would.
    const form = await new Request('http://server/', { method: 'POST', body: init?.body ?? null, headers: init?.headers }).formData();
    const entry = { url: String(input), init: init ?? {}, form };
    sent.push(entry);
    return respond(entry);
  }) as typeof globalThis.fetch;
  return { fetch, sent };
}

async function request(
  opts: TranscribeWorkloadOptions,
  fetch: typeof globalThis.fetch,
  sequence = 0,
  signal = new AbortController().signal,
): Promise<RequestOutcome> {
  const clock = new FakeClock();
  return createTranscribeWorkload(opts, { fetch }).makeRequest({ sequence, signal, clock });
}

const json = (body: unknown, status = 200): Response =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

describe('createTranscribeWorkload', () => {
  it('posts the audio, model and extra fields as multipart, cycling through the inputs', async () => {
    const { fetch, sent } = recordingFetch(() => json({ text: 'hi' }));
    const workload = createTranscribeWorkload(options({ apiKey: 'sk-1', responseFormat: 'verbose_json' }), { fetch });
    const clock = new FakeClock();
    const signal = new AbortController().signal;
    const first = await workload.makeRequest({ sequence: 0, signal, clock });
    await workload.makeRequest({ sequence: 1, signal, clock });
    assert.deepEqual(first, { startMs: 0, endMs: 0, status: 200, audioSeconds: 2 });
    assert.equal(sent[0]?.url, 'http://server/v1/audio/transcriptions');
    assert.equal(sent[0]?.init.method, 'POST');
    assert.equal(sent[0]?.init.redirect, 'manual');
    assert.equal((sent[0]?.init.headers as Record<string, string>).authorization, 'Bearer sk-1');
    const form = sent[0]!.form;
    assert.equal(form.get('model'), 'm1');
    assert.equal(form.get('language'), 'en');
    assert.equal(form.get('response_format'), 'verbose_json');
    assert.equal(form.get('stream'), null);
    const file = form.get('file') as File;
    assert.equal(file.name, 'a.wav');
    assert.deepEqual(new Uint8Array(await file.arrayBuffer()), new Uint8Array([1, 2, 3]));
    assert.equal((sent[1]!.form.get('file') as File).name, 'b.mp3');
    assert.equal(workload.info.meanAudioSeconds, undefined, 'one input has no known duration');
  });

  it('maps error envelopes, bare statuses, redirects and invalid bodies to error codes', async () => {
    const envelope = { error: { message: 'Queue full', type: 'rate_limit_error', param: null, code: 'queue_full' } };
    assert.deepEqual(await request(options(), recordingFetch(() => json(envelope, 429)).fetch), {
      startMs: 0,
      endMs: 0,
      status: 429,
      errorCode: 'queue_full',
      audioSeconds: 2,
    });
    const typeOnly = { error: { message: 'x', type: 'server_error' } };
    assert.equal((await request(options(), recordingFetch(() => json(typeOnly, 503)).fetch)).errorCode, 'server_error');
    assert.equal((await request(options(), recordingFetch(() => new Response('<html>', { status: 502 })).fetch)).errorCode, 'http_502');
    const redirect = await request(
      options(),
      recordingFetch(() => new Response(null, { status: 307, headers: { location: 'http://elsewhere/' } })).fetch,
    );
    assert.deepEqual([redirect.status, redirect.errorCode], [307, 'redirect']);
    assert.equal((await request(options(), recordingFetch(() => json({ nope: 1 })).fetch)).errorCode, 'bad_response');
    assert.equal(
      (await request(options(), recordingFetch(() => new Response('not json', { status: 200 })).fetch)).errorCode,
      'bad_response',
    );
    const text = await request(
      options({ responseFormat: 'text' }),
      recordingFetch(() => new Response('hello', { headers: { 'content-type': 'text/plain' } })).fetch,
    );
    assert.equal(text.errorCode, undefined);
  });

  it('maps transport failures and aborts to their codes', async () => {
    const refused = recordingFetch(() =>
      Promise.reject(
        Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }) }),
      ),
    );
    const outcome = await request(options(), refused.fetch);
    assert.equal(outcome.errorCode, 'ECONNREFUSED');
    assert.equal(outcome.status, undefined);

    const controller = new AbortController();
    controller.abort(new RequestAbort('timeout'));
    const aborted = recordingFetch(({ init }) => Promise.reject(init.signal?.reason));
    assert.equal((await request(options(), aborted.fetch, 0, controller.signal)).errorCode, 'timeout');
  });

  it('reads SSE, timing the first byte at the first delta and requiring the done event', async () => {
    const clock = new FakeClock();
    let push: ((text: string) => void) | undefined;
    let close: (() => void) | undefined;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        push = (text) => controller.enqueue(new TextEncoder().encode(text));
        close = () => controller.close();
      },
    });
    const { fetch, sent } = recordingFetch(() => new Response(body, { headers: { 'content-type': 'text/event-stream' } }));
    const workload = createTranscribeWorkload(options({ isStreaming: true }), { fetch });
    const pending = workload.makeRequest({ sequence: 0, signal: new AbortController().signal, clock });
    await settle();
    clock.advance(40);
    push?.(': comment\n\n');
    await settle();
    clock.advance(30);
    push?.('data: {"type":"transcript.text.delta","delta":"he"}\n\n');
    await settle();
    clock.advance(50);
    push?.('data: {"type":"transcript.text.delta","delta":"llo"}\n\ndata: {"type":"transcript.text.done","text":"hello"}\n\n');
    close?.();
    await settle();
    const outcome = await pending;
    assert.equal(sent[0]?.form.get('stream'), 'true');
    assert.deepEqual(outcome, { startMs: 0, endMs: 120, status: 200, ttfbMs: 70, audioSeconds: 2 });
  });

  it('fails a stream that ends without its done event or carries an error event', async () => {
    const sse = (text: string) => () => new Response(text, { headers: { 'content-type': 'text/event-stream' } });
    const cut = await request(
      options({ isStreaming: true }),
      recordingFetch(sse('data: {"type":"transcript.text.delta","delta":"a"}\n\n')).fetch,
    );
    assert.equal(cut.errorCode, 'incomplete_stream');
    const failed = await request(
      options({ isStreaming: true }),
      recordingFetch(sse('data: {"type":"error","error":{"message":"boom","type":"server_error","code":"model_failed"}}\n\n')).fetch,
    );
    assert.equal(failed.errorCode, 'model_failed');
    const onlyDone = await request(
      options({ isStreaming: true }),
      recordingFetch(sse('data: {"type":"transcript.text.done","text":"x"}\n\n')).fetch,
    );
    assert.equal(onlyDone.errorCode, undefined);
    assert.equal(onlyDone.ttfbMs, 0);
  });

  it('times the first chunk of a chunked JSON response', async () => {
    const { fetch } = recordingFetch(
      () => new Response('{"text":"x"}', { headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }),
    );
    const outcome = await request(options(), fetch);
    assert.equal(outcome.errorCode, undefined);
    assert.equal(outcome.ttfbMs, 0);
  });
});
