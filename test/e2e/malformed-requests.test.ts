/**
 * A corpus of malformed calls: each gets the right 4xx status and the OpenAI error envelope with
 * a stable code, and the server keeps serving afterwards.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CASES, CORPUS_CONFIG, good, sendCase } from '../support/fuzz-corpus.js';
import { startServer, type RunningServer } from '../support/server-process.js';

describe('malformed requests', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({
      config: CORPUS_CONFIG,
    });
  });
  after(async () => {
    await server.stop();
  });

  it(`has at least 30 cases (${CASES.length})`, () => assert.ok(CASES.length >= 30));

  for (const c of CASES) {
    it(`answers ${c.status} ${c.code}: ${c.name}`, async () => {
      const res = await sendCase(server.url, c);
      const payload = (await res.json()) as { error: { message: string; type: string; param: string | null; code: string } };
      assert.equal(res.status, c.status, JSON.stringify(payload));
      assert.equal(payload.error.code, c.code, payload.error.message);
      assert.equal(typeof payload.error.message, 'string');
      assert.ok(payload.error.message.length > 0);
      assert.ok(['invalid_request_error', 'authentication_error', 'rate_limit_error', 'server_error'].includes(payload.error.type));
      assert.ok('param' in payload.error);
    });
  }

  it('keeps serving after the corpus', async () => {
    const body = new FormData();
    body.append('model', 'echo');
    body.append('file', new Blob([good]), 'ok.wav');
    const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', body });
    assert.equal(res.status, 200);
    assert.match(((await res.json()) as { text: string }).text, /^echo samples=3200 /);
    assert.equal((await server.readiness()).status, 200);
  });
});
