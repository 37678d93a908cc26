import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { createGpuSampler, nvidiaSmiArgs, parseNvidiaSmiLine, summarizeGpu, type SamplerChild } from './gpu-sampler.js';

class FakeChild extends EventEmitter implements SamplerChild {
  stdout = new PassThrough();
  killedWith: string | undefined;
  kill(signal?: NodeJS.Signals): boolean {
    this.killedWith = signal ?? 'SIGTERM';
    return true;
  }
}

describe('parseNvidiaSmiLine', () => {
  it('reads index, utilization and memory, and rejects other lines', () => {
    assert.deepEqual(parseNvidiaSmiLine('0, 87, 40123, 143771', 5), {
      atMs: 5,
      index: 0,
      utilizationPercent: 87,
      memoryUsedMiB: 40123,
      memoryTotalMiB: 143771,
    });
    assert.equal(parseNvidiaSmiLine('0, [N/A], 100, 200', 5), undefined);
    assert.equal(parseNvidiaSmiLine('', 5), undefined);
  });
});

describe('summarizeGpu', () => {
  it('averages utilization and takes peak memory per GPU within the window', () => {
    const samples = [
      { atMs: 0, index: 0, utilizationPercent: 0, memoryUsedMiB: 1 },
      { atMs: 10, index: 1, utilizationPercent: 50, memoryUsedMiB: 300, memoryTotalMiB: 1000 },
      { atMs: 10, index: 0, utilizationPercent: 40, memoryUsedMiB: 100 },
      { atMs: 20, index: 0, utilizationPercent: 61, memoryUsedMiB: 90 },
      { atMs: 99, index: 0, utilizationPercent: 100, memoryUsedMiB: 999 },
    ];
    assert.deepEqual(summarizeGpu(samples, { fromMs: 5, toMs: 50 }), [
      { index: 0, utilizationPercentMean: 50.5, utilizationPercentMax: 61, memoryUsedMiBMax: 100, samples: 2 },
      { index: 1, utilizationPercentMean: 50, utilizationPercentMax: 50, memoryUsedMiBMax: 300, memoryTotalMiB: 1000, samples: 1 },
    ]);
    assert.equal(summarizeGpu(samples, { fromMs: 200, toMs: 300 }), undefined);
  });
});

describe('createGpuSampler', () => {
  it('spawns nvidia-smi with a fixed query, collects lines split across chunks, and kills it on stop', async () => {
    const clock = new FakeClock();
    const child = new FakeChild();
    const calls: Array<[string, readonly string[]]> = [];
    const sampler = createGpuSampler(
      { intervalMs: 500 },
      {
        clock,
        spawn: (command, args) => {
          calls.push([command, args]);
          return child;
        },
      },
    );
    sampler.start();
    assert.deepEqual(calls, [['nvidia-smi', nvidiaSmiArgs(500)]]);
    assert.deepEqual(nvidiaSmiArgs(500), [
      '--query-gpu=index,utilization.gpu,memory.used,memory.total',
      '--format=csv,noheader,nounits',
      '-lms',
      '500',
    ]);
    child.stdout.write('0, 10, 100, 1000\n1, 2');
    await settle();
    clock.advance(500);
    child.stdout.write('0, 200, 1000\n');
    await settle();
    assert.deepEqual(
      sampler.samples().map((s) => [s.atMs, s.index, s.utilizationPercent]),
      [
        [0, 0, 10],
        [500, 1, 20],
      ],
    );
    assert.equal(sampler.isAvailable(), true);
    sampler.stop();
    assert.equal(child.killedWith, 'SIGTERM');
  });

  it('reports nvidia-smi as unavailable when it does not exist', () => {
    const clock = new FakeClock();
    const child = new FakeChild();
    const sampler = createGpuSampler({ intervalMs: 500 }, { clock, spawn: () => child });
    sampler.start();
    child.emit('error', Object.assign(new Error('spawn nvidia-smi ENOENT'), { code: 'ENOENT' }));
    assert.equal(sampler.isAvailable(), false);
    assert.equal(sampler.note(), 'nvidia-smi not found');
  });

  it('reports nvidia-smi as unavailable when it exits with an error before any sample', () => {
    const clock = new FakeClock();
    const child = new FakeChild();
    const sampler = createGpuSampler({ intervalMs: 500 }, { clock, spawn: () => child });
    sampler.start();
    child.emit('exit', 9);
    assert.equal(sampler.isAvailable(), false);
    assert.equal(sampler.note(), 'nvidia-smi exited with code 9');
  });
});
