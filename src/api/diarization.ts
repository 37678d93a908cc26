/**
 * Speaker diarization API shapes (POST /v1/audio/diarization and its sessions), shared by the
 * gateway, which produces them, and the bench, which reads them. Times are in seconds from the
 * start of the recording (of the session, for sessions); speakers are `speaker_0`, `speaker_1`...
 * in order of first appearance.
 */

/** The response formats of the diarization endpoints. */
export const DIARIZATION_RESPONSE_FORMATS = ['json', 'rttm'] as const;
export type DiarizationResponseFormat = (typeof DIARIZATION_RESPONSE_FORMATS)[number];

/** One speaker turn. */
export interface SpeakerSegment {
  start: number;
  end: number;
  speaker: string;
}

/** `response_format=json` of POST /v1/audio/diarization and of a session's timeline. */
export interface DiarizationJson {
  /** Seconds of audio diarized. */
  duration: number;
  /** Distinct speakers found. */
  speakers: number;
  segments: SpeakerSegment[];
}

/** POST /v1/audio/diarization/sessions: the created session. */
export interface DiarizationSessionCreated {
  id: string;
  object: 'diarization.session';
  model: string;
  /** Wall-clock time (Unix seconds) at which the session expires unless a chunk arrives first. */
  expires_at: number;
  /** Idle seconds after which the session expires. */
  idle_timeout: number;
}

/** POST /v1/audio/diarization/sessions/{id}/chunks: the answer to one chunk. */
export interface DiarizationChunkResult {
  id: string;
  seq: number;
  /** Seconds of audio the session has received, this chunk included. */
  duration: number;
  speakers: number;
  /**
   * Every segment finalized so far (never changed later), by start, then end, then speaker: one
   * finalized with a later chunk may take its place before earlier ones (overlapping speakers), so
   * positions are not stable from one answer to the next.
   */
  finalized: SpeakerSegment[];
  /** The segments after the finalized ones, which later chunks may still change; in the same order. */
  provisional: SpeakerSegment[];
  expires_at: number;
}

/** GET and DELETE /v1/audio/diarization/sessions/{id} with `response_format=json`. */
export interface DiarizationSessionTimeline extends DiarizationJson {
  id: string;
  object: 'diarization.session';
  /** open, or closed after DELETE. */
  status: 'open' | 'closed';
  /** Chunks received. */
  chunks: number;
  /**
   * The finalized segments, then the provisional ones, each by start, then end, then speaker (all
   * in one order once closed, when all are final).
   */
  segments: SpeakerSegment[];
  /** How many of `segments` are final (the first ones); the rest may still change. */
  finalized: number;
}

/** OpenAI's `diarized_json` transcription: segments with their speaker. */
export interface DiarizedTranscription {
  task: 'transcribe';
  duration: number;
  text: string;
  segments: DiarizedSegment[];
  usage: { type: 'duration'; seconds: number };
}

export interface DiarizedSegment {
  type: 'transcript.text.segment';
  id: string;
  start: number;
  end: number;
  text: string;
  speaker: string;
}

/** The speaker label of an engine's speaker index. */
export function speakerLabel(index: number): string {
  return `speaker_${index}`;
}
