/**
 * Malformed input at the HTTP layer (#16): every failure Node's HTTP parser or the multipart parser
 * can produce answers the OpenAI envelope with a catalogued code, fed over raw sockets where an
 * HTTP client would refuse to send it. (The gateway's memory after the corpus:
 * test/e2e/memory-idle.test.ts.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BOUNDARY, CLASSES, CORPUS_CONFIG, assertEnvelope, goodBody, head, rawCall } from '../support/fuzz-corpus.js';
import { startServer, type RunningServer } from '../support/server-process.js';

describe('malformed requests at the HTTP layer (#16)', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({
      config: CORPUS_CONFIG,
    });
  });
  after(async () => {
    await server.stop();
  });

  for (const malformed of CLASSES) {
    it(`answers ${malformed.status} ${[malformed.code].flat().join(' or ')}: ${malformed.name}`, async () => {
      assertEnvelope(await rawCall(server.url, malformed.pieces), malformed.status, malformed.code);
    });
  }

  it('answers a well-formed raw call with 200 (the helper itself works)', async () => {
    const answer = await rawCall(server.url, [
      head([`Content-Type: multipart/form-data; boundary=${BOUNDARY}`, `Content-Length: ${goodBody.length}`, 'Connection: close']),
      goodBody,
    ]);
    assert.equal(answer.status, 200, answer.body);
  });
});
