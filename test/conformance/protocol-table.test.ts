import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { describeTable, PYTHON_MESSAGES_PATH, renderPythonMessages } from '../../scripts/gen-protocol.js';

const HOST_DIR = fileURLToPath(new URL('../../host', import.meta.url));

describe('the message table, in TypeScript and Python', () => {
  it('keeps host/voxmux_host/messages.py current (run npm run docs)', () => {
    assert.equal(readFileSync(PYTHON_MESSAGES_PATH, 'utf8'), renderPythonMessages());
  });

  it('declares the same messages, tags, directions, body layouts and fields on both sides', () => {
    // /usr/bin/python3: the first python3 on PATH may not be the one the host runs on.
    const out = execFileSync(
      '/usr/bin/python3',
      ['-c', 'import json; from voxmux_host.protocol import describe_messages; print(json.dumps(describe_messages()))'],
      { env: { PYTHONPATH: HOST_DIR, PATH: '/usr/bin:/bin' }, encoding: 'utf8' },
    );
    assert.deepEqual(JSON.parse(out), JSON.parse(JSON.stringify(describeTable())));
  });
});
