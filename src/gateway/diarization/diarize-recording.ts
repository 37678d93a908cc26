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
import { toEngineOutput, toSpeakerSegments } from './timeline.js';
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
 * @throws the scheduler's errors (queue_full, no_ready_instance, deadline_exceeded...) and the instance's
 */
export async function diarizeRecording(
  p: { model: string; wantsSpeechRegions: boolean; samples: Int16Array; bounds: SpeakerBounds; submitOptions: SubmitOptions },
  deps: Pick<GatewayDeps, 'sequences' | 'voiceActivity'>,
): Promise<{ segments: SpeakerSegment[]; speakers: number }> {
  const sequences = deps.sequences;
  if (sequences === undefined) throw errors.internal({ cause: new Error('No sequence port: diarization is not wired') });
  const signal = p.submitOptions.signal ?? new AbortController().signal;
  const speech = await speechRegionsOf(p.samples, { wantsSpeechRegions: p.wantsSpeechRegions, signal }, deps);
  const sessionId = `diar-${randomUUID()}`;
  try {
    const result = await sequences.submit(
      p.model,
      {
        sessionId,
        seq: 0,
        audio: p.samples,
        isLast: true,
        options: { ...p.bounds, chunkOffsetS: 0, ...(speech === undefined ? {} : { speech }) },
      },
      p.submitOptions,
    );
    const output = toEngineOutput(result.output, p.model);
    return { segments: toSpeakerSegments([...output.finalized, ...output.provisional]), speakers: output.speakers };
  } finally {
    void sequences.end(p.model, sessionId);
  }
}
