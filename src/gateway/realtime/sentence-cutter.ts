/**
 * Cuts streamed LLM text into sentences as the tokens arrive, so each sentence goes to speech
 * synthesis at once. A sentence ends at . ! ? (or a newline) followed by whitespace, with the
 * speech route's rules for abbreviations and initials (speech/split-text.ts), so "Dr. Smith" and
 * "3.5" stay whole; `flush` returns what is left at the end of the stream.
 */
import { splitSpeechText } from '../speech/split-text.js';

export interface SentenceCutter {
  /** The next piece of text; returns the sentences it completes (possibly none). */
  push(text: string): string[];
  /** Ends the text; returns the last sentence, if any. */
  flush(): string[];
}

/** A sentence end followed by whitespace: the text before it may hold complete sentences. */
const BOUNDARY = /[.!?…]["')\]]*\s|\n/;

export function createSentenceCutter(): SentenceCutter {
  let pending = '';
  return {
    push(text) {
      pending += text;
      if (!BOUNDARY.test(pending)) return [];
      // The splitter knows abbreviations and clause limits: every piece but the last is complete,
      // since the last may still grow with the next token.
      const pieces = splitSpeechText(pending);
      if (pieces.length < 2) return [];
      const last = pieces[pieces.length - 1]!;
      const at = pending.lastIndexOf(last);
      pending = at >= 0 ? pending.slice(at) : last;
      return pieces.slice(0, -1);
    },
    flush() {
      const rest = splitSpeechText(pending);
      pending = '';
      return rest;
    },
  };
}
