import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { globToRegExp, selectFiles } from './file-selection.js';

const FILES = [
  'config.json',
  'model.safetensors',
  'onnx/model.onnx',
  'en/en_US/lessac/medium/en_US-lessac-medium.onnx',
  'en/en_US/lessac/low/en_US-lessac-low.onnx',
  'en/en_GB/alan/medium/en_GB-alan-medium.onnx',
].map((path) => ({ path }));

const paths = (selection: { files?: string[]; include?: string[]; exclude?: string[] }) =>
  selectFiles(FILES, { files: selection.files ?? [], include: selection.include ?? [], exclude: selection.exclude ?? [] }).selected.map(
    (f) => f.path,
  );

describe('globToRegExp (fnmatchcase, as huggingface_hub matches allow and ignore patterns)', () => {
  it("lets '*' cross folders, '?' match one character, and matches whole paths case-sensitively", () => {
    assert.equal(globToRegExp('*.onnx').test('en/en_US/a/medium/x.onnx'), true);
    assert.equal(globToRegExp('model.?nnx').test('model.onnx'), true);
    assert.equal(globToRegExp('*.json').test('config.json.bak'), false);
    assert.equal(globToRegExp('*.JSON').test('config.json'), false);
    assert.equal(globToRegExp('model.safetensors').test('modelXsafetensors'), false);
  });

  it('reads [seq] and [!seq] classes, and a lone [ as itself', () => {
    assert.equal(globToRegExp('model-0000[1-2].bin').test('model-00002.bin'), true);
    assert.equal(globToRegExp('model-0000[!1].bin').test('model-00001.bin'), false);
    assert.equal(globToRegExp('a[b').test('a[b'), true);
  });

  it('takes a pattern ending in / as everything under that folder', () => {
    assert.equal(globToRegExp('onnx/').test('onnx/model.onnx'), true);
  });
});

describe('selectFiles', () => {
  it('selects every file when nothing is named', () => {
    assert.equal(paths({}).length, FILES.length);
  });

  it('unions --file and --include, drops --exclude matches, and keeps the repository order', () => {
    assert.deepEqual(paths({ include: ['en/en_US/*/medium/*'] }), ['en/en_US/lessac/medium/en_US-lessac-medium.onnx']);
    assert.deepEqual(paths({ files: ['config.json'], include: ['*.onnx'], exclude: ['en/*'] }), ['config.json', 'onnx/model.onnx']);
  });

  it('keeps a named file even when an --exclude pattern matches it, and reports named files that are missing', () => {
    const result = selectFiles(FILES, { files: ['config.json', 'tokenizer.json'], include: [], exclude: ['*.json'] });
    assert.deepEqual(
      result.selected.map((f) => f.path),
      ['config.json'],
    );
    assert.deepEqual(result.missing, ['tokenizer.json']);
  });
});
