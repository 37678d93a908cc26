import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger, resolveLogFormat, type LogFormat } from './logger.js';

function capture(format: LogFormat, isTTY: boolean): { text: () => string; log: ReturnType<typeof createLogger> } {
  let text = '';
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { log: createLogger({ level: 'info', format, isTTY, destination }), text: () => text };
}

describe('resolveLogFormat (#16)', () => {
  it('picks pretty for auto on a terminal and JSON otherwise; json and pretty are taken as they are', () => {
    assert.equal(resolveLogFormat('auto', true), 'pretty');
    assert.equal(resolveLogFormat('auto', false), 'json');
    for (const isTTY of [true, false]) {
      assert.equal(resolveLogFormat('json', isTTY), 'json');
      assert.equal(resolveLogFormat('pretty', isTTY), 'pretty');
    }
  });
});

describe('createLogger formats (#16)', () => {
  it('writes one JSON object a line for json, and for auto off a terminal', () => {
    for (const format of ['json', 'auto'] as const) {
      const { log, text } = capture(format, false);
      log.info({ url: 'http://127.0.0.1:1' }, 'voxmux ready');
      const line = JSON.parse(text().trim()) as Record<string, unknown>;
      assert.deepEqual([line.level, line.msg, line.url, line.service], [30, 'voxmux ready', 'http://127.0.0.1:1', 'voxmux']);
    }
  });

  it('writes a human line with the level, message and fields for pretty, and for auto on a terminal', () => {
    for (const [format, isTTY] of [
      ['pretty', false],
      ['auto', true],
    ] as const) {
      const { log, text } = capture(format, isTTY);
      log.info({ url: 'http://127.0.0.1:1' }, 'voxmux ready');
      // Colours only on a terminal: strip them to read the words.
      // eslint-disable-next-line no-control-regex
      const plain = text().replace(/\u001b\[[0-9;]*m/g, '');
      assert.match(plain, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO.*: voxmux ready \{"url":"http:\/\/127\.0\.0\.1:1"\}\n$/);
      assert.throws(() => JSON.parse(plain) as unknown);
      assert.equal(text() !== plain, isTTY, 'coloured exactly on a terminal');
    }
  });

  it('keeps the authorization header redacted in pretty lines', () => {
    const { log, text } = capture('pretty', false);
    log.info({ headers: { authorization: 'Bearer secret-key' } }, 'call');
    assert.doesNotMatch(text(), /secret-key/);
    assert.match(text(), /\[redacted\]/);
  });
});
