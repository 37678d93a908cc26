/**
 * Server VAD turn taking (pure): speech probabilities per frame in, speech_started and
 * speech_stopped out. Speech starts at the first frame at or above `threshold`, reported
 * `prefixPaddingMs` earlier (the audio kept before it); it stops once frames below the threshold
 * have lasted `silenceDurationMs`, reported where that silence began.
 */
export interface TurnDetectionPolicy {
  /** Speech probability at which a frame counts as speech, 0 to 1. */
  threshold: number;
  /** Audio kept before the start of speech, in milliseconds. */
  prefixPaddingMs: number;
  /** Silence that ends a turn, in milliseconds. */
  silenceDurationMs: number;
}

export type TurnEvent = { type: 'speechStarted'; audioStartMs: number } | { type: 'speechStopped'; audioEndMs: number };

export interface TurnDetector {
  /** One frame's probability; `frameStartMs` is the frame's start on the session's audio timeline. */
  push(probability: number, frame: { frameStartMs: number; frameMs: number }): TurnEvent | undefined;
  readonly isSpeaking: boolean;
  /** Forgets a turn in progress (the buffer was cleared or committed by the client). */
  reset(): void;
}

export function createTurnDetector(policy: TurnDetectionPolicy): TurnDetector {
  let isSpeaking = false;
  let silenceStartMs: number | undefined;
  return {
    get isSpeaking() {
      return isSpeaking;
    },
    reset() {
      isSpeaking = false;
      silenceStartMs = undefined;
    },
    push(probability, { frameStartMs, frameMs }) {
      const isSpeech = probability >= policy.threshold;
      if (!isSpeaking) {
        if (!isSpeech) return undefined;
        isSpeaking = true;
        silenceStartMs = undefined;
        return { type: 'speechStarted', audioStartMs: Math.max(0, frameStartMs - policy.prefixPaddingMs) };
      }
      if (isSpeech) {
        silenceStartMs = undefined;
        return undefined;
      }
      silenceStartMs ??= frameStartMs;
      if (frameStartMs + frameMs - silenceStartMs < policy.silenceDurationMs) return undefined;
      isSpeaking = false;
      const audioEndMs = silenceStartMs;
      silenceStartMs = undefined;
      return { type: 'speechStopped', audioEndMs };
    },
  };
}
