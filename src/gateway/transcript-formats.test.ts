import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TranscriptResult } from '../scheduler/index.js';
import { WHISPER_LANGUAGES } from '../app/whisper-languages.js';
import { languageName } from './language-names.js';
import { renderTranscript, timestamp, toStreamEvents } from './transcript-formats.js';

const SEGMENTS_ONLY = { includeWords: false, includeSegments: true };

/** Two segments, the second ending past one hour; text with outer whitespace. */
const result: TranscriptResult = {
  text: ' Hello there. General Kenobi. ',
  language: 'en',
  durationS: 3661.5,
  segments: [
    { start: 0, end: 1.234, text: ' Hello there.', decoding: null },
    { start: 1.5, end: 2, text: '   ', decoding: null },
    { start: 1.234, end: 3661.5, text: 'General Kenobi.', decoding: null },
  ],
  words: [
    { word: 'Hello', start: 0.1, end: 0.4567 },
    { word: 'there.', start: 0.5, end: 1.234 },
  ],
};

const empty: TranscriptResult = { text: '  ', language: 'en', durationS: 0.4, segments: null, words: null };

describe('timestamp', () => {
  it('formats hours, minutes, seconds and milliseconds with the given separator', () => {
    assert.equal(timestamp(0, ','), '00:00:00,000');
    assert.equal(timestamp(1.234, ','), '00:00:01,234');
    assert.equal(timestamp(1.234, '.'), '00:00:01.234');
    assert.equal(timestamp(3723.004, ','), '01:02:03,004');
    assert.equal(timestamp(100 * 3600 + 0.5, '.'), '100:00:00.500');
  });

  it('rounds to the nearest millisecond, carrying into the next second, and clamps negatives to zero', () => {
    assert.equal(timestamp(59.9996, ','), '00:01:00,000');
    assert.equal(timestamp(0.0004, ','), '00:00:00,000');
    assert.equal(timestamp(-1, ','), '00:00:00,000');
  });
});

describe('renderTranscript', () => {
  it('renders json as the trimmed text with duration usage rounded up to whole seconds', () => {
    const rendered = renderTranscript(result, 'json', SEGMENTS_ONLY);
    assert.equal(rendered.contentType, 'application/json; charset=utf-8');
    assert.equal(rendered.body, '{"text":"Hello there. General Kenobi.","usage":{"type":"duration","seconds":3662}}');
  });

  it('renders text as the trimmed text and a newline', () => {
    const rendered = renderTranscript(result, 'text', SEGMENTS_ONLY);
    assert.equal(rendered.contentType, 'text/plain; charset=utf-8');
    assert.equal(rendered.body, 'Hello there. General Kenobi.\n');
  });

  it('renders srt cues numbered from 1 with comma milliseconds, skipping blank segments', () => {
    const rendered = renderTranscript(result, 'srt', SEGMENTS_ONLY);
    assert.equal(rendered.contentType, 'text/plain; charset=utf-8');
    assert.equal(rendered.body, '1\n00:00:00,000 --> 00:00:01,234\nHello there.\n\n2\n00:00:01,234 --> 01:01:01,500\nGeneral Kenobi.\n');
  });

  it('renders vtt with its header and dot milliseconds', () => {
    const rendered = renderTranscript(result, 'vtt', SEGMENTS_ONLY);
    assert.equal(rendered.contentType, 'text/plain; charset=utf-8');
    assert.equal(
      rendered.body,
      'WEBVTT\n\n00:00:00.000 --> 00:00:01.234\nHello there.\n\n00:00:01.234 --> 01:01:01.500\nGeneral Kenobi.\n',
    );
  });

  it('renders one cue over the whole audio when the result has no segments', () => {
    const noSegments = { ...result, segments: null, durationS: 2.5 };
    assert.equal(
      renderTranscript(noSegments, 'srt', SEGMENTS_ONLY).body,
      '1\n00:00:00,000 --> 00:00:02,500\nHello there. General Kenobi.\n',
    );
    assert.equal(
      renderTranscript(noSegments, 'vtt', SEGMENTS_ONLY).body,
      'WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nHello there. General Kenobi.\n',
    );
  });

  it("renders a Whisper segment's decoding (window, tokens, temperature, log-probability, ratios) in verbose_json", () => {
    const decoding = {
      seek: 3000,
      tokens: [50365, 7, 50400],
      temperature: 0.2,
      avgLogprob: -0.31,
      compressionRatio: 1.7,
      noSpeechProb: 0.01,
    };
    const whisper: TranscriptResult = { ...result, segments: [{ start: 30, end: 30.7, text: ' Hi.', decoding }] };
    const body = JSON.parse(renderTranscript(whisper, 'verbose_json', SEGMENTS_ONLY).body) as { segments: unknown[] };
    assert.deepEqual(body.segments, [
      {
        id: 0,
        seek: 3000,
        start: 30,
        end: 30.7,
        text: 'Hi.',
        tokens: [50365, 7, 50400],
        temperature: 0.2,
        avg_logprob: -0.31,
        compression_ratio: 1.7,
        no_speech_prob: 0.01,
      },
    ]);
  });

  it('renders verbose_json with the language name, duration, segments and usage, and no words unless asked', () => {
    const rendered = renderTranscript(result, 'verbose_json', SEGMENTS_ONLY);
    assert.equal(rendered.contentType, 'application/json; charset=utf-8');
    const segment = { seek: 0, tokens: [], temperature: 0, avg_logprob: 0, compression_ratio: 0, no_speech_prob: 0 };
    assert.deepEqual(JSON.parse(rendered.body), {
      task: 'transcribe',
      language: 'english',
      duration: 3661.5,
      text: 'Hello there. General Kenobi.',
      segments: [
        { id: 0, start: 0, end: 1.234, text: 'Hello there.', ...segment },
        { id: 1, start: 1.234, end: 3661.5, text: 'General Kenobi.', ...segment },
      ],
      usage: { type: 'duration', seconds: 3662 },
      voxmux: { language_source: 'reported' },
    });
  });

  it("marks verbose_json's language as the call's own, or assumed where the model knows only that one (#16)", () => {
    for (const languageSource of ['requested', 'assumed', 'reported'] as const) {
      const body = JSON.parse(renderTranscript(result, 'verbose_json', { ...SEGMENTS_ONLY, languageSource }).body) as Record<
        string,
        unknown
      >;
      assert.deepEqual([body.language, body.voxmux], ['english', { language_source: languageSource }]);
    }
  });

  it('adds words to verbose_json only when asked, rounded to milliseconds', () => {
    const body = JSON.parse(renderTranscript(result, 'verbose_json', { includeWords: true, includeSegments: false }).body) as Record<
      string,
      unknown
    >;
    assert.deepEqual(body.words, [
      { word: 'Hello', start: 0.1, end: 0.457 },
      { word: 'there.', start: 0.5, end: 1.234 },
    ]);
    assert.deepEqual(body.segments, []);
    const noWords = JSON.parse(
      renderTranscript({ ...result, words: null }, 'verbose_json', { includeWords: true, includeSegments: true }).body,
    ) as Record<string, unknown>;
    assert.deepEqual(noWords.words, []);
  });

  it('keeps a language code it has no name for', () => {
    const body = JSON.parse(renderTranscript({ ...result, language: 'tlh' }, 'verbose_json', SEGMENTS_ONLY).body) as Record<
      string,
      unknown
    >;
    assert.equal(body.language, 'tlh');
  });

  it('has a name for every language the whisper adapter declares (the two tables stay in step)', () => {
    const unnamed = WHISPER_LANGUAGES.filter((code) => languageName(code) === code);
    assert.deepEqual(unnamed, []);
  });

  it('names every Whisper language in verbose_json as OpenAI does, not only the first few (its lowercase English name)', () => {
    const cases: [string, string][] = [
      ['sw', 'swahili'],
      ['ja', 'japanese'],
      ['zh', 'chinese'],
      ['nl', 'dutch'],
      ['ht', 'haitian creole'],
      ['haw', 'hawaiian'],
      ['jw', 'javanese'],
      ['yue', 'cantonese'],
    ];
    for (const [code, name] of cases) {
      const body = JSON.parse(renderTranscript({ ...result, language: code }, 'verbose_json', SEGMENTS_ONLY).body) as Record<
        string,
        unknown
      >;
      assert.equal(body.language, name, code);
    }
  });

  it('renders an empty transcript in every format', () => {
    assert.equal(renderTranscript(empty, 'json', SEGMENTS_ONLY).body, '{"text":"","usage":{"type":"duration","seconds":1}}');
    assert.equal(renderTranscript(empty, 'text', SEGMENTS_ONLY).body, '\n');
    assert.equal(renderTranscript(empty, 'srt', SEGMENTS_ONLY).body, '');
    assert.equal(renderTranscript(empty, 'vtt', SEGMENTS_ONLY).body, 'WEBVTT\n\n');
    assert.deepEqual(JSON.parse(renderTranscript(empty, 'verbose_json', { includeWords: true, includeSegments: true }).body), {
      task: 'transcribe',
      language: 'english',
      duration: 0.4,
      text: '',
      segments: [],
      usage: { type: 'duration', seconds: 1 },
      voxmux: { language_source: 'reported' },
      words: [],
    });
  });
});

describe('toStreamEvents', () => {
  const deltasOf = (events: ReturnType<typeof toStreamEvents>) =>
    events.flatMap((e) => (e.type === 'transcript.text.delta' ? [e.delta] : []));

  it('sends one delta per non-blank segment, then done; the deltas join to the done text', () => {
    const events = toStreamEvents(result);
    assert.deepEqual(events, [
      { type: 'transcript.text.delta', delta: 'Hello there.' },
      { type: 'transcript.text.delta', delta: ' General Kenobi.' },
      { type: 'transcript.text.done', text: 'Hello there. General Kenobi.', usage: { type: 'duration', seconds: 3662 } },
    ]);
    const done = events.at(-1)!;
    assert.ok(done.type === 'transcript.text.done');
    assert.equal(deltasOf(events).join(''), done.text);
  });

  it('sends the whole text as one delta when the result has no segments', () => {
    assert.deepEqual(deltasOf(toStreamEvents({ ...result, segments: null })), ['Hello there. General Kenobi.']);
  });

  it('keeps the deltas joining to the done text when the segments disagree with the text', () => {
    for (const text of ['Hello there.  General Kenobi.', 'Hello there! General Kenobi!', 'Hello there.']) {
      const events = toStreamEvents({ ...result, text });
      const done = events.at(-1)!;
      assert.ok(done.type === 'transcript.text.done');
      assert.equal(done.text, text);
      assert.equal(deltasOf(events).join(''), text);
    }
  });

  it('sends only done, with empty text, for an empty transcript', () => {
    assert.deepEqual(toStreamEvents(empty), [{ type: 'transcript.text.done', text: '', usage: { type: 'duration', seconds: 1 } }]);
    assert.deepEqual(toStreamEvents({ ...empty, segments: [{ start: 0, end: 1, text: 'ghost', decoding: null }] }), [
      { type: 'transcript.text.done', text: '', usage: { type: 'duration', seconds: 1 } },
    ]);
  });
});
