/**
 * Word errors between a reference transcript and a hypothesis. Both are normalized the same simple
 * way (Unicode NFKC, lower case, punctuation removed, apostrophes inside words kept, curly ones made
 * straight), then aligned word by word with the Levenshtein distance, which counts the
 * substitutions, deletions (reference words missing) and insertions (extra words). Numbers are
 * compared as written: "twenty" and "20" differ. This is not Whisper's English normalizer, so
 * compare word error rates measured the same way only.
 */

export interface WordErrors {
  referenceWords: number;
  hypothesisWords: number;
  substitutions: number;
  deletions: number;
  insertions: number;
}

export function normalizeWords(text: string): string[] {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[\u2018\u2019\u02bc]/g, "'")
    .replace(/[^\p{L}\p{M}\p{N}']+/gu, ' ')
    .split(' ')
    .map((word) => word.replace(/^'+|'+$/g, ''))
    .filter((word) => word !== '');
}

/** The word errors of `hypothesis` against `reference`, both normalized first. */
export function countWordErrors(reference: string, hypothesis: string): WordErrors {
  return alignWords(normalizeWords(reference), normalizeWords(hypothesis));
}

/**
 * A minimum-edit alignment of two word sequences. Among alignments of the same cost it prefers
 * substitutions, then deletions, then insertions, as the usual scoring tools do. Time is
 * O(reference x hypothesis), memory O(hypothesis).
 */
export function alignWords(reference: readonly string[], hypothesis: readonly string[]): WordErrors {
  const width = hypothesis.length + 1;
  // Per cell: cost, substitutions, deletions, insertions of the best alignment of the prefixes.
  let previous = new Int32Array(width * 4);
  let current = new Int32Array(width * 4);
  for (let j = 0; j < width; j += 1) {
    previous[j * 4] = j;
    previous[j * 4 + 3] = j;
  }
  for (let i = 1; i <= reference.length; i += 1) {
    current[0] = i;
    current[1] = 0;
    current[2] = i;
    current[3] = 0;
    const word = reference[i - 1];
    for (let j = 1; j < width; j += 1) {
      const isMatch = word === hypothesis[j - 1];
      const diagonal = previous[(j - 1) * 4]! + (isMatch ? 0 : 1);
      const up = previous[j * 4]! + 1;
      const left = current[(j - 1) * 4]! + 1;
      const at = j * 4;
      if (diagonal <= up && diagonal <= left) {
        const from = (j - 1) * 4;
        current[at] = diagonal;
        current[at + 1] = previous[from + 1]! + (isMatch ? 0 : 1);
        current[at + 2] = previous[from + 2]!;
        current[at + 3] = previous[from + 3]!;
      } else if (up <= left) {
        current[at] = up;
        current[at + 1] = previous[at + 1]!;
        current[at + 2] = previous[at + 2]! + 1;
        current[at + 3] = previous[at + 3]!;
      } else {
        const from = (j - 1) * 4;
        current[at] = left;
        current[at + 1] = current[from + 1]!;
        current[at + 2] = current[from + 2]!;
        current[at + 3] = current[from + 3]! + 1;
      }
    }
    [previous, current] = [current, previous];
  }
  const last = hypothesis.length * 4;
  return {
    referenceWords: reference.length,
    hypothesisWords: hypothesis.length,
    substitutions: previous[last + 1]!,
    deletions: previous[last + 2]!,
    insertions: previous[last + 3]!,
  };
}

/** Errors over reference words; undefined for an empty reference. */
export function wordErrorRate(errors: Omit<WordErrors, 'hypothesisWords'>): number | undefined {
  if (errors.referenceWords === 0) return undefined;
  return (errors.substitutions + errors.deletions + errors.insertions) / errors.referenceWords;
}
