import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  MAX_SEGMENT_MS,
  SEGMENT_PAUSE_MS,
  speakerOf,
  toDiarizedSegments,
  toDiarizedStreamEvents,
  toDiarizedTranscription,
} from './assign-speakers.js';

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
        { word: '世界。', start: 0.6, end: 2.0 },
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

describe('diarized_json segments at pauses', () => {
  const oneSpeaker = [{ start: 0, end: 100, speaker: 'speaker_0' }];
  const transcript = (text: string, words: { word: string; start: number; end: number }[]) => ({
    text,
    language: 'en',
    durationS: 100,
    segments: null,
    words,
  });

  it('ends a segment where the pause between two words of one speaker reaches SEGMENT_PAUSE_MS, in the body and the stream alike', () => {
    // One sentence, 8 s of silence, another sentence: two segments, as OpenAI's speaker turns.
    const body = toDiarizedTranscription(
      transcript('One sentence. Another one.', [
        { word: ' One', start: 0.0, end: 0.4 },
        { word: ' sentence.', start: 0.5, end: 1.0 },
        { word: ' Another', start: 9.0, end: 9.4 },
        { word: ' one.', start: 9.5, end: 10.0 },
      ]),
      oneSpeaker,
    );
    assert.deepEqual(body.segments, [
      { type: 'transcript.text.segment', id: 'seg_0', start: 0, end: 1, text: 'One sentence.', speaker: 'A' },
      { type: 'transcript.text.segment', id: 'seg_1', start: 9, end: 10, text: 'Another one.', speaker: 'A' },
    ]);
    assert.equal(body.text, 'One sentence. Another one.');
    const events = toDiarizedStreamEvents(body).map((e) =>
      e.type === 'transcript.text.delta'
        ? ['delta', e.segment_id, e.delta]
        : e.type === 'transcript.text.segment'
          ? ['segment', e.id]
          : [e.type],
    );
    assert.deepEqual(events, [
      ['delta', 'seg_0', 'One sentence.'],
      ['segment', 'seg_0'],
      ['delta', 'seg_1', ' Another one.'],
      ['segment', 'seg_1'],
      ['transcript.text.done'],
    ]);
  });

  it('keeps words of one speaker together across a pause just under SEGMENT_PAUSE_MS, and splits at exactly it', () => {
    const pauseS = SEGMENT_PAUSE_MS / 1000;
    const under = [
      { text: 'a', start: 0.3, end: 0.7 },
      { text: 'b', start: 0.7 + pauseS - 0.01, end: 2.9 },
    ];
    assert.deepEqual(
      toDiarizedSegments(under, oneSpeaker).map((s) => s.text),
      ['a b'],
    );
    const at = [
      { text: 'a', start: 0.3, end: 0.7 },
      { text: 'b', start: 0.7 + pauseS, end: 2.9 },
    ];
    assert.deepEqual(
      toDiarizedSegments(at, oneSpeaker).map((s) => [s.id, s.text]),
      [
        ['seg_0', 'a'],
        ['seg_1', 'b'],
      ],
    );
  });

  it('joins Chinese words without spaces on both sides of a pause, in segments, text and deltas', () => {
    const body = toDiarizedTranscription(
      transcript('你好世界。再见', [
        { word: '你好', start: 0.0, end: 0.5 },
        { word: '世界。', start: 0.6, end: 1.0 },
        { word: '再见', start: 5.0, end: 5.5 },
      ]),
      oneSpeaker,
    );
    assert.deepEqual(
      body.segments.map((s) => [s.id, s.text]),
      [
        ['seg_0', '你好世界。'],
        ['seg_1', '再见'],
      ],
    );
    assert.equal(body.text, '你好世界。再见');
    const deltas = toDiarizedStreamEvents(body).flatMap((e) => (e.type === 'transcript.text.delta' ? [e.delta] : []));
    assert.deepEqual(deltas, ['你好世界。', '再见']);
  });

  it('ends a segment of one speaker who never pauses before it grows longer than MAX_SEGMENT_MS', () => {
    // 70 s of half-second words with no pause between them.
    const words = Array.from({ length: 140 }, (_, i) => ({ text: `w${i}`, start: i * 0.5, end: (i + 1) * 0.5 }));
    const segments = toDiarizedSegments(words, oneSpeaker);
    const maxS = MAX_SEGMENT_MS / 1000;
    assert.ok(
      segments.every((s) => s.end - s.start <= maxS),
      JSON.stringify(segments.map((s) => [s.start, s.end])),
    );
    assert.deepEqual(
      segments.map((s) => [s.id, s.start, s.end]),
      [
        ['seg_0', 0, 30],
        ['seg_1', 30, 60],
        ['seg_2', 60, 70],
      ],
    );
    assert.equal(segments.map((s) => s.text).join(' '), words.map((w) => w.text).join(' '));
  });
});
