import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it } from 'node:test';
import { createChatClient } from './chat-client.js';
import type { ChatPiece } from './chat-responder.js';

const OPTIONS = { baseUrl: 'https://llm.example/v1/', apiKey: 'k', model: 'm', connectTimeoutMs: 1000 };

function sse(lines: string[]): Response {
  return new Response(lines.map((l) => `data: ${l}\n\n`).join(''), { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

async function collect(stream: AsyncIterable<ChatPiece>): Promise<ChatPiece[]> {
  const out: ChatPiece[] = [];
  for await (const piece of stream) out.push(piece);
  return out;
}

describe('ChatClient (OpenAI-compatible chat completions, streamed)', () => {
  it('an LLM reply that streams longer than the connect timeout is read whole', async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'One.' } }] })}\n\n`);
      setTimeout(() => {
        res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: ' Two.' } }] })}\n\ndata: [DONE]\n\n`);
        res.end();
      }, 300);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    try {
      const client = createChatClient({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: '', model: 'm', connectTimeoutMs: 150 });
      const texts: string[] = [];
      let failure: unknown;
      try {
        for await (const p of client.stream([{ role: 'user', content: 'x' }], {
          signal: new AbortController().signal,
          maxOutputTokens: 10,
        }))
          if (p.type === 'text') texts.push(p.text);
      } catch (err) {
        failure = err;
      }
      assert.equal(failure, undefined, `head came at once, yet: ${String((failure as Error)?.message)}`);
      assert.deepEqual(texts, ['One.', ' Two.']);
    } finally {
      server.close();
    }
  });

  it('posts a streamed request with the key and yields text pieces then the usage of the final chunk', async () => {
    let seen: { url: string; init: RequestInit } | undefined;
    const client = createChatClient(OPTIONS, {
      fetch: async (url, init) => {
        seen = { url: String(url), init: init! };
        return sse([
          JSON.stringify({ choices: [{ delta: { role: 'assistant' } }] }),
          JSON.stringify({ choices: [{ delta: { content: 'Hi' } }] }),
          JSON.stringify({ choices: [{ delta: { content: ' there.' } }] }),
          JSON.stringify({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 2 } }),
          '[DONE]',
        ]);
      },
    });
    const pieces = await collect(
      client.stream([{ role: 'user', content: 'hello' }], { signal: new AbortController().signal, maxOutputTokens: 50 }),
    );
    assert.deepEqual(pieces, [
      { type: 'text', text: 'Hi' },
      { type: 'text', text: ' there.' },
      { type: 'usage', usage: { inputTokens: 7, outputTokens: 2 } },
    ]);
    assert.equal(seen?.url, 'https://llm.example/v1/chat/completions');
    assert.equal((seen?.init.headers as Record<string, string>).authorization, 'Bearer k');
    const body = JSON.parse(String(seen?.init.body)) as Record<string, unknown>;
    assert.deepEqual([body.model, body.stream, body.max_tokens], ['m', true, 50]);
  });

  it('estimates the usage when the endpoint reports none', async () => {
    const client = createChatClient(OPTIONS, {
      fetch: async () => sse([JSON.stringify({ choices: [{ delta: { content: 'abcdefgh' } }] }), '[DONE]']),
    });
    const pieces = await collect(
      client.stream([{ role: 'user', content: 'abcd' }], { signal: new AbortController().signal, maxOutputTokens: 5 }),
    );
    assert.deepEqual(pieces.at(-1), { type: 'usage', usage: { inputTokens: 1, outputTokens: 2 } });
  });

  it('an error status, a refused connection or a broken event is llm_failed', async () => {
    const run = async (fetch: typeof globalThis.fetch) =>
      collect(createChatClient(OPTIONS, { fetch }).stream([], { signal: new AbortController().signal, maxOutputTokens: 5 })).then(
        () => 'none',
        (err: { code: string }) => err.code,
      );
    assert.equal(await run(async () => new Response('quota', { status: 429 })), 'llm_failed');
    assert.equal(
      await run(async () => {
        throw new TypeError('fetch failed');
      }),
      'llm_failed',
    );
    assert.equal(await run(async () => sse(['{not json'])), 'llm_failed');
  });

  it("sends tools and the conversation's function calls and results, and yields the pieces of the reply's function calls", async () => {
    let body: Record<string, unknown> = {};
    const client = createChatClient(OPTIONS, {
      fetch: async (_url, init) => {
        body = JSON.parse(String(init!.body)) as Record<string, unknown>;
        return sse([
          JSON.stringify({
            choices: [{ delta: { tool_calls: [{ index: 0, id: 'call_9', type: 'function', function: { name: 'f', arguments: '' } }] } }],
          }),
          JSON.stringify({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] } }] }),
          JSON.stringify({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '1}' } }] } }] }),
          '[DONE]',
        ]);
      },
    });
    const pieces = await collect(
      client.stream(
        [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'f', arguments: '{}' }] },
          { role: 'tool', toolCallId: 'call_1', content: 'ok' },
        ],
        {
          signal: new AbortController().signal,
          maxOutputTokens: 50,
          tools: [{ name: 'f', description: 'd', parameters: { type: 'object' } }],
          toolChoice: { name: 'f' },
        },
      ),
    );
    assert.deepEqual(body.messages, [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
    ]);
    assert.deepEqual(body.tools, [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' } } }]);
    assert.deepEqual(body.tool_choice, { type: 'function', function: { name: 'f' } });
    assert.deepEqual(pieces.slice(0, 3), [
      { type: 'tool_call', index: 0, id: 'call_9', name: 'f', arguments: '' },
      { type: 'tool_call', index: 0, arguments: '{"a":' },
      { type: 'tool_call', index: 0, arguments: '1}' },
    ]);
  });

  it('a reply the endpoint cut at max_tokens (finish_reason length) yields a cut piece before the usage', async () => {
    const client = createChatClient(OPTIONS, {
      fetch: async () =>
        sse([
          JSON.stringify({ choices: [{ delta: { content: 'One two' }, finish_reason: null }] }),
          JSON.stringify({ choices: [{ delta: {}, finish_reason: 'length' }] }),
          JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } }),
          '[DONE]',
        ]),
    });
    const pieces = await collect(
      client.stream([{ role: 'user', content: 'count' }], { signal: new AbortController().signal, maxOutputTokens: 2 }),
    );
    assert.deepEqual(pieces, [
      { type: 'text', text: 'One two' },
      { type: 'cut', reason: 'max_output_tokens' },
      { type: 'usage', usage: { inputTokens: 3, outputTokens: 2 } },
    ]);
  });
});
