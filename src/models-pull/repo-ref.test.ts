import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normalizeEndpoint, parseRepoRef, toResolveUrl, toRevisionApiUrl } from './repo-ref.js';

const codeOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
};

describe('parseRepoRef', () => {
  it('reads owner/name, an optional @revision, and the datasets/ prefix', () => {
    assert.deepEqual(parseRepoRef('nvidia/parakeet-tdt-0.6b-v2'), {
      repoType: 'model',
      repoId: 'nvidia/parakeet-tdt-0.6b-v2',
      revision: 'main',
    });
    assert.deepEqual(parseRepoRef('openai/whisper-large-v3-turbo@refs/pr/12'), {
      repoType: 'model',
      repoId: 'openai/whisper-large-v3-turbo',
      revision: 'refs/pr/12',
    });
    assert.deepEqual(parseRepoRef('datasets/rhasspy/piper-checkpoints@v1'), {
      repoType: 'dataset',
      repoId: 'rhasspy/piper-checkpoints',
      revision: 'v1',
    });
  });

  it('rejects ids the Hub does not allow, and an empty revision, as usage errors', () => {
    for (const text of [
      '',
      'a/b/c',
      '-owner/name',
      'owner/name.',
      'owner/na--me',
      'owner/na..me',
      'owner/name@',
      'owner/name@a b',
      'owner/ name',
    ]) {
      assert.equal(
        codeOf(() => parseRepoRef(text)),
        'usage',
        text,
      );
    }
  });
});

describe('Hub URLs', () => {
  const ref = parseRepoRef('openai/whisper-large-v3-turbo@refs/pr/12');

  it('encodes the revision as one path segment and each part of a file path', () => {
    assert.equal(
      toRevisionApiUrl('https://huggingface.co', ref).href,
      'https://huggingface.co/api/models/openai/whisper-large-v3-turbo/revision/refs%2Fpr%2F12?blobs=true',
    );
    assert.equal(
      toResolveUrl('https://hf-mirror.example/hub', ref, 'refs/pr/12', 'sub dir/a#b.json').href,
      'https://hf-mirror.example/hub/openai/whisper-large-v3-turbo/resolve/refs%2Fpr%2F12/sub%20dir/a%23b.json',
    );
  });

  it('puts datasets under /api/datasets and /datasets', () => {
    const dataset = parseRepoRef('datasets/rhasspy/piper-checkpoints');
    assert.equal(toRevisionApiUrl('https://huggingface.co', dataset).pathname, '/api/datasets/rhasspy/piper-checkpoints/revision/main');
    assert.equal(
      toResolveUrl('https://huggingface.co', dataset, 'main', 'a.ckpt').pathname,
      '/datasets/rhasspy/piper-checkpoints/resolve/main/a.ckpt',
    );
  });

  it('takes http and https endpoints without a trailing slash, and nothing else', () => {
    assert.equal(normalizeEndpoint('https://huggingface.co/'), 'https://huggingface.co');
    assert.equal(normalizeEndpoint('http://127.0.0.1:8080/hf/'), 'http://127.0.0.1:8080/hf');
    for (const text of ['ftp://example.com', 'huggingface.co', 'https://example.com/?x=1'])
      assert.equal(
        codeOf(() => normalizeEndpoint(text)),
        'usage',
      );
  });
});
