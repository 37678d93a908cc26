/**
 * Diarized transcripts (pure): each ASR word goes to the speaker whose turns overlap it most in
 * total (the speaker of the nearest turn when it overlaps none), and consecutive words of one
 * speaker form a segment, ended at a pause or at a length limit. A transcript without word
 * timestamps falls back to its segments, assigned the same way.
 */
import type { DiarizedSegment, DiarizedTranscription, SpeakerSegment } from '../../api/diarization.js';
import type { TranscriptResult } from '../../scheduler/index.js';

export interface TimedText {
  text: string;
  start: number;
  end: number;
  /** What goes between the piece before and this one: `''` where the transcript writes them together (Chinese, Japanese); absent: a space. */
  joiner?: string;
}

/**
 * A pause between two words of one speaker from which they go to separate segments. OpenAI's
 * diarized segments are speaker turns of a sentence or a few, split where the speaker stops: a
 * pause within a sentence (a breath, a hesitation) is mostly well under a second, while one of a
 * second or more ends a thought. It is longer than the 200 to 500 ms of silence at which OpenAI's
 * server_vad cuts audio by default (chunking_strategy, Realtime turns): those cuts serve the
 * recognizer, and at that length a segment would end at every breath.
 */
export const SEGMENT_PAUSE_MS = 1000;

/**
 * The longest segment, for a speaker who never pauses that long: 30 s, Whisper's window (its own
 * segments never run longer), so that a segment stays readable as one caption.
 */
export const MAX_SEGMENT_MS = 30_000;

function overlapS(a: { start: number; end: number }, b: { start: number; end: number }): number {
  return Math.max(0, Math.min(a.end, b.end) - Math.max(a.start, b.start));
}

function gapS(a: { start: number; end: number }, b: { start: number; end: number }): number {
  return Math.max(0, a.start - b.end, b.start - a.end);
}

/**
 * The speaker of a span: the one whose turns overlap it most in total (WhisperX's
 * assign_word_speakers sums the overlap per speaker), then the one with the nearest turn, then the
 * first speaker to appear; speaker_0 when there are no turns.
 */
export function speakerOf(span: { start: number; end: number }, turns: readonly SpeakerSegment[]): string {
  const bySpeaker = new Map<string, { overlap: number; gap: number }>();
  for (const turn of turns) {
    const seen = bySpeaker.get(turn.speaker);
    const overlap = overlapS(span, turn);
    const gap = gapS(span, turn);
    if (seen === undefined) bySpeaker.set(turn.speaker, { overlap, gap });
    else bySpeaker.set(turn.speaker, { overlap: seen.overlap + overlap, gap: Math.min(seen.gap, gap) });
  }
  let best: { speaker: string; overlap: number; gap: number } | undefined;
  for (const [speaker, { overlap, gap }] of bySpeaker) {
    if (best === undefined || overlap > best.overlap || (overlap === best.overlap && gap < best.gap)) best = { speaker, overlap, gap };
  }
  return best?.speaker ?? 'speaker_0';
}

/**
 * Whether the next piece of a segment's speaker opens a new segment: after a pause of
 * SEGMENT_PAUSE_MS or more, or where the segment would grow longer than MAX_SEGMENT_MS. Times are
 * compared to the millisecond, so that a pause of exactly the threshold counts whatever the
 * floating-point error of the difference.
 */
function shouldEndSegment(segment: DiarizedSegment, next: TimedText): boolean {
  return (
    Math.round((next.start - segment.end) * 1000) >= SEGMENT_PAUSE_MS || Math.round((next.end - segment.start) * 1000) > MAX_SEGMENT_MS
  );
}

/**
 * Segments of consecutive words (or transcript segments) of one speaker, in time order, ended at
 * pauses and at MAX_SEGMENT_MS. The one place segments are made: diarized_json's body and its stream
 * events both come from these.
 */
export function toDiarizedSegments(pieces: readonly TimedText[], turns: readonly SpeakerSegment[]): DiarizedSegment[] {
  const segments: DiarizedSegment[] = [];
  for (const piece of pieces) {
    const text = piece.text.trim();
    if (text === '') continue;
    const speaker = speakerOf(piece, turns);
    const last = segments.at(-1);
    if (last !== undefined && last.speaker === speaker && !shouldEndSegment(last, piece)) {
      last.text = `${last.text}${piece.joiner ?? ' '}${text}`;
      last.end = piece.end;
      continue;
    }
    segments.push({ type: 'transcript.text.segment', id: `seg_${segments.length}`, start: piece.start, end: piece.end, text, speaker });
  }
  return segments;
}

/** A, B, ..., Z, AA, AB, ...: the label of the speaker who came index-th (from 0). */
function speakerLabel(index: number): string {
  const letter = String.fromCharCode(65 + (index % 26));
  return index < 26 ? letter : `${speakerLabel(Math.floor(index / 26) - 1)}${letter}`;
}

/**
 * OpenAI labels the speakers of diarized_json A, B, ... (where no known_speaker_names match), so
 * the diarizer's labels (speaker_0, ...) are renamed in order of first appearance.
 */
function toOpenAiSpeakers(segments: DiarizedSegment[]): DiarizedSegment[] {
  const labels = new Map<string, string>();
  return segments.map((segment) => {
    let label = labels.get(segment.speaker);
    if (label === undefined) {
      label = speakerLabel(labels.size);
      labels.set(segment.speaker, label);
    }
    return { ...segment, speaker: label };
  });
}

/**
 * The words with what joins each to the one before, read from the transcript: nothing where it
 * writes them together (a language without spaces), else a space. A word not found in the
 * transcript gets a space.
 */
function toJoinedWords(text: string, words: NonNullable<TranscriptResult['words']>): TimedText[] {
  let cursor = 0;
  return words.map((w) => {
    const word = w.word.trim();
    const at = word === '' ? -1 : text.indexOf(word, cursor);
    if (at < 0) return { text: w.word, start: w.start, end: w.end };
    const joiner = at === cursor ? '' : ' ';
    cursor = at + word.length;
    return { text: w.word, start: w.start, end: w.end, joiner };
  });
}

/** OpenAI's diarized_json: the transcript's words (or segments) grouped into speaker segments. */
export function toDiarizedTranscription(result: TranscriptResult, turns: readonly SpeakerSegment[]): DiarizedTranscription {
  const pieces: TimedText[] =
    result.words !== null && result.words.length > 0
      ? toJoinedWords(result.text, result.words)
      : (result.segments ?? [{ start: 0, end: result.durationS, text: result.text }]);
  const segments = toOpenAiSpeakers(toDiarizedSegments(pieces, turns));
  const spoken = pieces.filter((p) => p.text.trim() !== '');
  return {
    task: 'transcribe',
    duration: result.durationS,
    text: spoken.map((p, i) => (i === 0 ? '' : (p.joiner ?? ' ')) + p.text.trim()).join(''),
    segments,
    usage: { type: 'duration', seconds: Math.ceil(result.durationS) },
  };
}

export type DiarizedStreamEvent =
  | { type: 'transcript.text.delta'; delta: string; segment_id: string }
  | DiarizedSegment
  | { type: 'transcript.text.done'; text: string; usage: { type: 'duration'; seconds: number } };

/**
 * stream=true: per segment its text as a delta (with what joins it to the one before in the done
 * text), then the segment; the deltas add up to the done text.
 */
export function toDiarizedStreamEvents(body: DiarizedTranscription): DiarizedStreamEvent[] {
  let cursor = 0;
  const events: DiarizedStreamEvent[] = body.segments.flatMap((segment, i) => {
    const at = body.text.indexOf(segment.text, cursor);
    let delta = i === 0 ? segment.text : ` ${segment.text}`;
    if (at >= 0) {
      delta = body.text.slice(cursor, at + segment.text.length);
      cursor = at + segment.text.length;
    }
    return [{ type: 'transcript.text.delta' as const, delta, segment_id: segment.id }, segment];
  });
  events.push({ type: 'transcript.text.done', text: body.text, usage: body.usage });
  return events;
}
