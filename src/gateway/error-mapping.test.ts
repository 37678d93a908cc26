import assert from 'node:assert/strict';
import multipart from '@fastify/multipart';
import Fastify, { errorCodes, type FastifyInstance } from 'fastify';
import { after, before, describe, it } from 'node:test';
import { errors } from '../core/error-catalog.js';
import { ERROR_KINDS, ServiceError, type ErrorKind } from '../core/errors.js';
import { HTTP_STATUS, OPENAI_TYPE, WS_CLOSE_CODE, toErrorKind, toHttpError, toServiceError, type ErrorContext } from './error-mapping.js';

const context: ErrorContext = { maxBodyBytes: 1024, contentType: 'application/octet-stream' };

/** The status and OpenAI type of each kind, as the house style's error table gives them. */
const EXPECTED: Record<ErrorKind, [number, string]> = {
  invalid_argument: [400, 'invalid_request_error'],
  unauthenticated: [401, 'authentication_error'],
  not_found: [404, 'invalid_request_error'],
  payload_too_large: [413, 'invalid_request_error'],
  unsupported_media: [415, 'invalid_request_error'],
  resource_exhausted: [429, 'rate_limit_error'],
  unavailable: [503, 'server_error'],
  deadline_exceeded: [504, 'server_error'],
  cancelled: [499, 'server_error'],
  internal: [500, 'server_error'],
  request_timeout: [408, 'invalid_request_error'],
  headers_too_large: [431, 'invalid_request_error'],
};

/** A ServiceError of any kind, for kinds the catalogue has no factory with retryAfterMs for. */
const errorOfKind = (kind: ErrorKind, retryAfterMs?: number) =>
  new ServiceError({ code: 'internal_error', kind, message: `A ${kind} error`, retryAfterMs });

describe('error mapping tables', () => {
  it('maps every kind to its HTTP status, OpenAI type and a WebSocket close code', () => {
    for (const kind of ERROR_KINDS) {
      assert.deepEqual([HTTP_STATUS[kind], OPENAI_TYPE[kind]], EXPECTED[kind], kind);
      assert.ok(Number.isInteger(WS_CLOSE_CODE[kind]) && WS_CLOSE_CODE[kind] >= 1000 && WS_CLOSE_CODE[kind] < 5000, kind);
    }
    assert.equal(WS_CLOSE_CODE.resource_exhausted, 1013);
    assert.equal(WS_CLOSE_CODE.payload_too_large, 1009);
  });

  it('maps each error status back to its kind, and nothing for success or unknown statuses', () => {
    for (const kind of ERROR_KINDS) assert.equal(toErrorKind(HTTP_STATUS[kind]), kind);
    for (const status of [200, 204, 301, 418, 502]) assert.equal(toErrorKind(status), undefined, String(status));
  });
});

describe('toHttpError', () => {
  it('builds the OpenAI envelope with the code, the type of its kind and the param', () => {
    const http = toHttpError(errors.modelNotFound({ model: 'nope' }));
    assert.equal(http.status, 404);
    assert.deepEqual(http.headers, {});
    assert.deepEqual(http.body, {
      error: { message: "The model 'nope' does not exist", type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
    });
    assert.equal(toHttpError(errors.invalidApiKey()).body.error.param, null);
  });

  it('sends Retry-After in whole seconds, rounded up, with a 429', () => {
    const header = (retryAfterMs: number) => toHttpError(errors.queueFull({ model: 'm', queued: 1, retryAfterMs })).headers['retry-after'];
    assert.equal(toHttpError(errors.queueFull({ model: 'm', queued: 1, retryAfterMs: 1000 })).status, 429);
    assert.equal(header(1000), '1');
    assert.equal(header(1001), '2');
    assert.equal(header(1500), '2');
    assert.equal(header(2000), '2');
    assert.equal(header(59_999), '60');
  });

  it('sends at least one second of Retry-After', () => {
    assert.equal(toHttpError(errors.noReadyInstance({ model: 'm', retryAfterMs: 0 })).headers['retry-after'], '1');
    assert.equal(toHttpError(errors.noReadyInstance({ model: 'm', retryAfterMs: 1 })).headers['retry-after'], '1');
  });

  it('sends Retry-After with a 503', () => {
    for (const error of [errors.shuttingDown(), errors.instanceCrashed({ instanceId: 'i', reason: 'exit 1' })]) {
      const http = toHttpError(error);
      assert.equal(http.status, 503);
      assert.deepEqual(http.headers, { 'retry-after': '1' });
    }
  });

  it('sends no Retry-After for a 429 or 503 without retryAfterMs', () => {
    assert.deepEqual(toHttpError(errorOfKind('resource_exhausted')).headers, {});
    assert.deepEqual(toHttpError(errorOfKind('unavailable')).headers, {});
  });

  it('sends no Retry-After for any other kind, even one that carries retryAfterMs', () => {
    for (const kind of ERROR_KINDS.filter((k) => k !== 'resource_exhausted' && k !== 'unavailable')) {
      assert.deepEqual(toHttpError(errorOfKind(kind, 5000)).headers, {}, kind);
    }
  });
});

describe('toServiceError', () => {
  let app: FastifyInstance;
  before(async () => {
    app = Fastify();
    await app.register(multipart);
    await app.ready();
  });
  after(async () => {
    await app.close();
  });

  it('passes a ServiceError through unchanged', () => {
    const error = errors.queueFull({ model: 'm', queued: 2, retryAfterMs: 10 });
    assert.equal(toServiceError(error, context), error);
  });

  it('turns an unknown Error or thrown value into internal_error without exposing its message', () => {
    const cause = new Error('database password is hunter2');
    const error = toServiceError(cause, context);
    assert.equal(error.code, 'internal_error');
    assert.equal(error.kind, 'internal');
    assert.equal(error.cause, cause);
    assert.ok(!JSON.stringify(toHttpError(error).body).includes('hunter2'));
    assert.equal(toServiceError('a string', context).code, 'internal_error');
    assert.equal(toServiceError(undefined, context).code, 'internal_error');
  });

  it('maps body size limits from fastify and multipart to body_too_large with the limit', () => {
    for (const err of [new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE(), new app.multipartErrors.RequestFileTooLargeError()]) {
      const error = toServiceError(err, context);
      assert.equal(error.code, 'body_too_large', err.code);
      assert.equal(error.details.maxBodyBytes, 1024);
      assert.equal(toHttpError(error).status, 413);
    }
  });

  it('maps a body that is not multipart to invalid_content_type naming the content type sent', () => {
    for (const err of [
      new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE('application/octet-stream'),
      new app.multipartErrors.InvalidMultipartContentTypeError(),
      new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY(),
      new errorCodes.FST_ERR_CTP_EMPTY_JSON_BODY(),
    ]) {
      const error = toServiceError(err, context);
      assert.equal(error.code, 'invalid_content_type', err.code);
      assert.match(error.message, /got application\/octet-stream$/);
    }
    assert.match(
      toServiceError(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(), { ...context, contentType: undefined }).message,
      /got no content type$/,
    );
  });

  it('maps multipart limits and malformed bodies to invalid_parameter on the body', () => {
    const { PartsLimitError, FilesLimitError, FieldsLimitError, PrototypeViolationError } = app.multipartErrors;
    for (const err of [
      new PartsLimitError(),
      new FilesLimitError(),
      new FieldsLimitError(),
      new PrototypeViolationError(),
      new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH(),
      new Error('Unexpected end of form'),
      new Error('Malformed part header'),
      new Error('Multipart: Boundary not found'),
    ]) {
      const error = toServiceError(err, context);
      assert.equal(error.code, 'invalid_parameter', err.message);
      assert.equal(error.param, 'body');
      assert.equal(toHttpError(error).status, 400);
    }
  });

  it('maps another client error from the framework to invalid_parameter, and a server error to internal_error', () => {
    const clientError = Object.assign(new Error('Bad thing in the request'), { code: 'FST_SOMETHING_NEW', statusCode: 406 });
    assert.equal(toServiceError(clientError, context).code, 'invalid_parameter');
    const serverError = Object.assign(new Error('boundary of the pool exceeded'), { statusCode: 500 });
    assert.equal(toServiceError(serverError, context).code, 'internal_error');
  });
});
