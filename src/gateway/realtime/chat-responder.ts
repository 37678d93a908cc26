/**
 * The LLM port of a realtime session: a conversation in, streamed text and the token usage out.
 * chat-client.ts implements it for any OpenAI-compatible chat-completions endpoint;
 * demo-responder.ts is the offline stand-in used only when no LLM is configured.
 */

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatUsage {
  inputTokens: number;
  outputTokens: number;
}

export type ChatPiece = { type: 'text'; text: string } | { type: 'usage'; usage: ChatUsage };

export interface ChatResponder {
  /** `llm` (an endpoint) or `demo` (the built-in demo responder), for logs and metrics. */
  readonly kind: 'llm' | 'demo';
  /**
   * Streams the reply. Aborting the signal stops it (the HTTP request is cancelled).
   * @throws llm_failed when the endpoint fails or answers something else than a chat stream
   */
  stream(messages: readonly ChatMessage[], options: { signal: AbortSignal; maxOutputTokens: number }): AsyncIterable<ChatPiece>;
}

/** A rough token count where an endpoint reports no usage: about four characters a token. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}
