/**
 * The failures of `voxmux models pull`, each with a code and the exit code it maps to. They are
 * outcomes of a command, not request-scoped service errors, so they are not part of the server's
 * catalogue (the bench's errors are kept apart in the same way).
 */
export const PULL_ERROR_EXIT_CODES = {
  /** Bad arguments: nothing was sent. */
  usage: 2,
  /** 401: the repository is private or gated, or does not exist, and no valid token was sent. */
  unauthorized: 1,
  /** 403: the token may not read the repository (a gated repository whose conditions are not accepted). */
  forbidden: 1,
  /** 404: no such repository, revision or file. */
  not_found: 1,
  /** The downloaded bytes do not have the hash the Hub gives for the file. */
  checksum_mismatch: 1,
  /** The downloaded file is longer or shorter than the Hub says. */
  size_mismatch: 1,
  /** Too little free space for the files to download. */
  disk_full: 1,
  /** The models folder or a file in it could not be created, written or renamed. */
  disk_error: 1,
  /** The Hub could not be reached, or the connection kept failing. */
  network_error: 1,
  /** The Hub answered with an error status that is not one of the above. */
  hub_error: 1,
  /** The Hub answered something this client cannot use (malformed JSON, an unsafe file path). */
  bad_response: 1,
  /** HF_HUB_OFFLINE is set and the files are not all complete in the models folder already. */
  offline: 1,
  /** Another pull is downloading the same file into the same folder. */
  locked: 1,
} as const;

export type PullErrorCode = keyof typeof PULL_ERROR_EXIT_CODES;

export interface PullErrorOptions {
  cause?: unknown;
  /** Whether trying the same thing again later may succeed (5xx, 429, a dropped connection). */
  isTransient?: boolean;
  /** The server's Retry-After, where it gave one. */
  retryAfterMs?: number;
}

export class PullError extends Error {
  readonly code: PullErrorCode;
  readonly isTransient: boolean;
  readonly retryAfterMs: number | undefined;

  constructor(code: PullErrorCode, message: string, options: PullErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'PullError';
    this.code = code;
    this.isTransient = options.isTransient ?? false;
    this.retryAfterMs = options.retryAfterMs;
  }

  get exitCode(): number {
    return PULL_ERROR_EXIT_CODES[this.code];
  }
}

export function isPullError(value: unknown): value is PullError {
  return value instanceof PullError;
}

export function usageError(message: string): PullError {
  return new PullError('usage', message);
}
