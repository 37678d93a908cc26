/**
 * What speech calls say: by default one to three sentences drawn from a built-in set (short and
 * long, statements and questions, numbers and names, as in a conversation), or the lines of a
 * text file, one call's input per line. Pure apart from reading the file.
 */
import { readFile } from 'node:fs/promises';
import { usageError } from './bench-error.js';

/** The most characters the speech API takes in one call. */
export const MAX_INPUT_CHARACTERS = 4096;

export const BUILT_IN_SENTENCES: readonly string[] = [
  'Hello, thanks for calling.',
  'How can I help you today?',
  'Your order shipped this morning and should arrive on Thursday.',
  'I can see two accounts under that phone number.',
  'Could you spell your last name for me, please?',
  'The next available appointment is at half past three.',
  'Let me check that for you, it will only take a moment.',
  'Your balance is one hundred and twenty four dollars and fifty cents.',
  'The weather tomorrow will be cloudy with a chance of rain in the afternoon.',
  'I am sorry, I did not catch that.',
  'Would you like me to send a confirmation by email?',
  'The train to Edinburgh leaves from platform seven at ten fifteen.',
  'Please hold while I transfer you to a specialist who can answer that question.',
  'Great, that is all set.',
  'Is there anything else I can help you with?',
  'Our office is open from nine in the morning until six in the evening, Monday to Friday.',
  'The package weighs about three kilograms, so the standard rate applies.',
  'If you prefer, I can call you back later this week.',
  'That sounds like a good plan.',
  'The meeting has been moved to the small conference room on the second floor.',
  'Remember to bring a form of identification with your name and photograph.',
  'Your reservation is confirmed for four people on Saturday evening.',
  'Thank you for your patience, and have a wonderful day.',
  'The quick brown fox jumps over the lazy dog.',
];

export type SpeechTexts = { kind: 'sentences'; sentences: readonly string[] } | { kind: 'lines'; lines: readonly string[] };

/**
 * The input of one call: under `sentences`, one to three of them chosen by `random` (each draw a
 * uniform number in [0, 1)); under `lines`, line `sequence` modulo their count.
 */
export function pickInput(texts: SpeechTexts, options: { sequence: number; random: () => number }): string {
  if (texts.kind === 'lines') return texts.lines[options.sequence % texts.lines.length]!;
  const count = 1 + Math.floor(options.random() * 3);
  const picked: string[] = [];
  for (let i = 0; i < count; i += 1) picked.push(texts.sentences[Math.floor(options.random() * texts.sentences.length)]!);
  return picked.join(' ');
}

/** The non-empty lines of a text file, each one call's input. */
export async function readTextFile(path: string): Promise<SpeechTexts> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    throw usageError(`Expected --text-file to name a readable file: got '${path}'`);
  }
  const lines = text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line.length > 0);
  if (lines.length === 0) throw usageError(`Expected --text-file to hold at least one non-empty line: '${path}' has none`);
  const tooLong = lines.findIndex((line) => line.length > MAX_INPUT_CHARACTERS);
  if (tooLong !== -1) {
    throw usageError(
      `Expected each line of --text-file to hold at most ${MAX_INPUT_CHARACTERS} characters: its non-empty line ${tooLong + 1} has more`,
    );
  }
  return { kind: 'lines', lines };
}
