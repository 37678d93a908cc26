/**
 * The bench's own failures, each with a code and the process exit code it maps to. These are CLI
 * outcomes, not request-scoped service errors, so they are not part of the server's catalogue.
 */
export const BENCH_ERROR_CODES = {
  /** Bad flags or inputs: nothing was sent. */
  usage: 2,
  /** The target could not be reached at all (refused, DNS, timeout). */
  unreachable: 2,
  /** The run happened but no request succeeded. */
  all_failed: 1,
  /** The user interrupted the run. */
  interrupted: 130,
} as const;

export type BenchErrorCode = keyof typeof BENCH_ERROR_CODES;

export class BenchError extends Error {
  readonly code: BenchErrorCode;

  constructor(code: BenchErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BenchError';
    this.code = code;
  }

  get exitCode(): number {
    return exitCodeOf(this.code);
  }
}

/** The exit code a command returns for an outcome it reports itself (interrupted, all failed). */
export function exitCodeOf(code: BenchErrorCode): number {
  return BENCH_ERROR_CODES[code];
}

export function usageError(message: string): BenchError {
  return new BenchError('usage', message);
}

export function isBenchError(value: unknown): value is BenchError {
  return value instanceof BenchError;
}
