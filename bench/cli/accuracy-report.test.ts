import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ACCURACY_SCHEMA,
  accuracyLines,
  baselineTranscripts,
  compareWithBaseline,
  summarizeAccuracy,
  toAccuracyMarkdown,
  worstItems,
  type AccuracyResults,
} from './accuracy-report.js';
import { occurrenceKeys } from './accuracy-manifest.js';
import type { AccuracyItemResult } from './accuracy-run.js';
import { countWordErrors } from './word-error-rate.js';

function scored(audio: string, reference: string, hypothesis: string, baseline?: string): AccuracyItemResult {
  return {
    audio,
    reference,
    hypothesis,
    errors: countWordErrors(reference, hypothesis),
    ...(baseline === undefined ? {} : { baselineErrors: countWordErrors(baseline, hypothesis) }),
    latencyMs: 10,
    status: 200,
  };
}

function results(items: AccuracyItemResult[], label = 'run'): AccuracyResults {
  return {
    schema: ACCURACY_SCHEMA,
    label,
    endpoint: 'http://127.0.0.1:1/v1/audio/transcriptions',
    model: 'm',
    command: ['voxmux', 'bench', 'accuracy'],
    machine: { platform: 'linux', release: '', arch: 'x64', cpuModel: 'cpu', cpuCores: 2, memoryBytes: 1, nodeVersion: 'v20' },
    startedAt: '2026-01-01T00:00:00.000Z',
    endedAt: '2026-01-01T00:00:01.000Z',
    options: { concurrency: 1, timeoutMs: 1000, fields: {}, manifest: 'm.jsonl' },
    totals: summarizeAccuracy(items),
    items,
    notes: [],
  };
}

describe('summarizeAccuracy', () => {
  it('sums errors over the scored items only and counts failures by code', () => {
    const totals = summarizeAccuracy([
      scored('a', 'one two three four', 'one too three four'),
      scored('b', 'five six', 'five six seven'),
      { audio: 'c', hypothesis: 'no reference', latencyMs: 1, status: 200 },
      { audio: 'd', reference: 'x', latencyMs: 1, status: 415, errorCode: 'unsupported_audio' },
      { audio: 'e', reference: 'x', latencyMs: 1, errorCode: 'timeout' },
    ]);
    assert.deepEqual(totals, {
      items: 5,
      ok: 3,
      failed: 2,
      scored: 2,
      referenceWords: 6,
      substitutions: 1,
      deletions: 0,
      insertions: 1,
      wer: 2 / 6,
      errorsByCode: { unsupported_audio: 1, timeout: 1 },
    });
  });

  it('has no rate without reference words', () => {
    assert.equal(summarizeAccuracy([{ audio: 'a', hypothesis: 'x', latencyMs: 1 }]).wer, undefined);
  });
});

describe('compareWithBaseline', () => {
  it('counts changed transcripts and compares both runs on the files both scored', () => {
    const before = results([
      scored('a', 'one two three', 'one two tree'),
      scored('b', 'four five', 'four five'),
      scored('c', 'six', 'six'),
    ]);
    const transcripts = baselineTranscripts(before);
    const first = (audio: string): string | undefined => transcripts.get(occurrenceKeys([audio])[0]!);
    const now = [
      scored('a', 'one two three', 'one two three', first('a')),
      scored('b', 'four five', 'four five', first('b')),
      // failed now: left out of the comparison
      { audio: 'c', reference: 'six', latencyMs: 1, errorCode: 'timeout' },
      // not in the baseline
      scored('d', 'seven', 'seven'),
    ];
    const comparison = compareWithBaseline(now, { path: 'base.json', results: before });
    assert.deepEqual(comparison, {
      path: 'base.json',
      label: 'run',
      compared: 2,
      changed: 1,
      disagreement: { referenceWords: 5, substitutions: 1, deletions: 0, insertions: 0, wer: 1 / 5 },
      bothScored: 2,
      wer: 0,
      baselineWer: 1 / 5,
    });
    assert.match(
      accuracyLines({ ...results(now), baseline: comparison }).join('\n'),
      /1 of 2 transcript\(s\) differ, word disagreement 20\.00 %/,
    );
  });
});

describe('compareWithBaseline with a file listed twice', () => {
  it('matches each occurrence with the same occurrence in the baseline', () => {
    const before = results([scored('a', 'one two', 'one two'), { audio: 'a', hypothesis: 'one two', latencyMs: 1, status: 200 }]);
    const transcripts = baselineTranscripts(before);
    assert.equal(transcripts.size, 2);
    const now = [
      scored('a', 'one two', 'one two', 'one two'),
      { audio: 'a', hypothesis: 'one two', baselineErrors: countWordErrors('one two', 'one two'), latencyMs: 1 },
    ];
    const comparison = compareWithBaseline(now, { path: 'b.json', results: before });
    assert.deepEqual([comparison.compared, comparison.changed, comparison.bothScored], [2, 0, 1]);
  });
});

describe('the summaries', () => {
  it('put failed files first, then the most errors', () => {
    const run = results([
      scored('good', 'a b', 'a b'),
      { audio: 'failed', latencyMs: 1, errorCode: 'timeout' },
      scored('bad', 'a b', 'c d'),
      { audio: 'unscored', hypothesis: 'x', latencyMs: 1 },
    ]);
    assert.deepEqual(
      worstItems(run, 3).map((item) => item.audio),
      ['failed', 'bad', 'good'],
    );
    const markdown = toAccuracyMarkdown(run);
    assert.match(markdown, /^# Accuracy: run$/m);
    assert.match(markdown, /WER: 50\.00 % over 2 file\(s\), 4 reference words: 2 substitutions/);
    assert.match(markdown, /\| failed \| timeout \|/);
    assert.match(accuracyLines(run)[0]!, /4 file\(s\), 3 transcribed, 1 failed \(timeout: 1\)/);
  });
});
