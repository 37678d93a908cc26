/**
 * bench/gpu/call-configs.mjs: both sides of the voice-call benchmark are valid server configs that
 * hold calls (a transcription and a speech model for realtime, the fake LLM's port allowed), and
 * differ in batching, graphs, speech instances and resident voices.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';

const SCRIPT = fileURLToPath(new URL('../../bench/gpu/call-configs.mjs', import.meta.url));

describe('voice-call benchmark configs (#19)', () => {
  it('are valid configs that answer calls with the GPU engines and the fake LLM', async () => {
    const bench = (await import(SCRIPT)) as Record<string, unknown>;
    const configs = bench.CONFIGS as Record<string, object>;
    const llmPort = bench.FAKE_LLM_PORT as number;
    assert.deepEqual(Object.keys(configs), ['call-a-naive', 'call-b-voxmux']);
    const loaded = Object.fromEntries(Object.entries(configs).map(([name, file]) => [name, loadConfig({ file, filePath: name })]));
    for (const config of Object.values(loaded)) {
      assert.deepEqual([config.realtime.transcriptionModel, config.realtime.speechModel], ['parakeet', 'vits-call']);
      assert.equal(config.realtime.llm.baseUrl, `http://127.0.0.1:${llmPort}/v1`);
      assert.equal(config.models['voxmux-speech-cpu']!.adapter, 'debian-voices', 'the callers are voiced on the CPU');
    }
    const [naive, voxmux] = [loaded['call-a-naive']!, loaded['call-b-voxmux']!];
    assert.deepEqual(
      [naive.models.parakeet!.maxBatchSize, naive.models['vits-call']!.instances, naive.models['vits-call']!.maxStreamsPerInstance],
      [1, 1, 1],
    );
    assert.deepEqual(
      [voxmux.models.parakeet!.maxBatchSize, voxmux.models.parakeet!.options.cudaGraphs, voxmux.models['vits-call']!.instances],
      [32, true, 4],
    );
  });

  it('leave the Debian voices out when the callers’ speech is saved elsewhere (CALL_BENCH_UTTERANCES)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-call-bench-'));
    execFileSync(process.execPath, [SCRIPT, dir, '/opt/host'], { env: { ...process.env, CALL_BENCH_UTTERANCES: '/tmp/callers' } });
    for (const name of ['call-a-naive', 'call-b-voxmux']) {
      const config = loadConfig({ file: JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8')) as object, filePath: name });
      assert.deepEqual(Object.keys(config.models).sort(), ['parakeet', 'vits-call']);
    }
  });

  it('writes one file per side', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxmux-call-bench-'));
    execFileSync(process.execPath, [SCRIPT, dir, '/opt/host']);
    assert.deepEqual(readdirSync(dir).sort(), ['call-a-naive.json', 'call-b-voxmux.json']);
  });
});
