import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError } from '../config/load.js';
import { parseServeArgs } from './main.js';

describe('parseServeArgs', () => {
  // parseServeArgs reads VOXMUX_* variables: run without the ones this process may have inherited.
  const saved: Record<string, string> = {};
  let dir = '';
  before(() => {
    for (const [key, value] of Object.entries(process.env)) {
      if (key.startsWith('VOXMUX_') && value !== undefined) {
        saved[key] = value;
        delete process.env[key];
      }
    }
    dir = mkdtempSync(join(tmpdir(), 'voxmux-main-'));
  });
  after(() => {
    Object.assign(process.env, saved);
    rmSync(dir, { recursive: true, force: true });
  });

  it('returns the defaults and printConfig false with no arguments', () => {
    const { config, printConfig } = parseServeArgs([]);
    assert.equal(printConfig, false);
    assert.equal(config.gateway.port, 8000);
    assert.equal(config.gateway.host, '127.0.0.1');
  });

  it('maps --port, --host and --log-level to their settings', () => {
    const { config } = parseServeArgs(['--port', '9123', '--host', '0.0.0.0', '--log-level', 'debug']);
    assert.equal(config.gateway.port, 9123);
    assert.equal(config.gateway.host, '0.0.0.0');
    assert.equal(config.telemetry.logLevel, 'debug');
  });

  it('applies every --set path=value, keeping any = after the first in the value', () => {
    const { config } = parseServeArgs([
      '--set',
      'scheduler.maxQueuedRequests=7',
      '--set',
      'supervisor.mps.enabled=1',
      '--set',
      'supervisor.pythonPath=/opt/py=3/bin/python',
    ]);
    assert.equal(config.scheduler.maxQueuedRequests, 7);
    assert.equal(config.supervisor.mps.enabled, true);
    assert.equal(config.supervisor.pythonPath, '/opt/py=3/bin/python');
  });

  it('lets --set override --port for the same path', () => {
    assert.equal(parseServeArgs(['--port', '1000', '--set', 'gateway.port=2000']).config.gateway.port, 2000);
  });

  it('sets printConfig with --print-config', () => {
    assert.equal(parseServeArgs(['--print-config']).printConfig, true);
  });

  it('rejects --set without a path=value pair', () => {
    for (const pair of ['gateway.port', '=8000']) {
      assert.throws(
        () => parseServeArgs(['--set', pair]),
        (err: unknown) =>
          err instanceof ConfigError && err.problems.length === 1 && err.problems[0] === `--set ${pair}: expected path=value`,
      );
    }
  });

  it('reports an unknown --set path and a bad --port value as ConfigErrors', () => {
    assert.throws(
      () => parseServeArgs(['--set', 'gateway.prot=1']),
      (err: unknown) => err instanceof ConfigError && /--gateway\.prot: unknown setting/.test(err.message),
    );
    assert.throws(
      () => parseServeArgs(['--port', 'http']),
      (err: unknown) => err instanceof ConfigError && /--gateway\.port: expected a number/.test(err.message),
    );
  });

  it('rejects an unknown option and a positional argument', () => {
    assert.throws(() => parseServeArgs(['--prot', '1']), { code: 'ERR_PARSE_ARGS_UNKNOWN_OPTION' });
    assert.throws(() => parseServeArgs(['extra']), { code: 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL' });
  });

  it('reads --config, with flags over the environment over the file', () => {
    const path = join(dir, 'voxmux.json');
    writeFileSync(path, JSON.stringify({ gateway: { port: 1111, host: '10.0.0.1' }, scheduler: { retryAfterMs: 3000 } }));
    process.env.VOXMUX_SCHEDULER_RETRY_AFTER_MS = '4000';
    process.env.VOXMUX_HOST = '10.0.0.2';
    try {
      const { config } = parseServeArgs(['--config', path, '--host', '10.0.0.3']);
      assert.equal(config.gateway.port, 1111);
      assert.equal(config.scheduler.retryAfterMs, 4000);
      assert.equal(config.gateway.host, '10.0.0.3');
    } finally {
      delete process.env.VOXMUX_SCHEDULER_RETRY_AFTER_MS;
      delete process.env.VOXMUX_HOST;
    }
  });

  it('reads the file named by VOXMUX_CONFIG when --config is absent', () => {
    const path = join(dir, 'from-env.json');
    writeFileSync(path, JSON.stringify({ gateway: { port: 2222 } }));
    process.env.VOXMUX_CONFIG = path;
    try {
      assert.equal(parseServeArgs([]).config.gateway.port, 2222);
    } finally {
      delete process.env.VOXMUX_CONFIG;
    }
  });
});
