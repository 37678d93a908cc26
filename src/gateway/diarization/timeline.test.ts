import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sortSegments, toEngineOutput, toRttm, toSpeakerSegments } from './timeline.js';

describe('diarization timeline (#17)', () => {
  it('checks engine outputs against the contract', () => {
    const output = toEngineOutput({ finalized: [{ start: 0, end: 1.5, speaker: 0 }], provisional: [], speakers: 1 }, 'm');
    assert.deepEqual(toSpeakerSegments(output.finalized), [{ start: 0, end: 1.5, speaker: 'speaker_0' }]);
    for (const bad of [
      {},
      { finalized: [{ start: 2, end: 1, speaker: 0 }], provisional: [], speakers: 1 },
      { finalized: [], provisional: [], speakers: -1 },
    ]) {
      assert.throws(
        () => toEngineOutput(bad, 'm'),
        (err: { code: string }) => err.code === 'internal_error',
      );
    }
  });

  it('writes RTTM SPEAKER lines', () => {
    assert.equal(
      toRttm('call 1', [{ start: 0.5, end: 2, speaker: 'speaker_1' }]),
      'SPEAKER call_1 1 0.500 1.500 <NA> <NA> speaker_1 <NA> <NA>\n',
    );
  });
});

describe('sortSegments', () => {
  it('orders by start, then end, then speaker number, comparing times to the millisecond the API shows', () => {
    const sorted = sortSegments([
      { start: 2, end: 3, speaker: 10 },
      { start: 1, end: 2, speaker: 1 },
      { start: 2, end: 3, speaker: 2 },
      { start: 1.0004, end: 1.5, speaker: 3 },
    ]);
    assert.deepEqual(toSpeakerSegments(sorted), [
      { start: 1, end: 1.5, speaker: 'speaker_3' },
      { start: 1, end: 2, speaker: 'speaker_1' },
      { start: 2, end: 3, speaker: 'speaker_2' },
      { start: 2, end: 3, speaker: 'speaker_10' },
    ]);
  });
});
