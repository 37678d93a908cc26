/**
 * bench/gpu/whisper-configs.mjs: both sides of the Whisper benchmark are valid server configs, differ only in
 * batching and graphs, share the token budget, and write one file each.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';

const SCRIPT = fileURLToPath(new URL('../../bench/gpu/whisper-configs.mjs', import.meta.url));

type BenchConfigs = Record<string, { models: { whisper: { maxBatchSize: number; options: Record<string, unknown> } } }>;

/** The sides of the benchmark, in the order the script declares them. */
const SIDES = [
  'whisper-a-naive',
  'whisper-b-engine',
  'whisper-b0-one-batch',
  'whisper-b2-group-join',
  'whisper-b3-overlap',
  'whisper-b4-group-overlap',
  'whisper-b5-compiled-fp8',
  'whisper-b6-many-batches',
  'whisper-b7-two-instances',
  'whisper-b8-pieces',
  'whisper-b9-pieces-compiled',
  'whisper-b10-one-pieces-compiled',
  'whisper-b11-one-pieces-overlap',
  'whisper-b12-one-pieces-ahead',
  'whisper-b13-one-pieces-window',
  'whisper-b14-pieces-window',
  'whisper-b15-pieces-window-fp8',
  'whisper-b17-pieces-rules',
  'whisper-b18-pieces-overlap',
  'whisper-b19-pieces-rules-overlap',
  'whisper-b20-three-rules-overlap',
  'whisper-b21-pieces-warm',
  'whisper-b22-pieces-spans',
  'whisper-b23-warm-spans',
  'whisper-b24-efficient-prefill',
];

describe('whisper benchmark configs', () => {
  it('are valid configs of the whisper adapter with the same token budget', async () => {
    const bench = (await import(SCRIPT)) as Record<string, unknown>;
    const configs = bench.CONFIGS as BenchConfigs;
    const tokensPerAudioSecond = bench.TOKENS_PER_AUDIO_SECOND as number;
    assert.deepEqual(Object.keys(configs), SIDES);
    // Every side from b8 on cuts the clips into pieces.
    const cut = new Set(SIDES.slice(SIDES.indexOf('whisper-b8-pieces')));
    for (const [name, file] of Object.entries(configs)) {
      const config = loadConfig({ file, filePath: name });
      const model = config.models.whisper!;
      assert.equal(model.adapter, 'whisper');
      if (cut.has(name)) {
        // Two pieces of at most 30 s, one window each, in the only length bucket.
        assert.deepEqual([config.gateway.splitAboveMs, config.gateway.pieceTargetMs], [30_000, 22_500], name);
        assert.deepEqual(config.scheduler.lengthBucketsMs, [30_000], name);
      } else {
        assert.equal(config.gateway.splitAboveMs, 0, 'the engine reads 45 s clips as two 30 s windows');
      }
      assert.equal(model.options.maxTokensPerAudioSecond, tokensPerAudioSecond);
      assert.equal(model.options.config, 'large-v3-turbo');
    }
    const naive = configs['whisper-a-naive']!.models.whisper;
    const engine = configs['whisper-b-engine']!.models.whisper;
    assert.deepEqual([naive.maxBatchSize, naive.options.cudaGraphs, naive.options.batchSizes], [1, false, [1]]);
    assert.deepEqual([engine.maxBatchSize, engine.options.cudaGraphs], [64, true]);
    // The engine takes host batches while one decodes (they join it); the naive server and the
    // engine's baseline one at a time, which differs from the engine in nothing else.
    const running = (name: string) => loadConfig({ file: configs[name]!, filePath: name }).scheduler.maxRunningBatchesPerInstance;
    assert.deepEqual([running('whisper-a-naive'), running('whisper-b-engine'), running('whisper-b0-one-batch')], [1, 4, 1]);
    const { scheduler: s0, ...baseline } = configs['whisper-b0-one-batch'] as unknown as Record<string, unknown> & { scheduler: object };
    const { scheduler: s1, ...candidate } = configs['whisper-b-engine'] as unknown as Record<string, unknown> & { scheduler: object };
    assert.deepEqual(baseline, candidate);
    assert.deepEqual({ ...s0, maxRunningBatchesPerInstance: 4 }, s1);
    // The engine's variants differ from it in their own options only.
    const variantOptions = (name: string) => {
      const whisper = configs[name]!.models.whisper;
      const base = configs['whisper-b-engine']!.models.whisper.options;
      const own = Object.fromEntries(Object.entries(whisper.options).filter(([key]) => !(key in base)));
      const rest = Object.fromEntries(Object.entries(whisper.options).filter(([key]) => key in base));
      assert.deepEqual({ ...configs[name], models: { whisper: { ...whisper, options: rest } } }, configs['whisper-b-engine'], name);
      return own;
    };
    assert.deepEqual(variantOptions('whisper-b2-group-join'), { joinMinWindows: 8, joinMaxWaitMs: 50 });
    assert.deepEqual(variantOptions('whisper-b3-overlap'), { overlapEncoder: true });
    assert.deepEqual(variantOptions('whisper-b4-group-overlap'), { joinMinWindows: 8, joinMaxWaitMs: 50, overlapEncoder: true });
    assert.deepEqual(variantOptions('whisper-b5-compiled-fp8'), { compileEncoder: true, matmul: 'fp8' });
    // b6: b2's joins with 16 host batches in flight.
    const { scheduler: s6, ...many } = configs['whisper-b6-many-batches'] as unknown as Record<string, unknown> & { scheduler: object };
    const { scheduler: s2, ...grouped } = configs['whisper-b2-group-join'] as unknown as Record<string, unknown> & { scheduler: object };
    assert.deepEqual(many, grouped);
    assert.deepEqual({ ...s2, maxRunningBatchesPerInstance: 16 }, s6);
    // b7: b6 on two instances under MPS; b8: b7 with the clips cut; b9: b8 with the encoder compiled.
    type Side = { gateway: object; scheduler: object; supervisor: { mps: { enabled: boolean } }; models: { whisper: object } };
    const side = (name: string) => configs[name] as unknown as Side;
    const b6 = side('whisper-b6-many-batches');
    const b7 = side('whisper-b7-two-instances');
    assert.deepEqual(b7, {
      ...b6,
      supervisor: { ...b6.supervisor, mps: { enabled: true } },
      models: { whisper: { ...b6.models.whisper, instances: 2 } },
    });
    const b8 = side('whisper-b8-pieces');
    assert.deepEqual(b8, {
      ...b7,
      gateway: { ...b7.gateway, splitAboveMs: 30_000, pieceTargetMs: 22_500 },
      scheduler: { ...b7.scheduler, lengthBucketsMs: [30_000] },
    });
    // The sides below are another side with some of the engine's options changed.
    type WhisperModelConfig = { options: Record<string, unknown> };
    const withOptions = (base: string, options: Record<string, unknown>) => {
      const whisper = side(base).models.whisper as WhisperModelConfig;
      return { ...side(base), models: { whisper: { ...whisper, options: { ...whisper.options, ...options } } } };
    };
    assert.deepEqual(configs['whisper-b9-pieces-compiled'], withOptions('whisper-b8-pieces', { compileEncoder: true }));
    // b10: b9 on one instance, without MPS.
    const b9 = side('whisper-b9-pieces-compiled');
    assert.deepEqual(configs['whisper-b10-one-pieces-compiled'], {
      ...b9,
      supervisor: { ...b9.supervisor, mps: { enabled: false } },
      models: { whisper: { ...b9.models.whisper, instances: 1 } },
    });
    const expected: [string, string, Record<string, unknown>][] = [
      // b11: b10 with the encoder calls beside the decode steps.
      ['whisper-b11-one-pieces-overlap', 'whisper-b10-one-pieces-compiled', { overlapEncoder: true }],
      // b12: b10 with each step launched before the last one's tokens are read.
      ['whisper-b12-one-pieces-ahead', 'whisper-b10-one-pieces-compiled', { stepAhead: true }],
      // b13: b10 with each piece's language detected on its own window.
      ['whisper-b13-one-pieces-window', 'whisper-b10-one-pieces-compiled', { languageDetection: 'window' }],
      // b14: b9 (two instances) with each piece's language detected on its own window.
      ['whisper-b14-pieces-window', 'whisper-b9-pieces-compiled', { languageDetection: 'window' }],
      // b15: b14 with the encoder's products in FP8.
      ['whisper-b15-pieces-window-fp8', 'whisper-b14-pieces-window', { matmul: 'fp8' }],
      // b17: b14 with the step's logit rules compiled.
      ['whisper-b17-pieces-rules', 'whisper-b14-pieces-window', { compileRules: true }],
      // b18: b14 with each join's encoder call beside the decode steps.
      ['whisper-b18-pieces-overlap', 'whisper-b14-pieces-window', { overlapEncoder: true }],
      // b19: b14 with both.
      ['whisper-b19-pieces-rules-overlap', 'whisper-b14-pieces-window', { compileRules: true, overlapEncoder: true }],
      // b21: b19 with every join's shape met before serving.
      ['whisper-b21-pieces-warm', 'whisper-b19-pieces-rules-overlap', { warmShapes: true }],
      // b22: b19 with the step also captured over the cache's first 128 positions.
      ['whisper-b22-pieces-spans', 'whisper-b19-pieces-rules-overlap', { stepCacheSpans: [128] }],
      // b23: b21 with b22's spans.
      ['whisper-b23-warm-spans', 'whisper-b21-pieces-warm', { stepCacheSpans: [128] }],
      // b24: b23 with the join's eager decoder calls held to the memory-efficient attention kernel.
      ['whisper-b24-efficient-prefill', 'whisper-b23-warm-spans', { prefillAttention: 'efficient' }],
    ];
    for (const [name, base, options] of expected) assert.deepEqual(configs[name], withOptions(base, options), name);
    // b20: b19 on three instances.
    const b19 = side('whisper-b19-pieces-rules-overlap');
    assert.deepEqual(configs['whisper-b20-three-rules-overlap'], { ...b19, models: { whisper: { ...b19.models.whisper, instances: 3 } } });
  });

  it('writes one file per side', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-whisper-bench-'));
    execFileSync(process.execPath, [SCRIPT, dir, '/opt/host']);
    assert.deepEqual(readdirSync(dir).sort(), SIDES.map((name) => `${name}.json`).sort());
  });
});
