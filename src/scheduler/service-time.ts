/**
 * A model's service time, learnt online (pure): how long one batch takes on one instance, as a
 * fixed part per batch plus a part per second of audio in it. Each completed batch updates
 * exponentially weighted moments of (audio seconds, duration); the line through them is a
 * weighted least-squares fit, so recent batches count most and an instance that slows down (a
 * loaded CPU, a throttled GPU) is followed within a few batches.
 */

/** Milliseconds one batch takes: `perBatchMs + perAudioSecondMs × its audio seconds`. */
export interface ServiceTimeModel {
  perBatchMs: number;
  perAudioSecondMs: number;
}

/** Exponentially weighted moments of the observed batches; start from EMPTY_SERVICE_TIME. */
export interface ServiceTimeEstimate {
  /** Batches observed (not weighted). */
  batches: number;
  /** Weighted sums: weight, x, y, x², x·y, where x is audio seconds and y is milliseconds. */
  w: number;
  x: number;
  y: number;
  xx: number;
  xy: number;
}

export const EMPTY_SERVICE_TIME: ServiceTimeEstimate = Object.freeze({ batches: 0, w: 0, x: 0, y: 0, xx: 0, xy: 0 });

/** Weight of the newest batch: the estimate's memory is about 1/alpha batches. */
export const SERVICE_TIME_ALPHA = 0.1;

/** Below this many batches, or with too little spread in their audio lengths, no slope is fitted. */
const MIN_BATCHES_FOR_SLOPE = 3;
/** The audio lengths must spread by at least this share of their mean to fit a slope. */
const MIN_SPREAD_RATIO = 0.1;

/** The estimate after one more completed batch. */
export function observeBatch(
  estimate: ServiceTimeEstimate,
  batch: { audioS: number; durationMs: number },
  alpha = SERVICE_TIME_ALPHA,
): ServiceTimeEstimate {
  const keep = 1 - alpha;
  const { audioS: x, durationMs: y } = batch;
  return {
    batches: estimate.batches + 1,
    w: keep * estimate.w + alpha,
    x: keep * estimate.x + alpha * x,
    y: keep * estimate.y + alpha * y,
    xx: keep * estimate.xx + alpha * x * x,
    xy: keep * estimate.xy + alpha * x * y,
  };
}

/**
 * The service-time line the estimate supports. Before any batch: the prior. With batches of
 * (nearly) one length, a slope cannot be told from an intercept: the prior's shape is kept and
 * scaled so it passes through the measured mean, which is all such data can say. A fit that
 * comes out with a negative part drops that part and passes through the mean with the other.
 */
export function serviceTimeModel(estimate: ServiceTimeEstimate, prior: ServiceTimeModel): ServiceTimeModel {
  if (estimate.batches === 0 || estimate.w <= 0) return prior;
  const meanX = estimate.x / estimate.w;
  const meanY = estimate.y / estimate.w;
  const varX = estimate.xx / estimate.w - meanX * meanX;
  const covXY = estimate.xy / estimate.w - meanX * meanY;
  const hasSpread = estimate.batches >= MIN_BATCHES_FOR_SLOPE && varX > (MIN_SPREAD_RATIO * meanX) ** 2 && varX > 0;
  if (!hasSpread) {
    const priorAtMean = prior.perBatchMs + prior.perAudioSecondMs * meanX;
    if (priorAtMean <= 0) return { perBatchMs: Math.max(0, meanY), perAudioSecondMs: 0 };
    const scale = meanY / priorAtMean;
    return { perBatchMs: prior.perBatchMs * scale, perAudioSecondMs: prior.perAudioSecondMs * scale };
  }
  const slope = covXY / varX;
  const intercept = meanY - slope * meanX;
  if (slope < 0) return { perBatchMs: Math.max(0, meanY), perAudioSecondMs: 0 };
  if (intercept < 0) return { perBatchMs: 0, perAudioSecondMs: meanX > 0 ? meanY / meanX : 0 };
  return { perBatchMs: intercept, perAudioSecondMs: slope };
}

/** Predicted milliseconds of one batch holding `audioS` seconds of audio. */
export function batchMs(model: ServiceTimeModel, audioS: number): number {
  return model.perBatchMs + model.perAudioSecondMs * audioS;
}
