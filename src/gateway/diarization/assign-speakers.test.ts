import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { speakerOf, toDiarizedSegments, toDiarizedStreamEvents, toDiarizedTranscription } from './assign-speakers.js';

const turns = [
  { start: 0, end: 2, speaker: 'speaker_0' },
  { start: 2.5, end: 5, speaker: 'speaker_1' },
];

describe('toDiarizedSegments (#17)', () => {
  it('gives each word the speaker it overlaps most and joins consecutive words of one speaker', () => {
    const words = [
      { text: 'hello', start: 0.1, end: 0.5 },
      { text: 'there', start: 0.6, end: 1.0 },
      { text: 'general', start: 1.9, end: 2.7 },
      { text: 'kenobi', start: 2.8, end: 3.5 },
    ];
    assert.deepEqual(toDiarizedSegments(words, turns), [
      { type: 'transcript.text.segment', id: 'seg_0', start: 0.1, end: 1.0, text: 'hello there', speaker: 'speaker_0' },
      { type: 'transcript.text.segment', id: 'seg_1', start: 1.9, end: 3.5, text: 'general kenobi', speaker: 'speaker_1' },
    ]);
  });

  it('gives a word in no turn the nearest one, and one with no turns at all speaker_0; skips empty words', () => {
    assert.equal(speakerOf({ start: 2.2, end: 2.4 }, turns), 'speaker_1');
    assert.equal(speakerOf({ start: 2.05, end: 2.1 }, turns), 'speaker_0');
    assert.equal(speakerOf({ start: 0, end: 1 }, []), 'speaker_0');
    assert.deepEqual(toDiarizedSegments([{ text: ' ', start: 0, end: 1 }], turns), []);
  });
});

describe('speakerOf at turn edges', () => {
  it("gives a word to the speaker who speaks most of it, summed over that speaker's turns (WhisperX's assign_word_speakers)", () => {
    // speaker_0 speaks 0.70 s of the word in two turns split by a 0.1 s pause; speaker_1 only 0.40 s.
    // whisperx/diarize.py sums the intersection per speaker (groupby("speaker")["intersection"].sum()).
    const edge = [
      { start: 0.5, end: 1.35, speaker: 'speaker_0' },
      { start: 1.45, end: 1.8, speaker: 'speaker_0' },
      { start: 1.6, end: 3.0, speaker: 'speaker_1' },
    ];
    assert.equal(speakerOf({ start: 1.0, end: 2.0 }, edge), 'speaker_0');
  });
});

describe('toDiarizedTranscription', () => {
  it("labels speakers A, B, ... in order of first appearance, as OpenAI's diarized_json does without known speakers", () => {
    const result = {
      text: 'hello there general kenobi',
      language: 'en',
      durationS: 5,
      segments: null,
      words: [
        { word: 'hello', start: 0.1, end: 0.5 },
        { word: 'there', start: 2.6, end: 3.0 },
        { word: 'general', start: 3.1, end: 3.5 },
        { word: 'kenobi', start: 3.6, end: 4.0 },
      ],
    };
    const laterFirst = [
      { start: 0, end: 2, speaker: 'speaker_3' },
      { start: 2.5, end: 3.05, speaker: 'speaker_0' },
      { start: 3.05, end: 5, speaker: 'speaker_3' },
    ];
    const body = toDiarizedTranscription(result, laterFirst);
    assert.deepEqual(
      body.segments.map((s) => [s.speaker, s.text]),
      [
        ['A', 'hello'],
        ['B', 'there'],
        ['A', 'general kenobi'],
      ],
    );
    const streamed = toDiarizedStreamEvents(body).flatMap((e) => (e.type === 'transcript.text.segment' ? [e.speaker] : []));
    assert.deepEqual(streamed, ['A', 'B', 'A']);
  });
});

describe('diarized_json text in a language written without spaces', () => {
  it('joins words as the transcript does: no space between Chinese words, one between English words', () => {
    const result = {
      text: '你好世界。 Hello there',
      language: 'zh',
      durationS: 5,
      segments: null,
      words: [
        { word: '你好', start: 0.1, end: 0.5 },
        { word: '世界。', start: 0.6, end: 1.0 },
        { word: ' Hello', start: 2.6, end: 3.0 },
        { word: ' there', start: 3.1, end: 3.5 },
      ],
    };
    const oneSpeaker = [{ start: 0, end: 5, speaker: 'speaker_0' }];
    const body = toDiarizedTranscription(result, oneSpeaker);
    assert.deepEqual(
      body.segments.map((s) => s.text),
      ['你好世界。 Hello there'],
    );
    assert.equal(body.text, '你好世界。 Hello there');
    const two = toDiarizedTranscription(result, turns);
    assert.deepEqual(
      two.segments.map((s) => [s.speaker, s.text]),
      [
        ['A', '你好世界。'],
        ['B', 'Hello there'],
      ],
    );
    assert.equal(two.text, '你好世界。 Hello there');
    const switching = toDiarizedTranscription(
      {
        ...result,
        text: '你好世界',
        words: [
          { word: '你好', start: 0.1, end: 0.5 },
          { word: '世界', start: 2.6, end: 3.0 },
        ],
      },
      turns,
    );
    assert.equal(switching.text, '你好世界');
    const deltas = toDiarizedStreamEvents(switching).flatMap((e) => (e.type === 'transcript.text.delta' ? [e.delta] : []));
    assert.deepEqual(deltas, ['你好', '世界']);
  });
});
