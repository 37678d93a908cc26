import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { toErrorKey } from './workload.js';

describe('toErrorKey', () => {
  it("keys a server's error code under its status, and a non-envelope answer as http_<status>", () => {
    assert.equal(toErrorKey({ status: 429, errorCode: 'queue_full' }), '429 queue_full');
    assert.equal(toErrorKey({ status: 502, errorCode: 'http_502' }), 'http_502');
    // An error event inside a 200 stream is the server's envelope too.
    assert.equal(toErrorKey({ status: 200, errorCode: 'internal_error' }), '200 internal_error');
  });

  it('keys a transport code alone, whether or not a status came before it (docs/bench.md)', () => {
    for (const code of [
      'timeout',
      'abandoned',
      'ECONNRESET',
      'UND_ERR_SOCKET',
      'redirect',
      'bad_response',
      'incomplete_stream',
      'response_too_large',
      'empty_audio',
    ]) {
      assert.equal(toErrorKey({ errorCode: code }), code);
      assert.equal(toErrorKey({ status: code === 'redirect' ? 307 : 200, errorCode: code }), code, code);
    }
  });
});
