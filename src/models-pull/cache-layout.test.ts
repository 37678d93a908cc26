import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isSafeRepoPath, resolveModelsDir, toLocalPath, toSnapshotDir } from './cache-layout.js';

describe('resolveModelsDir', () => {
  it('prefers --dir, then VOXMUX_MODELS_DIR, then ~/.cache/voxmux/models; relative paths from the working directory', () => {
    assert.equal(resolveModelsDir({ dir: 'm', envDir: '/env', homeDir: '/home/u', cwd: '/work' }), '/work/m');
    assert.equal(resolveModelsDir({ envDir: '/env', homeDir: '/home/u', cwd: '/work' }), '/env');
    assert.equal(resolveModelsDir({ envDir: '', homeDir: '/home/u', cwd: '/work' }), '/home/u/.cache/voxmux/models');
  });
});

describe('toSnapshotDir and toLocalPath', () => {
  it('lays a repository out as <owner>/<name>/<commit>/<path>, datasets under datasets/', () => {
    const snapshot = toSnapshotDir('/m', { repoType: 'model', repoId: 'nvidia/parakeet-tdt-0.6b-v2' }, 'abc123');
    assert.equal(snapshot, '/m/nvidia/parakeet-tdt-0.6b-v2/abc123');
    assert.equal(toLocalPath(snapshot, 'en/a.onnx'), '/m/nvidia/parakeet-tdt-0.6b-v2/abc123/en/a.onnx');
    assert.equal(toSnapshotDir('/m', { repoType: 'dataset', repoId: 'a/b' }, 'refs/pr/1'), '/m/datasets/a/b/refs%2Fpr%2F1');
  });

  it('refuses paths from the Hub that would leave the snapshot folder', () => {
    for (const path of ['../x', 'a/../../x', '/etc/passwd', 'a//b', './a', 'a\\b', '']) {
      assert.equal(isSafeRepoPath(path), false, path);
    }
    assert.throws(() => toLocalPath('/m/s', '../../x'), { code: 'bad_response' });
    assert.equal(isSafeRepoPath('.gitattributes'), true);
  });
});
