/**
 * A local OpenAI-compatible chat-completions server, for `voxmux bench call` (so that the
 * server's own latency is measured apart from an LLM's) and for tests: POST /v1/chat/completions
 * with stream: true answers `reply` as SSE chunks of one word each, after `firstTokenDelayMs` and
 * `tokenDelayMs` apart, then a usage chunk (prompt tokens: the prompt's words; completion tokens:
 * the reply's words) and [DONE]. Each request's arrival and first token are timed, and a request
 * whose system message carries a `[voxmux-bench-call ID]` tag is filed under that call. With
 * `toolCall` set, a request that offers tools and does not end with a tool result is answered with
 * that function call instead (id `call_<n>`, its arguments in two pieces).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeLlmRequest {
  body: {
    model: string;
    messages: { role: string; content: string | null; tool_call_id?: string; tool_calls?: unknown[] }[];
    stream: boolean;
    max_tokens?: number;
    tools?: unknown[];
    tool_choice?: unknown;
  };
  /** Whether the client went away before the reply ended. */
  isAborted: boolean;
  /** The call tag of its system message, when it has one. */
  call?: string;
  /** When the request arrived and when its first token left, on `nowMs`'s scale. */
  receivedMs: number;
  firstTokenMs?: number;
  promptTokens: number;
  completionTokens: number;
}

export interface FakeLlm {
  baseUrl: string;
  requests: FakeLlmRequest[];
  /** What the next calls answer. */
  reply: string;
  tokenDelayMs: number;
  /** Delay before the first token, in milliseconds. */
  firstTokenDelayMs: number;
  /** When set, the function call that requests offering tools get (see above). */
  toolCall: { name: string; arguments: string } | undefined;
  close(): Promise<void>;
}

export interface FakeLlmOptions {
  reply: string;
  tokenDelayMs?: number;
  firstTokenDelayMs?: number;
  /** @default 0: any free port */
  port?: number;
  /** @default '127.0.0.1' */
  host?: string;
  /** The clock of the timings. @default performance.now */
  nowMs?: () => number;
}

/** The tag that files a request under a call: put it in the session's instructions. */
export const callTag = (call: string): string => `[voxmux-bench-call ${call}]`;
const CALL_TAG = /\[voxmux-bench-call ([^\]\s]+)\]/;

async function readBody(request: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of request) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const wordCount = (text: string) => text.split(/\s+/).filter((w) => w !== '').length;

export async function startFakeLlm(options: FakeLlmOptions): Promise<FakeLlm> {
  const nowMs = options.nowMs ?? (() => performance.now());
  const requests: FakeLlmRequest[] = [];
  const llm: FakeLlm = {
    baseUrl: '',
    requests,
    reply: options.reply,
    tokenDelayMs: options.tokenDelayMs ?? 0,
    firstTokenDelayMs: options.firstTokenDelayMs ?? 0,
    toolCall: undefined,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((request, response) => {
    void (async () => {
      const receivedMs = nowMs();
      if (request.method !== 'POST' || request.url !== '/v1/chat/completions') {
        response.writeHead(404).end();
        return;
      }
      let body: FakeLlmRequest['body'];
      try {
        body = JSON.parse(await readBody(request)) as FakeLlmRequest['body'];
      } catch {
        response.writeHead(400).end();
        return;
      }
      const words = llm.reply.split(/(?<= )/);
      const prompt = (body.messages ?? []).map((m) => m.content ?? '').join(' ');
      const call = CALL_TAG.exec((body.messages ?? []).find((m) => m.role === 'system')?.content ?? '')?.[1];
      const entry: FakeLlmRequest = {
        body,
        isAborted: false,
        ...(call === undefined ? {} : { call }),
        receivedMs,
        promptTokens: wordCount(prompt),
        completionTokens: words.length,
      };
      requests.push(entry);
      response.on('close', () => {
        if (!response.writableFinished) entry.isAborted = true;
      });
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (data: unknown) => response.write(`data: ${JSON.stringify(data)}\n\n`);
      await wait(llm.firstTokenDelayMs);
      const toolCall = llm.toolCall;
      if (toolCall !== undefined && (body.tools ?? []).length > 0 && body.messages.at(-1)?.role !== 'tool') {
        const half = Math.ceil(toolCall.arguments.length / 2);
        const id = `call_${requests.length}`;
        chunk({
          id: 'c',
          object: 'chat.completion.chunk',
          choices: [
            { index: 0, delta: { tool_calls: [{ index: 0, id, type: 'function', function: { name: toolCall.name, arguments: '' } }] } },
          ],
        });
        entry.firstTokenMs ??= nowMs();
        for (const part of [toolCall.arguments.slice(0, half), toolCall.arguments.slice(half)]) {
          chunk({
            id: 'c',
            object: 'chat.completion.chunk',
            choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: part } }] } }],
          });
        }
        chunk({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] });
        response.end('data: [DONE]\n\n');
        return;
      }
      for (const word of words) {
        if (entry.isAborted) return;
        chunk({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: word } }] });
        entry.firstTokenMs ??= nowMs();
        if (llm.tokenDelayMs > 0) await wait(llm.tokenDelayMs);
      }
      chunk({
        id: 'c',
        object: 'chat.completion.chunk',
        choices: [],
        usage: { prompt_tokens: entry.promptTokens, completion_tokens: words.length, total_tokens: entry.promptTokens + words.length },
      });
      response.end('data: [DONE]\n\n');
    })();
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  llm.baseUrl = `http://${host}:${(server.address() as AddressInfo).port}/v1`;
  return llm;
}
