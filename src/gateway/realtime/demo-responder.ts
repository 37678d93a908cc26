/**
 * The demo responder: a built-in stand-in for an LLM, so that a server with no LLM configured can
 * still hold a call (`npm start`, offline). It repeats what it heard and says that it is a demo;
 * it is never used when realtime.llm.baseUrl is set.
 */
import { estimateTokens, type ChatResponder } from './chat-responder.js';

export function demoReply(heard: string): string {
  const said = heard.trim();
  return said === ''
    ? 'This is the voxmux demo responder. I did not catch that. Configure an LLM to hold a real conversation.'
    : `This is the voxmux demo responder. You said: ${said}. Configure an LLM to hold a real conversation.`;
}

export function createDemoResponder(): ChatResponder {
  return {
    kind: 'demo',
    async *stream(messages, { signal }) {
      const lastUser = [...messages].reverse().find((m) => m.role === 'user');
      const reply = demoReply(lastUser?.content ?? '');
      for (const word of reply.split(/(?<= )/)) {
        signal.throwIfAborted();
        yield { type: 'text', text: word };
      }
      yield {
        type: 'usage',
        usage: { inputTokens: estimateTokens(messages.map((m) => m.content).join(' ')), outputTokens: estimateTokens(reply) },
      };
    },
  };
}
