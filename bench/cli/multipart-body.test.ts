import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildMultipartBody } from './multipart-body.js';

describe('buildMultipartBody', () => {
  it('encodes a file and text fields that a multipart parser reads back unchanged', async () => {
    const bytes = Uint8Array.from({ length: 4000 }, (_, i) => (i * 7) % 256);
    const { contentType, body } = buildMultipartBody({ field: 'file', fileName: 'clip "one".wav', contentType: 'audio/wav', bytes }, [
      ['model', 'parakeet'],
      ['language', 'en'],
      ['prompt', 'café\r\n--not-a-boundary'],
    ]);
    const form = await new Request('http://localhost/', { method: 'POST', body, headers: { 'content-type': contentType } }).formData();
    const file = form.get('file');
    assert.ok(file instanceof Blob);
    assert.deepEqual(new Uint8Array(await file.arrayBuffer()), bytes);
    assert.equal(file.type, 'audio/wav');
    assert.equal(form.get('model'), 'parakeet');
    assert.equal(form.get('language'), 'en');
    assert.equal(form.get('prompt'), 'café\r\n--not-a-boundary');
  });

  it('draws a new boundary for every body', () => {
    const file = { field: 'file', fileName: 'a.wav', contentType: 'audio/wav', bytes: new Uint8Array(4) };
    assert.notEqual(buildMultipartBody(file, []).contentType, buildMultipartBody(file, []).contentType);
  });
});
