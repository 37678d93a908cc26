/**
 * The ChatResponder for any OpenAI-compatible chat-completions endpoint: POST
 * {baseUrl}/chat/completions with stream: true, read as server-sent events; the usage comes from
 * the final chunk (stream_options.include_usage) or, when the endpoint sends none, is estimated.
 * The only code that opens connections to the LLM.
 */
import { errors } from '../../core/error-catalog.js';
import { estimateTokens, type ChatPiece, type ChatResponder } from './chat-responder.js';

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
  choices?: { delta?: { content?: string | null } }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
}

export function createChatClient(options: ChatClientOptions, deps: { fetch?: typeof fetch } = {}): ChatResponder {
  const doFetch = deps.fetch ?? fetch;
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  return {
    kind: 'llm',
    async *stream(messages, { signal, maxOutputTokens }) {
      const timeout = AbortSignal.timeout(options.connectTimeoutMs);
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
            messages,
            stream: true,
            stream_options: { include_usage: true },
            max_tokens: maxOutputTokens,
          }),
          signal: AbortSignal.any([signal, timeout]),
        });
      } catch (err) {
        signal.throwIfAborted();
        throw errors.llmFailed({
          reason: timeout.aborted ? `no answer within ${options.connectTimeoutMs} ms` : 'connection failed',
          cause: err,
        });
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
            const text = chunk.choices?.[0]?.delta?.content;
            if (typeof text === 'string' && text !== '') {
              reply += text;
              yield { type: 'text', text };
            }
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
