/**
 * The closed, transport-neutral set of error kinds and the ServiceError that carries them.
 * Status numbers and OpenAI envelope types are chosen in gateway/error-mapping.ts only.
 */
import type { ErrorCode } from './error-catalog.js';

export const ERROR_KINDS = [
  'invalid_argument',
  'unauthenticated',
  'not_found',
  'payload_too_large',
  'unsupported_media',
  'resource_exhausted',
  'unavailable',
  'deadline_exceeded',
  'cancelled',
  'internal',
  // the HTTP layer: a request that did not arrive in time, or whose headers are too large
  'request_timeout',
  'headers_too_large',
] as const;

export type ErrorKind = (typeof ERROR_KINDS)[number];

export interface ServiceErrorInit {
  code: ErrorCode;
  kind: ErrorKind;
  message: string;
  /** The offending request field, for the OpenAI envelope's `param`. */
  param?: string;
  details?: Readonly<Record<string, unknown>>;
  cause?: unknown;
  retryAfterMs?: number;
}

/** A request-scoped failure with a catalogued code. Construct through `errors.*` factories only. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly kind: ErrorKind;
  readonly param: string | undefined;
  readonly details: Readonly<Record<string, unknown>>;
  readonly retryAfterMs: number | undefined;

  constructor(init: ServiceErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'ServiceError';
    this.code = init.code;
    this.kind = init.kind;
    this.param = init.param;
    this.details = init.details ?? {};
    this.retryAfterMs = init.retryAfterMs;
  }

  /** Retryable kinds may succeed if the client tries again later. */
  get isRetryable(): boolean {
    return this.kind === 'resource_exhausted' || this.kind === 'unavailable' || this.kind === 'deadline_exceeded';
  }
}

export function isServiceError(value: unknown): value is ServiceError {
  return value instanceof ServiceError;
}

/** A ServiceError's fields as plain data, for a message to another thread (errors.fromPlain rebuilds it). */
export interface PlainServiceError {
  code: string;
  message: string;
  param?: string;
  details: Readonly<Record<string, unknown>>;
  retryAfterMs?: number;
}

/** The plain fields of a ServiceError; any other thrown value becomes internal_error (its text kept in the message only). */
export function toPlainError(err: unknown): PlainServiceError {
  if (!(err instanceof ServiceError)) return { code: 'internal_error', message: 'Internal server error', details: {} };
  return {
    code: err.code,
    message: err.message,
    ...(err.param === undefined ? {} : { param: err.param }),
    details: err.details,
    ...(err.retryAfterMs === undefined ? {} : { retryAfterMs: err.retryAfterMs }),
  };
}
