/** Renders a transcript in each OpenAI response_format (pure). */
import type { ResponseFormat, TranscriptStreamEvent, VerboseTranscription } from '../api/transcription.js';
import type { Segment, TranscriptResult } from '../scheduler/index.js';
import { languageName } from './language-names.js';

/** verbose_json's `voxmux.language_source`: see languageSourceOf in routes/transcriptions.ts and docs/adapters.md. */
export type LanguageSource = 'requested' | 'assumed' | 'reported';

export interface RenderedBody {
  contentType: string;
  body: string;
}

export function renderTranscript(
  result: TranscriptResult,
  format: ResponseFormat,
  options: { includeWords: boolean; includeSegments: boolean; languageSource?: LanguageSource; task?: 'transcribe' | 'translate' },
): RenderedBody {
  const text = result.text.trim();
  const usage = { type: 'duration' as const, seconds: Math.ceil(result.durationS) };
  switch (format) {
    case 'json':
      return { contentType: 'application/json; charset=utf-8', body: JSON.stringify({ text, usage }) };
    case 'text':
      return { contentType: 'text/plain; charset=utf-8', body: `${text}\n` };
    case 'srt':
      return { contentType: 'text/plain; charset=utf-8', body: toSrt(segmentsOf(result)) };
    case 'vtt':
      return { contentType: 'text/plain; charset=utf-8', body: toVtt(segmentsOf(result)) };
    case 'verbose_json': {
      const body: VerboseTranscription = {
        task: options.task ?? 'transcribe',
        language: languageName(result.language),
        duration: round3(result.durationS),
        text,
        segments: options.includeSegments
          ? segmentsOf(result).map((s, id) => ({
              id,
              seek: s.decoding?.seek ?? 0,
              start: round3(s.start),
              end: round3(s.end),
              text: s.text,
              // Engines that do not decode Whisper's way have no tokens or scores to give: OpenAI's fields
              // are kept, with empty values (docs/adapters.md).
              tokens: s.decoding?.tokens ?? [],
              temperature: s.decoding?.temperature ?? 0,
              avg_logprob: s.decoding?.avgLogprob ?? 0,
              compression_ratio: s.decoding?.compressionRatio ?? 0,
              no_speech_prob: s.decoding?.noSpeechProb ?? 0,
            }))
          : [],
        usage,
        voxmux: { language_source: options.languageSource ?? 'reported' },
      };
      if (options.includeWords) {
        body.words = (result.words ?? []).map((w) => ({ word: w.word, start: round3(w.start), end: round3(w.end) }));
      }
      return { contentType: 'application/json; charset=utf-8', body: JSON.stringify(body) };
    }
  }
}

/** Splits a finished transcript into stream events: one delta per segment, then done. */
export function toStreamEvents(result: TranscriptResult): TranscriptStreamEvent[] {
  const text = result.text.trim();
  const pieces = segmentsOf(result).map((s, i) => (i === 0 ? s.text : ` ${s.text}`));
  // Clients build the transcript by appending deltas, so the deltas must add up to the done text.
  // Segments that do not (a model that spaces or punctuates them differently) go as one delta.
  const deltas = pieces.join('') === text ? pieces : text === '' ? [] : [text];
  const events: TranscriptStreamEvent[] = deltas.map((delta) => ({ type: 'transcript.text.delta' as const, delta }));
  events.push({ type: 'transcript.text.done', text, usage: { type: 'duration', seconds: Math.ceil(result.durationS) } });
  return events;
}

function segmentsOf(result: TranscriptResult): Segment[] {
  const segments = (result.segments ?? []).map((s) => ({ ...s, text: s.text.trim() })).filter((s) => s.text !== '');
  if (segments.length > 0) return segments;
  const text = result.text.trim();
  return text === '' ? [] : [{ start: 0, end: result.durationS, text, decoding: null }];
}

function toSrt(segments: { start: number; end: number; text: string }[]): string {
  return segments.map((s, i) => `${i + 1}\n${timestamp(s.start, ',')} --> ${timestamp(s.end, ',')}\n${s.text}\n`).join('\n');
}

function toVtt(segments: { start: number; end: number; text: string }[]): string {
  return `WEBVTT\n\n${segments.map((s) => `${timestamp(s.start, '.')} --> ${timestamp(s.end, '.')}\n${s.text}\n`).join('\n')}`;
}

export function timestamp(seconds: number, separator: ',' | '.'): string {
  const totalMs = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(totalMs / 3_600_000);
  const m = Math.floor((totalMs % 3_600_000) / 60_000);
  const s = Math.floor((totalMs % 60_000) / 1000);
  const ms = totalMs % 1000;
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms, 3)}`;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
