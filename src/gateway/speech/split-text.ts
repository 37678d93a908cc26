/**
 * Splits text to speak into the pieces an engine synthesizes in order: sentences, and sentences
 * longer than maxPieceChars into clauses (at , ; : and dashes), then, as a last resort, at spaces.
 * The first piece is short, so the first audio is ready early; every piece is synthesized with
 * the prosody of a whole sentence or clause.
 *
 * A period ends a sentence only before whitespace and not after a known abbreviation ("Dr.",
 * "e.g.") or a single capital initial ("J. Smith"); "3.5" and "example.com" never split.
 */

/** Pieces longer than this are cut into clauses, in characters. */
export const DEFAULT_MAX_PIECE_CHARS = 200;

/** Words that end with a period without ending a sentence (compared lower-case, without the final period). */
const ABBREVIATIONS = new Set([
  'mr',
  'mrs',
  'ms',
  'dr',
  'prof',
  'sr',
  'jr',
  'st',
  'mt',
  'ft',
  'rev',
  'gen',
  'col',
  'capt',
  'lt',
  'sgt',
  'gov',
  'sen',
  'rep',
  'vs',
  'etc',
  'e.g',
  'i.e',
  'cf',
  'al',
  'approx',
  'inc',
  'ltd',
  'co',
  'corp',
  'dept',
  'univ',
  'no',
  'nos',
  'vol',
  'fig',
  'figs',
  'p',
  'pp',
  'ch',
  'sec',
  'jan',
  'feb',
  'mar',
  'apr',
  'jun',
  'jul',
  'aug',
  'sep',
  'sept',
  'oct',
  'nov',
  'dec',
  'a.m',
  'p.m',
  'u.s',
  'u.k',
]);

/**
 * Whitespace in text to speak: JavaScript's \s, every control character (Unicode Cc, U+0000-U+001F
 * and U+007F-U+009F) and every lone surrogate (Cs: half of a UTF-16 pair, which a JSON body's
 * "\ud800" escape can carry), each read as a space. The model hosts refuse a sentence that Python's
 * str.strip() leaves empty, and strip() also removes U+001C-U+001F and U+0085, which \s does not
 * match; the engines read a NUL as the end of the text and drop what follows; a lone surrogate has
 * no UTF-8 form, so flite and espeak-ng failed the stream on it (500 model_failed).
 */
const SPACE_RUN = /[\s\p{Cc}\p{Cs}]+/gu;

/** Sentence end: terminal punctuation, closing quotes or brackets, then whitespace. */
const SENTENCE_END = /[.!?\u2026]+["'\u201d\u2019)\]]*(?=\s)/g;
/** Clause end: , ; : followed by whitespace, or a dash between words. */
const CLAUSE_END = /[,;:](?=\s)|\s?[\u2014\u2013]\s?|\s-{1,2}\s/g;

/** Whether `text` has nothing to speak: only whitespace and control characters (see SPACE_RUN). */
export function isBlankSpeechText(text: string): boolean {
  return text.replace(SPACE_RUN, '') === '';
}

/**
 * The pieces of `text`, in order, each trimmed and non-empty, runs of whitespace and control
 * characters collapsed to one space; [] for text with nothing else.
 */
export function splitSpeechText(text: string, options: { maxPieceChars?: number } = {}): string[] {
  const maxChars = options.maxPieceChars ?? DEFAULT_MAX_PIECE_CHARS;
  const pieces: string[] = [];
  // A blank line ends a sentence even without punctuation (a heading, a list item).
  for (const paragraph of text.split(/\n[ \t\r\f\v]*\n/)) {
    // Only ' ' is left as whitespace: the rules below can use \s, \S and trim().
    const flat = paragraph.replace(SPACE_RUN, ' ').trim();
    if (flat === '') continue;
    for (const sentence of splitSentences(flat)) {
      if (sentence.length <= maxChars) pieces.push(sentence);
      else pieces.push(...splitLong(sentence, maxChars));
    }
  }
  return pieces;
}

function splitSentences(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (const match of text.matchAll(SENTENCE_END)) {
    const end = match.index + match[0].length;
    if (match[0].startsWith('.') && match[0].length === 1 && !endsSentence(text.slice(start, match.index))) continue;
    pushTrimmed(out, text.slice(start, end));
    start = end;
  }
  pushTrimmed(out, text.slice(start));
  return out;
}

/** Whether a single period after `before` (the sentence so far) ends the sentence. */
function endsSentence(before: string): boolean {
  const word = /(\S+)$/.exec(before)?.[1] ?? '';
  const bare = word.replace(/^["'([\u201c\u2018]+/, '');
  if (ABBREVIATIONS.has(bare.toLowerCase())) return false;
  // A single capital initial ("J. Smith"), or an initialism ("U.S.A.") read letter by letter.
  if (/^[A-Z]$/.test(bare) || /^([A-Za-z]\.)+[A-Za-z]$/.test(bare)) return false;
  return true;
}

/** Cuts a long sentence at clause ends, packing clauses up to maxChars; a longer clause is cut at spaces. */
function splitLong(sentence: string, maxChars: number): string[] {
  const clauses: string[] = [];
  let start = 0;
  for (const match of sentence.matchAll(CLAUSE_END)) {
    const end = match.index + match[0].length;
    pushTrimmed(clauses, sentence.slice(start, end));
    start = end;
  }
  pushTrimmed(clauses, sentence.slice(start));
  const out: string[] = [];
  let current = '';
  for (const clause of clauses.flatMap((c) => (c.length <= maxChars ? [c] : splitAtSpaces(c, maxChars)))) {
    const joined = current === '' ? clause : `${current} ${clause}`;
    if (joined.length <= maxChars) {
      current = joined;
    } else {
      pushTrimmed(out, current);
      current = clause;
    }
  }
  pushTrimmed(out, current);
  return out;
}

/** Packs words up to maxChars; a single word longer than that is cut into maxChars pieces. */
function splitAtSpaces(text: string, maxChars: number): string[] {
  const out: string[] = [];
  let current = '';
  for (const word of text.split(' ')) {
    for (let at = 0; at < word.length; at += maxChars) {
      const part = word.slice(at, at + maxChars);
      const joined = current === '' ? part : `${current} ${part}`;
      if (joined.length <= maxChars) {
        current = joined;
      } else {
        pushTrimmed(out, current);
        current = part;
      }
    }
  }
  pushTrimmed(out, current);
  return out;
}

function pushTrimmed(out: string[], piece: string): void {
  const trimmed = piece.trim();
  if (trimmed !== '') out.push(trimmed);
}
