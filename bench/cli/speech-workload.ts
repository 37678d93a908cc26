/**
 * The speech workload: one JSON POST to an OpenAI-compatible /v1/audio/speech endpoint per call,
 * asking for raw PCM (24 kHz, 16-bit, mono, little-endian: 48,000 bytes a second, so the audio's
 * duration is exact from the byte count) streamed as a chunked body (`stream_format: audio`).
 * Each call's voice and input are drawn from a generator seeded by the run's seed and the call's
 * sequence number, so every run asks for the same voices in the same order.
 */
import { createSeededRandom } from './load-driver.js';
import { createPlaybackTracker } from './playback.js';
import { pickInput, type SpeechTexts } from './speech-texts.js';
import { errorCodeFromBody, readText } from './transcribe-workload.js';
import type { VoiceMix } from './voice-mix.js';
import { toTransportErrorCode, type RequestContext, type RequestOutcome, type Workload } from './workload.js';

/** OpenAI's `pcm`: 24 kHz, 16-bit, mono. */
export const PCM_SAMPLE_RATE_HZ = 24_000;
export const PCM_BYTES_PER_SECOND = PCM_SAMPLE_RATE_HZ * 2;
/** A longer answer is an error: 4,096 characters are a few minutes of speech, far below this. */
export const MAX_AUDIO_BYTES = 64 * 1024 * 1024;

export interface SpeechWorkloadOptions {
  /** The full URL of the speech endpoint. */
  endpoint: string;
  model: string;
  voiceMix: VoiceMix;
  texts: SpeechTexts;
  /** Seeds each call's draws, together with its sequence number. */
  seed: number;
  /** Sent as `speed` when given. */
  speed?: number;
  /**
   * `playback`: each call resolves only once its audio would have finished playing (from its first
   * byte), so a closed-loop stream is a listener who asks again when the answer has been heard, as
   * in a voice call, instead of a client asking as fast as the server answers. @default 'none'
   */
  pace?: SpeechPace;
  apiKey?: string;
}

export type SpeechPace = 'none' | 'playback';

export interface SpeechWorkloadDeps {
  fetch: typeof globalThis.fetch;
}

export interface SpeechCall {
  voice: string;
  input: string;
}

/** The voice and input of call `sequence`: the same for the same seed, whatever the server does. */
export function planSpeechCall(options: Pick<SpeechWorkloadOptions, 'voiceMix' | 'texts' | 'seed'>, sequence: number): SpeechCall {
  // Golden-ratio spacing gives every sequence number its own, well-separated generator state.
  const random = createSeededRandom((options.seed + Math.imul(sequence + 1, 0x9e3779b1)) >>> 0);
  const voice = options.voiceMix.pick(random());
  return { voice, input: pickInput(options.texts, { sequence, random }) };
}

export function createSpeechWorkload(options: SpeechWorkloadOptions, deps: SpeechWorkloadDeps): Workload {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: '*/*' };
  if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`;
  const { texts, voiceMix } = options;
  const inputCount = texts.kind === 'lines' ? texts.lines.length : texts.sentences.length;
  const settings: Record<string, string> = {
    responseFormat: 'pcm',
    streamFormat: 'audio',
    texts: texts.kind === 'lines' ? 'text file, one call per line' : 'built-in sentences, 1 to 3 per call',
    voices:
      voiceMix.voices.length > 3
        ? `${voiceMix.voices.length} (${voiceMix.voices[0]} ... ${voiceMix.voices.at(-1)})`
        : voiceMix.voices.join(','),
    mix: voiceMix.kind === 'zipf' ? `zipf s=${voiceMix.zipfS}` : 'uniform',
    seed: String(options.seed),
    pace: options.pace ?? 'none',
    ...(options.speed === undefined ? {} : { speed: String(options.speed) }),
  };

  return {
    info: {
      kind: 'speech',
      endpoint: options.endpoint,
      model: options.model,
      isStreaming: true,
      inputCount,
      settings,
    },
    async makeRequest(context: RequestContext): Promise<RequestOutcome> {
      const call = planSpeechCall(options, context.sequence);
      const body = JSON.stringify({
        model: options.model,
        input: call.input,
        voice: call.voice,
        response_format: 'pcm',
        stream_format: 'audio',
        ...(options.speed === undefined ? {} : { speed: options.speed }),
      });
      const startMs = context.clock.nowMs();
      const tracker = createPlaybackTracker({ startMs, bytesPerSecond: PCM_BYTES_PER_SECOND });
      const finish = (rest: Pick<RequestOutcome, 'status' | 'errorCode'>): RequestOutcome => {
        const playback = tracker.summary();
        return {
          startMs,
          endMs: context.clock.nowMs(),
          ...rest,
          ...(playback.firstByteMs === undefined ? {} : { ttfbMs: playback.firstByteMs }),
          ...(rest.errorCode === undefined
            ? { audioSeconds: playback.audioSeconds, playback: { stalls: playback.stalls, stalledMs: playback.stalledMs } }
            : {}),
        };
      };
      let status: number | undefined;
      try {
        // NOTE: redirects are never followed, so every byte goes to the URL the user named.
        const response = await deps.fetch(options.endpoint, {
          method: 'POST',
          body,
          headers,
          signal: context.signal,
          redirect: 'manual',
        });
        status = response.status;
        if (status >= 300 && status < 400) {
          await response.body?.cancel();
          return finish({ status, errorCode: 'redirect' });
        }
        if (status < 200 || status >= 300) {
          return finish({ status, errorCode: errorCodeFromBody(await readText(response, context.signal), status) });
        }
        const contentType = response.headers.get('content-type') ?? '';
        // A JSON or SSE answer is not the raw audio that was asked for.
        if (contentType.includes('json') || contentType.includes('text/')) {
          await response.body?.cancel();
          return finish({ status, errorCode: 'bad_response' });
        }
        if (response.body === null) return finish({ status, errorCode: 'empty_audio' });
        const reader = response.body.getReader();
        let bytes = 0;
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          tracker.add(context.clock.nowMs(), value.byteLength);
          bytes += value.byteLength;
          if (bytes > MAX_AUDIO_BYTES) {
            await reader.cancel();
            return finish({ status, errorCode: 'response_too_large' });
          }
        }
        const outcome = finish(bytes === 0 ? { status, errorCode: 'empty_audio' } : { status });
        if (options.pace === 'playback' && outcome.errorCode === undefined) await untilPlayed(outcome, context);
        return outcome;
      } catch (err) {
        return finish({ ...(status === undefined ? {} : { status }), errorCode: toTransportErrorCode(err, context.signal) });
      }
    },
  };
}

/** Waits until the call's audio would have finished playing (from its first byte, stalls included), or the call is aborted. */
function untilPlayed(outcome: RequestOutcome, context: RequestContext): Promise<void> {
  const playedAtMs = outcome.startMs + (outcome.ttfbMs ?? 0) + 1000 * (outcome.audioSeconds ?? 0) + (outcome.playback?.stalledMs ?? 0);
  const waitMs = playedAtMs - context.clock.nowMs();
  if (waitMs <= 0 || context.signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      timer.cancel();
      context.signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = context.clock.setTimeout(done, waitMs);
    context.signal.addEventListener('abort', done, { once: true });
  });
}
