/**
 * The LLM port of a realtime session: a conversation in, streamed text and the token usage out.
 * chat-client.ts implements it for any OpenAI-compatible chat-completions endpoint;
 * demo-responder.ts is the offline stand-in used only when no LLM is configured.
 */

/** A function the LLM asked to call, with its arguments as a JSON string. */
export interface ChatToolCall {
  id: string;
  name: string;
  arguments: string;
}

export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: readonly ChatToolCall[] }
  /** A function's result, for the call `toolCallId`. */
  | { role: 'tool'; toolCallId: string; content: string };

/** A function the LLM may call (the session's `tools`). */
export interface ChatTool {
  name: string;
  description: string;
  /** JSON Schema of the arguments. */
  parameters: Record<string, unknown>;
}

/** Whether the LLM may, must or must not call a function, or must call this one. */
export type ChatToolChoice = 'auto' | 'none' | 'required' | { name: string };

export interface ChatUsage {
  inputTokens: number;
  outputTokens: number;
}

export type ChatPiece =
  | { type: 'text'; text: string }
  | { type: 'usage'; usage: ChatUsage }
  /** The endpoint cut the reply at its token limit (finish_reason length). */
  | { type: 'cut'; reason: 'max_output_tokens' }
  /** A piece of function call `index` of the reply: its id and name come first, its arguments in pieces. */
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments?: string };

export interface ChatStreamOptions {
  signal: AbortSignal;
  maxOutputTokens: number;
  /** Functions the LLM may call; none when empty. */
  tools?: readonly ChatTool[];
  toolChoice?: ChatToolChoice;
}

export interface ChatResponder {
  /** `llm` (an endpoint) or `demo` (the built-in demo responder), for logs and metrics. */
  readonly kind: 'llm' | 'demo';
  /**
   * Streams the reply. Aborting the signal stops it (the HTTP request is cancelled).
   * @throws llm_failed when the endpoint fails or answers something else than a chat stream
   */
  stream(messages: readonly ChatMessage[], options: ChatStreamOptions): AsyncIterable<ChatPiece>;
}

/** A rough token count where an endpoint reports no usage: about four characters a token. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}
