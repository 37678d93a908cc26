/**
 * Stitching the pieces of a recording back into one transcript (pure): texts joined with one
 * space, segments and words moved by their piece's offset (a Whisper segment's window start too).
 * A piece without segments gives one segment spanning the piece, so `verbose_json`, srt and vtt
 * follow the pieces.
 */
import { SEEK_FRAMES_PER_SECOND, type Segment, type TranscriptResult, type Word } from '../../scheduler/index.js';

export interface PieceResult {
  /** Where the piece starts in the recording, in seconds. */
  offsetS: number;
  /** The piece's own length, in seconds. */
  durationS: number;
  result: TranscriptResult;
}

const round6 = (x: number) => Math.round(x * 1e6) / 1e6;

/** A piece's segments and words in the recording's time. */
export function shiftPiece(piece: PieceResult): { text: string; segments: Segment[]; words: Word[] | null } {
  const { offsetS, result } = piece;
  const text = result.text.trim();
  const own = (result.segments ?? []).filter((s) => s.text.trim() !== '');
  const segments =
    own.length > 0
      ? own.map((s) => ({
          start: round6(s.start + offsetS),
          end: round6(s.end + offsetS),
          text: s.text.trim(),
          decoding: s.decoding === null ? null : { ...s.decoding, seek: s.decoding.seek + Math.round(offsetS * SEEK_FRAMES_PER_SECOND) },
        }))
      : text === ''
        ? []
        : [{ start: round6(offsetS), end: round6(offsetS + piece.durationS), text, decoding: null }];
  const words =
    result.words === null ? null : result.words.map((w) => ({ ...w, start: round6(w.start + offsetS), end: round6(w.end + offsetS) }));
  return { text, segments, words };
}

export function stitchPieces(pieces: readonly PieceResult[], totalDurationS: number): TranscriptResult {
  const shifted = pieces.map(shiftPiece);
  const hasWords = shifted.some((p) => p.words !== null);
  return {
    text: shifted
      .map((p) => p.text)
      .filter((t) => t !== '')
      .join(' '),
    language: pieces[0]?.result.language ?? 'en',
    durationS: totalDurationS,
    segments: shifted.flatMap((p) => p.segments),
    words: hasWords ? shifted.flatMap((p) => p.words ?? []) : null,
  };
}
