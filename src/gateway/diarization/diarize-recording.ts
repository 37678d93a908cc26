/**
 * A whole recording diarized as a one-chunk session (`is_last`): the engine then finalizes
 * everything at once. Shared by POST /v1/audio/diarization and diarized transcripts.
 */
import { randomUUID } from 'node:crypto';
import type { SpeakerSegment } from '../../api/diarization.js';
import { errors } from '../../core/error-catalog.js';
import type { SubmitOptions } from '../../scheduler/index.js';
import type { GatewayDeps } from '../gateway-types.js';
import type { SpeakerBounds } from './session-store.js';
import { sortSegments, toEngineOutput, toSpeakerSegments } from './timeline.js';
import { toSpeechRegions } from './speech-regions.js';

export const SAMPLE_RATE_HZ = 16_000;
/** Voice-activity frames at or above this are speech in the `speech` option. */
export const SPEECH_REGION_THRESHOLD = 0.5;

/** The `speech` option of a chunk for engines that want it; undefined for the others. */
export async function speechRegionsOf(
  samples: Int16Array,
  p: { wantsSpeechRegions: boolean; signal: AbortSignal },
  deps: Pick<GatewayDeps, 'voiceActivity'>,
): Promise<[number, number][] | undefined> {
  if (!p.wantsSpeechRegions) return undefined;
  const activity = await deps.voiceActivity.detect(samples, p.signal);
  return toSpeechRegions(activity, { sampleRateHz: SAMPLE_RATE_HZ, threshold: SPEECH_REGION_THRESHOLD, totalSamples: samples.length });
}

/**
 * A recording longer than the engine's longest item (`maxItemMs`: Sortformer's maxItemSeconds) is
 * sent as a session of consecutive items of at most that length, the last one `is_last`, all
 * submitted at once (the scheduler runs them in order); the engine's segments are then those of the
 * items together, as a session's would be, listed by start (compareSegments).
 * @throws the scheduler's errors (queue_full, no_ready_instance, deadline_exceeded...) and the instance's
 */
export async function diarizeRecording(
  p: {
    model: string;
    wantsSpeechRegions: boolean;
    /** The longest item the engine takes, in milliseconds; absent: any length. */
    maxItemMs?: number | undefined;
    samples: Int16Array;
    bounds: SpeakerBounds;
    submitOptions: SubmitOptions;
  },
  deps: Pick<GatewayDeps, 'sequences' | 'voiceActivity'>,
): Promise<{ segments: SpeakerSegment[]; speakers: number }> {
  const sequences = deps.sequences;
  if (sequences === undefined) throw errors.internal({ cause: new Error('No sequence port: diarization is not wired') });
  const signal = p.submitOptions.signal ?? new AbortController().signal;
  const itemSamples = p.maxItemMs === undefined ? p.samples.length : Math.max(1, Math.floor((p.maxItemMs * SAMPLE_RATE_HZ) / 1000));
  const items: { startSample: number; audio: Int16Array; speech: [number, number][] | undefined }[] = [];
  for (let startSample = 0; startSample === 0 || startSample < p.samples.length; startSample += itemSamples) {
    const audio = p.samples.subarray(startSample, startSample + itemSamples);
    const speech = await speechRegionsOf(audio, { wantsSpeechRegions: p.wantsSpeechRegions, signal }, deps);
    items.push({ startSample, audio, speech });
  }
  const sessionId = `diar-${randomUUID()}`;
  try {
    const results = await Promise.all(
      items.map(({ startSample, audio, speech }, seq) =>
        sequences.submit(
          p.model,
          {
            sessionId,
            seq,
            audio,
            isLast: seq === items.length - 1,
            options: { ...p.bounds, chunkOffsetS: startSample / SAMPLE_RATE_HZ, ...(speech === undefined ? {} : { speech }) },
          },
          p.submitOptions,
        ),
      ),
    );
    const outputs = results.map((result) => toEngineOutput(result.output, p.model));
    const last = outputs.at(-1)!;
    return {
      segments: toSpeakerSegments(sortSegments([...outputs.flatMap((o) => o.finalized), ...last.provisional])),
      speakers: last.speakers,
    };
  } finally {
    void sequences.end(p.model, sessionId);
  }
}
