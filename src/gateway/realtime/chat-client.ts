/**
 * The ChatResponder for any OpenAI-compatible chat-completions endpoint: POST
 * {baseUrl}/chat/completions with stream: true, read as server-sent events; the usage comes from
 * the final chunk (stream_options.include_usage) or, when the endpoint sends none, is estimated.
 * The only code that opens connections to the LLM.
 */
import { errors } from '../../core/error-catalog.js';
import { estimateTokens, type ChatMessage, type ChatPiece, type ChatResponder, type ChatStreamOptions } from './chat-responder.js';

export interface ChatClientOptions {
  /** Endpoint base, such as https://api.openai.com/v1 (checked against the allowlist at config time). */
  baseUrl: string;
  /** Bearer key; empty sends none. */
  apiKey: string;
  model: string;
  /** Longest time until the response head arrives, in milliseconds. */
  connectTimeoutMs: number;
}

interface ChatChunk {
  choices?: {
    delta?: {
      content?: string | null;
      tool_calls?: { index?: number; id?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
}

/** A message as chat completions take it. */
function toWireMessage(message: ChatMessage): Record<string, unknown> {
  if (message.role === 'tool') return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
  if (message.role === 'assistant' && message.toolCalls !== undefined && message.toolCalls.length > 0) {
    return {
      role: 'assistant',
      content: message.content === '' ? null : message.content,
      tool_calls: message.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
    };
  }
  return { role: message.role, content: message.content };
}

/** The request's tools and tool_choice, as chat completions take them; nothing without tools. */
function toWireTools(options: ChatStreamOptions): Record<string, unknown> {
  if (options.tools === undefined || options.tools.length === 0) return {};
  const choice = options.toolChoice ?? 'auto';
  return {
    tools: options.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    })),
    tool_choice: typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } },
  };
}

export function createChatClient(options: ChatClientOptions, deps: { fetch?: typeof fetch } = {}): ChatResponder {
  const doFetch = deps.fetch ?? fetch;
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  return {
    kind: 'llm',
    async *stream(messages, streamOptions) {
      const { signal, maxOutputTokens } = streamOptions;
      // The connect timeout bounds the wait for the answer's headers only: the fetch signal also
      // governs reading the body, which streams for as long as the reply lasts.
      const timeout = new AbortController();
      const timer = setTimeout(() => timeout.abort(), options.connectTimeoutMs);
      let response: Response;
      try {
        response = await doFetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'text/event-stream',
            ...(options.apiKey === '' ? {} : { authorization: `Bearer ${options.apiKey}` }),
          },
          body: JSON.stringify({
            model: options.model,
            messages: messages.map(toWireMessage),
            ...toWireTools(streamOptions),
            stream: true,
            stream_options: { include_usage: true },
            max_tokens: maxOutputTokens,
          }),
          signal: AbortSignal.any([signal, timeout.signal]),
        });
      } catch (err) {
        signal.throwIfAborted();
        throw errors.llmFailed({
          reason: timeout.signal.aborted ? `no answer within ${options.connectTimeoutMs} ms` : 'connection failed',
          cause: err,
        });
      } finally {
        clearTimeout(timer);
      }
      if (!response.ok || response.body === null) {
        const text = await response.text().catch(() => '');
        throw errors.llmFailed({ reason: `HTTP ${response.status}: ${text.slice(0, 200)}` });
      }
      let reply = '';
      let usage: ChatPiece | undefined;
      const decoder = new TextDecoder();
      let pending = '';
      try {
        for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
          pending += decoder.decode(bytes, { stream: true });
          let nl: number;
          while ((nl = pending.indexOf('\n')) !== -1) {
            const line = pending.slice(0, nl).trim();
            pending = pending.slice(nl + 1);
            if (!line.startsWith('data:')) continue;
            const data = line.slice(5).trim();
            if (data === '[DONE]') continue;
            let chunk: ChatChunk;
            try {
              chunk = JSON.parse(data) as ChatChunk;
            } catch (err) {
              throw errors.llmFailed({ reason: 'a stream event that is not JSON', cause: err });
            }
            const delta = chunk.choices?.[0]?.delta;
            const text = delta?.content;
            if (typeof text === 'string' && text !== '') {
              reply += text;
              yield { type: 'text', text };
            }
            for (const call of delta?.tool_calls ?? []) {
              const args = call.function?.arguments;
              if (typeof args === 'string') reply += args;
              yield {
                type: 'tool_call',
                index: typeof call.index === 'number' ? call.index : 0,
                ...(typeof call.id === 'string' ? { id: call.id } : {}),
                ...(typeof call.function?.name === 'string' ? { name: call.function.name } : {}),
                ...(typeof args === 'string' ? { arguments: args } : {}),
              };
            }
            if (chunk.choices?.[0]?.finish_reason === 'length') yield { type: 'cut', reason: 'max_output_tokens' };
            if (chunk.usage != null) {
              usage = {
                type: 'usage',
                usage: { inputTokens: chunk.usage.prompt_tokens ?? 0, outputTokens: chunk.usage.completion_tokens ?? 0 },
              };
            }
          }
        }
      } catch (err) {
        signal.throwIfAborted();
        if (err instanceof Error && 'code' in err && err.code === 'llm_failed') throw err;
        throw errors.llmFailed({ reason: 'the stream broke', cause: err });
      }
      yield (
        usage ?? {
          type: 'usage',
          usage: { inputTokens: estimateTokens(messages.map((m) => m.content).join(' ')), outputTokens: estimateTokens(reply) },
        }
      );
    },
  };
}
