import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { describe, it } from 'node:test';
import { normalizeEtag, parseContentRange, toHubError, toRepoSnapshot } from './hub-client.js';
import { parseRepoRef } from './repo-ref.js';

const ENDPOINT = 'https://huggingface.co';

function errorOf(status: number, headers: IncomingHttpHeaders, options: { path?: string; hasToken?: boolean; ref?: string } = {}) {
  const ref = parseRepoRef(options.ref ?? 'acme/model@dev');
  return toHubError(
    { status, headers, body: Buffer.from(JSON.stringify({ error: 'from the body' })), url: new URL(`${ENDPOINT}/api/models/acme/model`) },
    {
      endpoint: ENDPOINT,
      ref,
      hasToken: options.hasToken ?? false,
      nowWallMs: 0,
      ...(options.path === undefined ? {} : { path: options.path }),
    },
  );
}

describe('toHubError', () => {
  it('says to set HF_TOKEN for a 401 without a token, and that the token is invalid when the Hub says so', () => {
    const without = errorOf(401, { 'x-error-code': 'RepoNotFound' });
    assert.equal(without.code, 'unauthorized');
    assert.match(without.message, /acme\/model was not found on huggingface\.co, or it is private or gated .*set HF_TOKEN/);
    assert.match(without.message, /the Hub said: from the body/);
    const invalid = errorOf(401, { 'x-error-message': 'Invalid credentials in Authorization header' }, { hasToken: true });
    assert.match(invalid.message, /refused HF_TOKEN as invalid: create an access token at https:\/\/huggingface\.co\/settings\/tokens/);
  });

  it('points a gated repository at the page where its conditions are accepted', () => {
    const gated = errorOf(403, { 'x-error-code': 'GatedRepo' }, { hasToken: true });
    assert.equal(gated.code, 'forbidden');
    assert.match(
      gated.message,
      /gated repository and the account of HF_TOKEN has no access yet: accept its conditions at https:\/\/huggingface\.co\/acme\/model/,
    );
  });

  it('tells an unknown revision, file and repository apart by X-Error-Code', () => {
    assert.match(errorOf(404, { 'x-error-code': 'RevisionNotFound' }).message, /^Revision 'dev' of acme\/model was not found/);
    assert.match(
      errorOf(404, { 'x-error-code': 'EntryNotFound' }, { path: 'a.bin' }).message,
      /^File 'a\.bin' was not found in acme\/model at revision dev/,
    );
    const repo = errorOf(404, { 'x-error-code': 'RepoNotFound' }, { path: 'a.bin', hasToken: true });
    assert.equal(repo.code, 'not_found');
    assert.match(repo.message, /^Repository acme\/model was not found on huggingface\.co: check the name; a dataset is named datasets/);
  });

  it("marks 5xx, 408 and 429 transient, with the server's Retry-After", () => {
    const busy = errorOf(429, { 'retry-after': '12' });
    assert.deepEqual([busy.code, busy.isTransient, busy.retryAfterMs], ['hub_error', true, 12_000]);
    assert.equal(errorOf(503, {}).isTransient, true);
    assert.equal(errorOf(400, {}).isTransient, false);
  });
});

describe('toRepoSnapshot', () => {
  it("reads the commit, sizes, LFS sha256 and git blob ids from the revision API's siblings", () => {
    const sha = 'a'.repeat(64);
    const snapshot = toRepoSnapshot(
      {
        sha: 'b'.repeat(40),
        siblings: [
          { rfilename: 'config.json', size: 15, blobId: 'c'.repeat(40) },
          { rfilename: 'w.bin', size: 99, blobId: 'd'.repeat(40), lfs: { sha256: sha, size: 99, pointerSize: 130 } },
          { rfilename: 'listed-only.txt' },
        ],
      },
      'acme/model@main',
    );
    assert.deepEqual(snapshot, {
      commit: 'b'.repeat(40),
      files: [
        { path: 'config.json', sizeBytes: 15, gitOid: 'c'.repeat(40) },
        { path: 'w.bin', sizeBytes: 99, sha256: sha },
        { path: 'listed-only.txt' },
      ],
    });
  });

  it('refuses a listing without siblings as bad_response', () => {
    assert.throws(() => toRepoSnapshot({ sha: 'x' }, 'acme/model@main'), { code: 'bad_response' });
    assert.throws(() => toRepoSnapshot({ siblings: [{ size: 1 }] }, 'acme/model@main'), { code: 'bad_response' });
  });
});

describe('header readers', () => {
  it('unquotes ETags, weak ones included', () => {
    assert.equal(normalizeEtag('W/"abc"'), 'abc');
    assert.equal(normalizeEtag('"abc"'), 'abc');
    assert.equal(normalizeEtag(undefined), undefined);
  });

  it('reads Content-Range, with an unknown total', () => {
    assert.deepEqual(parseContentRange('bytes 100-199/200'), { startBytes: 100, totalBytes: 200 });
    assert.deepEqual(parseContentRange('bytes 100-199/*'), { startBytes: 100 });
    assert.equal(parseContentRange('bytes */200'), undefined);
  });
});
