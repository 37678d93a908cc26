/**
 * Repositories that a voxmux adapter loads, recognised by name: which of their files the adapter
 * reads (pulled when the command names none) and the config entry that points the adapter's
 * options at them (docs/adapters.md lists the options).
 */
import { dirname } from 'node:path';
import type { RepoRef } from './repo-ref.js';

export type KnownAdapter = 'parakeet' | 'whisper' | 'sortformer' | 'vits';

export interface AdapterProfile {
  adapter: KnownAdapter;
  /** --include globs of the files the adapter reads; empty where the repository gives no such default. */
  defaultInclude: readonly string[];
  /** Where pulling the whole repository is almost never what is wanted: what to choose instead. */
  selectionHint?: string;
}

// What the whisper adapter reads from a Hugging Face folder (host/voxmux_host/models/whisper/
// checkpoints.py, tokenizer.py), and the small files that make the folder a whole checkpoint for
// other tools too. Repositories such as openai/whisper-large-v3 also hold the same weights as
// PyTorch, Flax and fp32 files, several GB each, which the adapter does not read.
const WHISPER_FILES = [
  'config.json',
  'model.safetensors',
  'model.safetensors.index.json',
  'model-*-of-*.safetensors',
  'tokenizer.json',
  'tokenizer_config.json',
  'vocab.json',
  'merges.txt',
  'added_tokens.json',
  'special_tokens_map.json',
  'normalizer.json',
  'generation_config.json',
  'preprocessor_config.json',
];

const PROFILES: ReadonlyArray<{ pattern: RegExp; profile: AdapterProfile }> = [
  { pattern: /parakeet-tdt/i, profile: { adapter: 'parakeet', defaultInclude: ['*.nemo'] } },
  { pattern: /streaming[_-]sortformer/i, profile: { adapter: 'sortformer', defaultInclude: ['*.nemo'] } },
  { pattern: /whisper/i, profile: { adapter: 'whisper', defaultInclude: WHISPER_FILES } },
  {
    pattern: /piper/i,
    profile: {
      adapter: 'vits',
      defaultInclude: [],
      selectionHint: "Piper repositories hold hundreds of voices: choose some with --include, such as --include 'en/en_US/lessac/medium/*'",
    },
  },
];

/** The adapter that loads this repository, judged by its name (`owner/name`: the name part). */
export function findAdapterProfile(ref: Pick<RepoRef, 'repoId'>): AdapterProfile | undefined {
  const name = ref.repoId.split('/').at(-1)!;
  return PROFILES.find(({ pattern }) => pattern.test(name))?.profile;
}

export interface ModelEntry {
  adapter: KnownAdapter;
  options: Record<string, string>;
}

export interface ConfigSuggestion {
  /** `models` entries of a config file (the model named after the repository), where the files make one. */
  models?: Record<string, ModelEntry>;
  /** Why there is no entry, or what else to know about it. */
  note?: string;
}

export interface PulledFile {
  /** The path in the repository. */
  repoPath: string;
  localPath: string;
}

const VOICE_FILE = /\.(ckpt|pt)$/;

/** The config entry for the pulled files of a recognised repository. */
export function suggestModelConfig(
  profile: AdapterProfile,
  pulled: { ref: Pick<RepoRef, 'repoId'>; snapshotDir: string; files: readonly PulledFile[] },
): ConfigSuggestion {
  const modelName = pulled.ref.repoId.split('/').at(-1)!;
  const entry = (options: Record<string, string>): Record<string, ModelEntry> => ({ [modelName]: { adapter: profile.adapter, options } });
  const byPath = new Map(pulled.files.map((f) => [f.repoPath, f.localPath]));
  switch (profile.adapter) {
    case 'parakeet':
    case 'sortformer': {
      const archives = pulled.files.filter((f) => f.repoPath.endsWith('.nemo'));
      if (archives.length === 0) return { note: `No .nemo archive was pulled: the ${profile.adapter} adapter loads one` };
      const option = profile.adapter === 'parakeet' ? 'nemoPath' : 'checkpoint';
      return {
        models: entry({ [option]: archives[0]!.localPath }),
        ...(archives.length > 1 ? { note: `${archives.length} .nemo archives were pulled: the entry names the first` } : {}),
      };
    }
    case 'whisper': {
      const hasWeights = byPath.has('model.safetensors') || byPath.has('model.safetensors.index.json');
      if (!byPath.has('config.json') || !hasWeights) {
        return { note: 'The whisper adapter reads a folder with config.json and model.safetensors (or its shards): pull those too' };
      }
      return { models: entry({ checkpointPath: pulled.snapshotDir }) };
    }
    case 'vits': {
      const voiceFolders = [...new Set(pulled.files.filter((f) => VOICE_FILE.test(f.repoPath)).map((f) => dirname(f.localPath)))];
      if (voiceFolders.length === 1) return { models: entry({ voicesDir: voiceFolders[0]! }) };
      if (voiceFolders.length > 1) {
        return {
          note: `The voices are in ${voiceFolders.length} folders and the vits adapter's voicesDir is one folder: pull one voice folder per model, or gather the voice files into one folder`,
        };
      }
      if (pulled.files.some((f) => f.repoPath.endsWith('.onnx'))) {
        return {
          note: 'These are Piper ONNX voices: the vits adapter loads PyTorch checkpoints (.ckpt or .pt, with the voice .json beside them), not .onnx files (docs/adapters.md)',
        };
      }
      return { note: 'No voice file (.ckpt or .pt) was pulled: the vits adapter loads those' };
    }
  }
}
