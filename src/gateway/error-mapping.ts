/**
 * The only module that knows HTTP status numbers, WebSocket close codes and the OpenAI error
 * envelope. Everything else raises a ServiceError with a kind.
 */
import { STATUS_CODES } from 'node:http';
import type { RealtimeErrorEvent } from '../api/realtime.js';
import type { OpenAiErrorEnvelope } from '../api/transcription.js';
import { errors } from '../core/error-catalog.js';
import { ServiceError, type ErrorKind } from '../core/errors.js';

export const HTTP_STATUS: Readonly<Record<ErrorKind, number>> = {
  invalid_argument: 400,
  unauthenticated: 401,
  not_found: 404,
  payload_too_large: 413,
  unsupported_media: 415,
  resource_exhausted: 429,
  unavailable: 503,
  deadline_exceeded: 504,
  cancelled: 499, // recorded in logs and metrics only: the client is gone
  internal: 500,
  request_timeout: 408,
  headers_too_large: 431,
};

export const OPENAI_TYPE: Readonly<Record<ErrorKind, string>> = {
  invalid_argument: 'invalid_request_error',
  unauthenticated: 'authentication_error',
  not_found: 'invalid_request_error',
  payload_too_large: 'invalid_request_error',
  unsupported_media: 'invalid_request_error',
  resource_exhausted: 'rate_limit_error',
  unavailable: 'server_error',
  deadline_exceeded: 'server_error',
  cancelled: 'server_error',
  internal: 'server_error',
  request_timeout: 'invalid_request_error',
  headers_too_large: 'invalid_request_error',
};

export const WS_CLOSE_CODE: Readonly<Record<ErrorKind, number>> = {
  invalid_argument: 1008,
  unauthenticated: 1008,
  not_found: 1008,
  payload_too_large: 1009,
  unsupported_media: 1003,
  resource_exhausted: 1013,
  unavailable: 1013,
  deadline_exceeded: 1011,
  cancelled: 1000,
  internal: 1011,
  request_timeout: 1008,
  headers_too_large: 1009,
};

/** The `error` object of a realtime `error` event; the session stays open. */
export function toRealtimeErrorBody(error: ServiceError, clientEventId: string | undefined): RealtimeErrorEvent['error'] {
  return {
    type: OPENAI_TYPE[error.kind],
    code: error.code,
    message: error.message,
    param: error.param ?? null,
    event_id: clientEventId ?? null,
  };
}

export interface HttpError {
  status: number;
  headers: Record<string, string>;
  body: OpenAiErrorEnvelope;
}

/** What the error handler knows about the call when it maps a framework error. */
export interface ErrorContext {
  maxBodyBytes: number;
  /** The call's Content-Type header, if any. */
  contentType: string | undefined;
}

/** Maps fastify's and its plugins' own error codes into the catalogue. */
function fromFrameworkError(err: Error & { code?: string; statusCode?: number }, context: ErrorContext): ServiceError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
    case 'FST_REQ_FILE_TOO_LARGE':
      return errors.bodyTooLarge({ maxBodyBytes: context.maxBodyBytes });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_INVALID_MULTIPART_CONTENT_TYPE':
    // A JSON body fails fastify's own parser before any route sees it; a well-formed one reaches
    // the route and gets invalid_content_type there, so a malformed one gets the same answer.
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return errors.invalidContentType({ contentType: context.contentType });
    case 'FST_PARTS_LIMIT':
    case 'FST_FILES_LIMIT':
    case 'FST_FIELDS_LIMIT':
    case 'FST_PROTO_VIOLATION':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    // A file part whose body ended before the part did (the gateway's handler answers a client
    // that left with client_disconnected instead).
    case 'ERR_STREAM_PREMATURE_CLOSE':
      return errors.invalidParameter({ param: 'body', expected: 'a well-formed multipart/form-data body', got: err.message });
    case undefined:
    default:
      break;
  }
  // busboy reports a malformed multipart body with plain Errors.
  // (busboy's boundary search also throws "The needle cannot have a length bigger than 256".)
  if (/multipart|boundary|needle|Unexpected end of form|Malformed part header/i.test(err.message) && (err.statusCode ?? 400) < 500) {
    return errors.invalidParameter({ param: 'body', expected: 'a well-formed multipart/form-data body', got: err.message });
  }
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return errors.invalidParameter({ param: 'body', expected: 'a valid request', got: err.message });
  }
  return undefined;
}

export function toServiceError(err: unknown, context: ErrorContext): ServiceError {
  if (err instanceof ServiceError) return err;
  if (err instanceof Error) return fromFrameworkError(err, context) ?? errors.internal({ cause: err });
  return errors.internal({ cause: err });
}

/**
 * The error kind a status code stands for, for answers that did not pass through the error
 * handler (a not-ready health check answers 503 itself); undefined for success and unknown codes.
 */
export function toErrorKind(status: number): ErrorKind | undefined {
  if (status < 400) return undefined;
  return (Object.keys(HTTP_STATUS) as ErrorKind[]).find((kind) => HTTP_STATUS[kind] === status);
}

export function toHttpError(error: ServiceError): HttpError {
  const headers: Record<string, string> = {};
  if (error.retryAfterMs !== undefined && (error.kind === 'resource_exhausted' || error.kind === 'unavailable')) {
    headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfterMs / 1000)));
  }
  return {
    status: HTTP_STATUS[error.kind],
    headers,
    body: {
      error: { message: error.message, type: OPENAI_TYPE[error.kind], param: error.param ?? null, code: error.code },
    },
  };
}

/**
 * Maps an error that Node's HTTP server reports through `clientError` (a request it could not
 * parse or did not receive in time) into the catalogue; undefined when the connection is gone and
 * nothing can be answered.
 */
export function fromClientError(err: Error & { code?: string }, context: { bodyTimeoutMs: number }): ServiceError | undefined {
  switch (err.code) {
    case 'ECONNRESET':
    case 'EPIPE':
      return undefined;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return errors.bodyTimeout({ bodyTimeoutMs: context.bodyTimeoutMs });
    case 'HPE_HEADER_OVERFLOW':
      return errors.headersTooLarge();
    case 'HPE_INVALID_CHUNK_SIZE':
      return errors.malformedRequest({ reason: 'the chunked encoding is invalid' });
    case 'HPE_INVALID_HEADER_TOKEN':
      return errors.malformedRequest({ reason: 'a header holds a character that is not allowed' });
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
    case 'HPE_INVALID_CONTENT_LENGTH':
      return errors.malformedRequest({ reason: 'the Content-Length is invalid' });
    case 'HPE_INVALID_METHOD':
      return errors.malformedRequest({ reason: 'the method is invalid (or bytes follow a request past its Content-Length)' });
    case undefined:
    default:
      return errors.malformedRequest({ reason: `the request could not be parsed (${err.code ?? 'unknown'})` });
  }
}

/**
 * A whole HTTP/1.1 response for `error`, for answering on a bare socket (the client-error path,
 * where no request object exists). It always closes the connection: the bytes after an
 * unreadable request cannot be framed.
 */
export function toRawHttpResponse(error: ServiceError): string {
  const http = toHttpError(error);
  const body = JSON.stringify(http.body);
  const lines = [
    `HTTP/1.1 ${http.status} ${STATUS_CODES[http.status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...Object.entries(http.headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}
