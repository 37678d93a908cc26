import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../config/load.js';
import { findAdapterProfile, suggestModelConfig, type AdapterProfile } from './adapter-profiles.js';

const SNAPSHOT = '/m/owner/name/abc';
const pulled = (repoId: string, paths: string[]) => ({
  ref: { repoId },
  snapshotDir: SNAPSHOT,
  files: paths.map((p) => ({ repoPath: p, localPath: `${SNAPSHOT}/${p}` })),
});
const profileOf = (repoId: string): AdapterProfile => findAdapterProfile({ repoId })!;

describe('findAdapterProfile', () => {
  it('knows the repositories the adapters load, by the name part of their id', () => {
    const adapters = [
      'nvidia/parakeet-tdt-0.6b-v2',
      'openai/whisper-large-v3-turbo',
      'openai/whisper-tiny',
      'nvidia/diar_streaming_sortformer_4spk-v2',
      'rhasspy/piper-voices',
      'nvidia/parakeet-ctc-1.1b',
      'nvidia/diar_sortformer_4spk-v1',
      'acme/model',
      'whisper-fans/llama-3',
    ].map((repoId) => findAdapterProfile({ repoId })?.adapter);
    assert.deepEqual(adapters, ['parakeet', 'whisper', 'whisper', 'sortformer', 'vits', undefined, undefined, undefined, undefined]);
  });

  it("chooses the whisper adapter's files, not the repository's other weight formats", () => {
    const include = profileOf('openai/whisper-large-v3').defaultInclude;
    assert.ok(include.includes('model.safetensors') && include.includes('tokenizer.json'));
    assert.ok(!include.some((g) => g.includes('pytorch_model') || g.includes('flax') || g === '*'));
  });
});

describe('suggestModelConfig', () => {
  it("points each adapter's option at the pulled files", () => {
    assert.deepEqual(
      suggestModelConfig(profileOf('nvidia/parakeet-tdt-0.6b-v2'), pulled('nvidia/parakeet-tdt-0.6b-v2', ['p.nemo'])).models,
      {
        'parakeet-tdt-0.6b-v2': { adapter: 'parakeet', options: { nemoPath: `${SNAPSHOT}/p.nemo` } },
      },
    );
    const sortformer = suggestModelConfig(
      profileOf('nvidia/diar_streaming_sortformer_4spk-v2'),
      pulled('nvidia/diar_streaming_sortformer_4spk-v2', ['s.nemo']),
    );
    assert.deepEqual(sortformer.models?.['diar_streaming_sortformer_4spk-v2']?.options, { checkpoint: `${SNAPSHOT}/s.nemo` });
    const whisper = suggestModelConfig(
      profileOf('openai/whisper-large-v3-turbo'),
      pulled('openai/whisper-large-v3-turbo', ['config.json', 'model.safetensors', 'tokenizer.json']),
    );
    assert.deepEqual(whisper.models?.['whisper-large-v3-turbo']?.options, { checkpointPath: SNAPSHOT });
    const voices = suggestModelConfig(
      profileOf('acme/piper-checkpoints'),
      pulled('acme/piper-checkpoints', ['en/a/a.ckpt', 'en/a/a.json']),
    );
    assert.deepEqual(voices.models?.['piper-checkpoints']?.options, { voicesDir: `${SNAPSHOT}/en/a` });
  });

  it('gives a note instead of an entry where the files are not what the adapter loads', () => {
    assert.match(
      suggestModelConfig(profileOf('openai/whisper-tiny'), pulled('openai/whisper-tiny', ['config.json'])).note!,
      /model\.safetensors/,
    );
    assert.match(suggestModelConfig(profileOf('rhasspy/piper-voices'), pulled('rhasspy/piper-voices', ['en/a.onnx'])).note!, /ONNX/);
    assert.match(
      suggestModelConfig(profileOf('acme/piper-checkpoints'), pulled('acme/piper-checkpoints', ['a/a.ckpt', 'b/b.ckpt'])).note!,
      /2 folders/,
    );
  });

  it('makes entries that the config loader accepts', () => {
    const models = {
      ...suggestModelConfig(profileOf('nvidia/parakeet-tdt-0.6b-v2'), pulled('nvidia/parakeet-tdt-0.6b-v2', ['p.nemo'])).models,
      ...suggestModelConfig(
        profileOf('openai/whisper-large-v3-turbo'),
        pulled('openai/whisper-large-v3-turbo', ['config.json', 'model.safetensors']),
      ).models,
      ...suggestModelConfig(
        profileOf('nvidia/diar_streaming_sortformer_4spk-v2'),
        pulled('nvidia/diar_streaming_sortformer_4spk-v2', ['s.nemo']),
      ).models,
      ...suggestModelConfig(profileOf('acme/piper-checkpoints'), pulled('acme/piper-checkpoints', ['v/v.ckpt'])).models,
    };
    const config = loadConfig({ file: { models } });
    assert.deepEqual(Object.keys(config.models).sort(), [
      'diar_streaming_sortformer_4spk-v2',
      'parakeet-tdt-0.6b-v2',
      'piper-checkpoints',
      'whisper-large-v3-turbo',
    ]);
  });
});
