import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ERROR_CATALOG, WIRE_ERROR_CODES } from '../../src/core/error-catalog.js';
import { ERROR_KINDS } from '../../src/core/errors.js';
import { HTTP_STATUS, OPENAI_TYPE, WS_CLOSE_CODE } from '../../src/gateway/index.js';
import { renderConfigDoc, renderErrorsDoc, renderMetricsDoc } from '../../src/app/reference-docs.js';

const doc = (name: string) => readFileSync(new URL(`../../docs/${name}`, import.meta.url), 'utf8');

describe('catalogues and their docs', () => {
  it('maps every error kind to HTTP, WebSocket and OpenAI', () => {
    for (const kind of ERROR_KINDS) {
      assert.ok(HTTP_STATUS[kind] !== undefined, kind);
      assert.ok(WS_CLOSE_CODE[kind] !== undefined, kind);
      assert.ok(OPENAI_TYPE[kind] !== undefined, kind);
    }
  });

  it('documents every error code, and documents no code that does not exist', () => {
    const text = doc('errors.md');
    const documented = [...text.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    assert.deepEqual([...documented].sort(), Object.keys(ERROR_CATALOG).sort());
  });

  it('keeps docs/config.md, docs/errors.md and docs/metrics.md current (run npm run docs)', async () => {
    assert.equal(doc('config.md'), renderConfigDoc());
    assert.equal(doc('errors.md'), renderErrorsDoc());
    assert.equal(doc('metrics.md'), await renderMetricsDoc());
  });

  it('has the same wire error codes in TypeScript and Python', () => {
    const out = execFileSync(
      '/usr/bin/python3',
      ['-c', 'import json; from voxmux_host.messages import WIRE_ERROR_CODE_VALUES as c; print(json.dumps(list(c)))'],
      {
        env: { PYTHONPATH: fileURLToPath(new URL('../../host', import.meta.url)), PATH: '/usr/bin:/bin' },
        encoding: 'utf8',
      },
    );
    assert.deepEqual(JSON.parse(out), [...WIRE_ERROR_CODES]);
  });
});
