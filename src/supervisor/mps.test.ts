import assert from 'node:assert/strict';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createLogger } from '../telemetry/logger.js';
import { createMpsController } from './mps.js';
import type { CommandResult, SpawnRequest } from './spawn.js';

type Call = SpawnRequest & { input?: string; timeoutMs: number };

function fakeRun(results: CommandResult[]) {
  const calls: Call[] = [];
  return {
    calls,
    runCommand: async (request: Call) => {
      calls.push(request);
      return results.shift() ?? { exitCode: 0, stdout: '', stderr: '' };
    },
  };
}

const log = createLogger({ level: 'silent' });

describe('MPS controller', () => {
  it('starts the daemon with private pipe and log folders and gives instances the same ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-mps-test-'));
    const fake = fakeRun([]);
    const mps = createMpsController(
      { controlPath: 'mps-control', directory: dir },
      { runCommand: fake.runCommand, baseEnv: { PATH: '/bin' }, log },
    );
    await mps.start();
    assert.equal(fake.calls[0]!.command, 'mps-control');
    assert.deepEqual(fake.calls[0]!.args, ['-d']);
    assert.equal(fake.calls[0]!.env.CUDA_MPS_PIPE_DIRECTORY, join(dir, 'pipe'));
    assert.equal(fake.calls[0]!.env.CUDA_MPS_LOG_DIRECTORY, join(dir, 'log'));
    assert.ok(existsSync(join(dir, 'pipe')) && existsSync(join(dir, 'log')));
    assert.deepEqual(mps.instanceEnv(), { CUDA_MPS_PIPE_DIRECTORY: join(dir, 'pipe'), CUDA_MPS_LOG_DIRECTORY: join(dir, 'log') });
    await mps.stop();
    assert.equal(fake.calls[1]!.input, 'quit\n');
    assert.equal(fake.calls[1]!.env.CUDA_MPS_PIPE_DIRECTORY, join(dir, 'pipe'));
    await mps.stop();
    assert.equal(fake.calls.length, 2, 'a second stop sends nothing');
  });

  it("starts the daemon without the environment's CUDA_VISIBLE_DEVICES, so that instances' GPU indices are not remapped", async () => {
    // The daemon renumbers the GPUs its CUDA_VISIBLE_DEVICES lists from 0, and its clients'
    // CUDA_VISIBLE_DEVICES is read in that numbering: an instance pinned to GPU 2 (nvidia-smi's
    // index) under a daemon started with "2,3" would ask for the daemon's third GPU, which it lacks.
    const fake = fakeRun([]);
    const mps = createMpsController(
      { controlPath: 'mps-control', directory: mkdtempSync(join(tmpdir(), 'voxmux-mps-test-')) },
      { runCommand: fake.runCommand, baseEnv: { PATH: '/bin', CUDA_VISIBLE_DEVICES: '2,3' }, log },
    );
    await mps.start();
    assert.equal(fake.calls[0]!.env.CUDA_VISIBLE_DEVICES, undefined);
    assert.equal(fake.calls[0]!.env.PATH, '/bin');
    await mps.stop();
  });

  it('fails start with the daemon output when it cannot start, and then stops nothing', async () => {
    const fake = fakeRun([{ exitCode: 1, stdout: '', stderr: 'An instance of this daemon is already running\n' }]);
    const mps = createMpsController({ controlPath: 'mps-control', directory: '' }, { runCommand: fake.runCommand, baseEnv: {}, log });
    await assert.rejects(mps.start(), /MPS control daemon failed to start \(exit 1\): An instance of this daemon is already running/);
    await mps.stop();
    assert.equal(fake.calls.length, 1);
  });
});
