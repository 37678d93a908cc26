import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { findHostPath } from './host-path.js';

describe('findHostPath', () => {
  const root = mkdtempSync(join(tmpdir(), 'voxmux-host-path-'));
  mkdirSync(join(root, 'host', 'voxmux_host'), { recursive: true });
  mkdirSync(join(root, 'src', 'supervisor'), { recursive: true });
  mkdirSync(join(root, 'dist', 'src', 'supervisor'), { recursive: true });
  mkdirSync(join(root, '.bundle'), { recursive: true });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('finds host/ two levels above src/supervisor (three above dist/src/supervisor)', () => {
    assert.equal(findHostPath(join(root, 'src', 'supervisor')), join(root, 'host'));
    assert.equal(findHostPath(join(root, 'dist', 'src', 'supervisor')), join(root, 'host'));
  });

  it('finds host/ one level above the single-file bundle', () => {
    assert.equal(findHostPath(join(root, '.bundle')), join(root, 'host'));
  });

  it('falls back to the source layout when no ancestor holds host/voxmux_host', () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'voxmux-no-host-'));
    try {
      const moduleDir = join(elsewhere, 'a', 'b');
      assert.equal(findHostPath(moduleDir), join(elsewhere, 'host'));
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });
});
