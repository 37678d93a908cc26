import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CatalogEntry } from '../../scheduler/index.js';
import { voiceAliasesOf } from './voice-aliases.js';

const entry = (name: string, kind = 'voice'): CatalogEntry => ({
  name,
  kind,
  language: 'en-US',
  sampleRate: 22_050,
  gender: null,
  description: name,
});

const OPENAI = ['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'nova', 'onyx', 'sage', 'shimmer', 'verse', 'marin', 'cedar'];

describe('voiceAliasesOf', () => {
  it('lays the names onto the catalogue voices in order, starting again from the first when there are fewer voices', () => {
    const five = ['v0', 'v1', 'v2', 'v3', 'v4'].map((name) => entry(name));
    const aliases = voiceAliasesOf({ catalogVoiceAliases: OPENAI }, five);
    assert.deepEqual(Object.keys(aliases), OPENAI);
    assert.deepEqual(
      ['alloy', 'fable', 'verse', 'ash', 'cedar', 'shimmer'].map((name) => aliases[name]),
      ['v0', 'v0', 'v0', 'v1', 'v2', 'v4'],
    );
    const many = Array.from({ length: 20 }, (_, i) => entry(`v${i}`));
    assert.deepEqual(
      Object.values(voiceAliasesOf({ catalogVoiceAliases: OPENAI }, many)),
      many.slice(0, 13).map((e) => e.name),
    );
  });

  it('skips catalogue entries that are not voices, and lets the fixed table win', () => {
    const catalog = [entry('lexicon', 'dictionary'), entry('v0'), entry('v1')];
    assert.deepEqual(
      voiceAliasesOf({ voiceAliases: { ash: 'v0', onyx: 'v1' }, catalogVoiceAliases: ['alloy', 'ash', 'ballad'] }, catalog),
      {
        alloy: 'v0',
        ash: 'v0',
        ballad: 'v0',
        onyx: 'v1',
      },
    );
  });

  it('gives only the fixed table while the model has declared no voice', () => {
    assert.deepEqual(voiceAliasesOf({ voiceAliases: { alloy: 'x' }, catalogVoiceAliases: OPENAI }, []), { alloy: 'x' });
    assert.deepEqual(voiceAliasesOf({}, [entry('v0')]), {});
  });
});
