/**
 * A local OpenAI-compatible chat-completions server for tests: POST /v1/chat/completions with
 * stream: true answers `reply` as SSE chunks of one word each, `tokenDelayMs` apart, then a usage
 * chunk (prompt tokens: the prompt's words; completion tokens: the reply's words) and [DONE].
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeLlmRequest {
  body: { model: string; messages: { role: string; content: string }[]; stream: boolean; max_tokens?: number };
  /** Whether the client went away before the reply ended. */
  isAborted: boolean;
}

export interface FakeLlm {
  baseUrl: string;
  requests: FakeLlmRequest[];
  /** What the next calls answer. */
  reply: string;
  tokenDelayMs: number;
  /** Delay before the first token, in milliseconds. */
  firstTokenDelayMs: number;
  close(): Promise<void>;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of request) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function startFakeLlm(options: { reply: string; tokenDelayMs?: number; firstTokenDelayMs?: number }): Promise<FakeLlm> {
  const requests: FakeLlmRequest[] = [];
  const holder: { server?: Server } = {};
  const llm: FakeLlm = {
    baseUrl: '',
    requests,
    reply: options.reply,
    tokenDelayMs: options.tokenDelayMs ?? 0,
    firstTokenDelayMs: options.firstTokenDelayMs ?? 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer((request, response) => {
    void (async () => {
      if (request.method !== 'POST' || request.url !== '/v1/chat/completions') {
        response.writeHead(404).end();
        return;
      }
      const body = JSON.parse(await readBody(request)) as FakeLlmRequest['body'];
      const entry: FakeLlmRequest = { body, isAborted: false };
      requests.push(entry);
      response.on('close', () => {
        if (!response.writableFinished) entry.isAborted = true;
      });
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const words = llm.reply.split(/(?<= )/);
      const chunk = (data: unknown) => response.write(`data: ${JSON.stringify(data)}\n\n`);
      await wait(llm.firstTokenDelayMs);
      for (const word of words) {
        if (entry.isAborted) return;
        chunk({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: word } }] });
        if (llm.tokenDelayMs > 0) await wait(llm.tokenDelayMs);
      }
      const promptWords = body.messages
        .map((m) => m.content)
        .join(' ')
        .split(/\s+/).length;
      chunk({
        id: 'c',
        object: 'chat.completion.chunk',
        choices: [],
        usage: { prompt_tokens: promptWords, completion_tokens: words.length, total_tokens: promptWords + words.length },
      });
      response.end('data: [DONE]\n\n');
    })();
  });
  holder.server = server;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  llm.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return llm;
}
