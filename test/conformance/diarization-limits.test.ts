/**
 * The diarization engines' limits are declared by their host modules (the adapters' option defaults,
 * Sortformer's output slots) and copied by the gateway (src/config/schema.ts), which checks calls
 * against them before any instance has loaded: a recording longer than an engine's longest item is
 * sent as a session of items, and min_speakers above the most speakers it finds is refused. This test
 * keeps the two sides the same. It reads the Python source and does not import it (no torch needed).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { DIARIZATION_MAX_ITEM_DEFAULT_S, maxDiarizationItemMsOf, maxDiarizationSpeakersOf } from '../../src/config/schema.js';

const MODELS_DIR = fileURLToPath(new URL('../../host/voxmux_host/models/', import.meta.url));
const source = (path: string) => readFileSync(`${MODELS_DIR}${path}`, 'utf8');

/** The number an option default `'key': N` or `"key": N` holds in a Python module. */
function optionDefault(text: string, key: string): number {
  const match = new RegExp(`['"]${key}['"]: (\\d+(?:\\.\\d+)?),`).exec(text);
  assert.ok(match !== null, `no default for ${key}`);
  return Number(match[1]);
}

describe('diarization engine limits, in the host modules and in the gateway', () => {
  it("the longest item: each adapter's maxItemSeconds default", () => {
    assert.deepEqual(DIARIZATION_MAX_ITEM_DEFAULT_S, {
      sortformer: optionDefault(source('sortformer/adapter.py'), 'maxItemSeconds'),
      'classical-diarizer': optionDefault(source('classical_diarizer/adapter.py'), 'maxItemSeconds'),
    });
    assert.equal(maxDiarizationItemMsOf({ adapter: 'sortformer', options: {} }), DIARIZATION_MAX_ITEM_DEFAULT_S.sortformer! * 1000);
  });

  it("the most speakers: classical-diarizer's maxSpeakers default, Sortformer's output slots", () => {
    assert.equal(
      maxDiarizationSpeakersOf({ adapter: 'classical-diarizer', options: {} }),
      optionDefault(source('classical_diarizer/adapter.py'), 'maxSpeakers'),
    );
    const slots = /^\s+n_speakers: int = (\d+)$/m.exec(source('sortformer/config.py'))?.[1];
    assert.equal(maxDiarizationSpeakersOf({ adapter: 'sortformer', options: {} }), Number(slots));
  });
});
