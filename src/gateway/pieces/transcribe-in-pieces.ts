/**
 * A long recording as pieces: each piece is its own batch request through the scheduler (so the
 * pieces spread over instances and batch with other work), and the transcript is stitched from
 * them. `onReady` hears each piece, in order, as soon as it and every piece before it are done:
 * that is what a streamed call sends as deltas.
 */
import { setMaxListeners } from 'node:events';
import type { SubmitOptions, TranscriptionRequest, TranscriptResult } from '../../scheduler/index.js';
import { shiftPiece, stitchPieces, type PieceResult } from './stitch.js';

export interface PieceRange {
  startSample: number;
  endSample: number;
}

export interface ReadyPiece {
  index: number;
  /** The piece's trimmed text, with a leading space when text came before it: deltas add up to the transcript. */
  delta: string;
}

export interface PiecesInput {
  request: TranscriptionRequest;
  ranges: readonly PieceRange[];
  sampleRateHz: number;
  options: SubmitOptions;
  submit(request: TranscriptionRequest, options: SubmitOptions): Promise<TranscriptResult>;
  onReady?(piece: ReadyPiece): void;
}

/**
 * Resolves with the stitched transcript; rejects with the first piece's error, after aborting
 * the other pieces (their queued requests are dropped).
 */
export function transcribeInPieces(input: PiecesInput): Promise<TranscriptResult> {
  const { request, ranges, sampleRateHz, options } = input;
  const controller = new AbortController();
  // Each piece's queued request listens on this one signal: a 10-minute recording has 40 pieces.
  setMaxListeners(ranges.length + 10, controller.signal);
  const forward = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', forward, { once: true });
  if (options.signal?.aborted === true) forward(); // a listener added now would never fire
  const done: (PieceResult | undefined)[] = ranges.map(() => undefined);
  let nextReady = 0;
  let hasText = false;
  let isSettled = false;
  return new Promise<TranscriptResult>((resolve, reject) => {
    const settle = (outcome: () => void) => {
      if (isSettled) return;
      isSettled = true;
      options.signal?.removeEventListener('abort', forward);
      outcome();
    };
    const fail = (err: unknown) =>
      settle(() => {
        controller.abort(err);
        reject(err);
      });
    ranges.forEach((range, index) => {
      const piece: TranscriptionRequest = {
        ...request,
        audio: request.audio.subarray(range.startSample, range.endSample),
        // One range is the whole recording: a clip of its own to the engine.
        piece: ranges.length > 1,
      };
      const pieceOptions: SubmitOptions = {
        ...options,
        signal: controller.signal,
        requestId: options.requestId === undefined ? undefined : `${options.requestId}.${index}`,
        // The call is judged as a whole: the last piece is predicted with every other piece queued
        // ahead of it; if it is refused, the call fails and the earlier pieces are dropped.
        admission: index < ranges.length - 1 ? 'queueLimitOnly' : options.admission,
      };
      input.submit(piece, pieceOptions).then((result) => {
        if (isSettled) return;
        done[index] = {
          offsetS: range.startSample / sampleRateHz,
          durationS: (range.endSample - range.startSample) / sampleRateHz,
          result,
        };
        try {
          for (let ready = done[nextReady]; ready !== undefined; ready = done[nextReady]) {
            const { text } = shiftPiece(ready);
            const delta = text === '' ? '' : hasText ? ` ${text}` : text;
            hasText ||= text !== '';
            input.onReady?.({ index: nextReady, delta });
            nextReady++;
          }
        } catch (err) {
          fail(err);
          return;
        }
        if (nextReady === ranges.length) {
          const totalSamples = ranges.at(-1)?.endSample ?? 0;
          settle(() => resolve(stitchPieces(done as PieceResult[], totalSamples / sampleRateHz)));
        }
      }, fail);
    });
  });
}
