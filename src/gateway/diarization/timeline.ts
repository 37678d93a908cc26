/**
 * A diarization engine's item output (the contract in docs/adapters.md: `finalized`,
 * `provisional`, `speakers`), checked, and turned into the API's shapes: JSON segments with
 * speaker labels in the API's order, and RTTM lines (NIST's SPEAKER records, one per turn).
 */
import { speakerLabel, type SpeakerSegment } from '../../api/diarization.js';
import { errors } from '../../core/error-catalog.js';

/** A segment as the engine sends it: seconds from the session start, a speaker index. */
export interface EngineSegment {
  start: number;
  end: number;
  speaker: number;
}

export interface EngineOutput {
  finalized: EngineSegment[];
  provisional: EngineSegment[];
  speakers: number;
}

function isSegment(value: unknown): value is EngineSegment {
  if (typeof value !== 'object' || value === null) return false;
  const { start, end, speaker } = value as Record<string, unknown>;
  return (
    typeof start === 'number' &&
    typeof end === 'number' &&
    Number.isFinite(start) &&
    Number.isFinite(end) &&
    start >= 0 &&
    end >= start &&
    Number.isInteger(speaker) &&
    (speaker as number) >= 0
  );
}

/**
 * The engine's output, checked against the contract.
 * @throws internal_error when the output breaks the contract (an engine bug, not the caller's)
 */
export function toEngineOutput(output: Readonly<Record<string, unknown>>, model: string): EngineOutput {
  const { finalized, provisional, speakers } = output;
  const isValid =
    Array.isArray(finalized) &&
    Array.isArray(provisional) &&
    finalized.every(isSegment) &&
    provisional.every(isSegment) &&
    Number.isInteger(speakers) &&
    (speakers as number) >= 0;
  if (!isValid) {
    throw errors.internal({
      cause: new Error(`The diarization model '${model}' answered without finalized and provisional segment lists and a speaker count`),
    });
  }
  return { finalized: finalized as EngineSegment[], provisional: provisional as EngineSegment[], speakers: speakers as number };
}

/** Seconds rounded to the millisecond, as the API reports them. */
function roundS(s: number): number {
  return Math.round(s * 1000) / 1000;
}

/**
 * The order in which the API lists segments: by start, then end, then speaker, as shown (to the
 * millisecond). An engine finalizes a turn once it has ended, so with overlapping speakers a turn
 * finalized with a later chunk (or item) may start before one finalized earlier.
 */
export function compareSegments(a: EngineSegment, b: EngineSegment): number {
  return roundS(a.start) - roundS(b.start) || roundS(a.end) - roundS(b.end) || a.speaker - b.speaker;
}

/** The segments in the API's order (compareSegments), as a new list. */
export function sortSegments(segments: readonly EngineSegment[]): EngineSegment[] {
  return [...segments].sort(compareSegments);
}

export function toSpeakerSegments(segments: readonly EngineSegment[]): SpeakerSegment[] {
  return segments.map((s) => ({ start: roundS(s.start), end: roundS(s.end), speaker: speakerLabel(s.speaker) }));
}

/**
 * RTTM (NIST Rich Transcription Time Marked): one `SPEAKER <file> 1 <onset> <duration> <NA> <NA>
 * <speaker> <NA> <NA>` line per turn, the format that DER scorers (dscore, pyannote) read.
 */
export function toRttm(fileId: string, segments: readonly SpeakerSegment[]): string {
  const file = fileId.replace(/\s+/g, '_') || 'audio';
  return segments
    .map((s) => `SPEAKER ${file} 1 ${s.start.toFixed(3)} ${(s.end - s.start).toFixed(3)} <NA> <NA> ${s.speaker} <NA> <NA>\n`)
    .join('');
}
