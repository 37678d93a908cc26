/**
 * The whisper adapter (tiny configuration, random weights, CPU) behind the real server, driven by the
 * unmodified `openai` SDK: every response format, language and prompt, word timestamps, translations, languages in
 * /v1/models, the enveloped error for a language the model does not know, and long audio cut into pieces.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { fliteWav, pcm16Wav } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

const CONFIG = {
  supervisor: { heartbeatIntervalMs: 200 },
  models: {
    whisper: {
      adapter: 'whisper',
      aliases: ['whisper-1'],
      instances: 1,
      maxBatchSize: 4,
      options: { config: 'tiny', device: 'cpu', batchSizes: [1, 2, 4], maxTokensPerAudioSecond: 3, temperatureIncrement: 0 },
    },
  },
};

describe('whisper adapter behind the server, through the openai SDK', () => {
  let server: RunningServer;
  let client: OpenAI;
  const dir = mkdtempSync(join(tmpdir(), 'voxmux-whisper-'));
  const speech = readFileSync(fliteWav('we will meet at the station at nine', join(dir, 'speech.wav')));
  const file = () => toFile(speech, 'speech.wav');

  before(async () => {
    server = await startServer({ config: CONFIG, timeoutMs: 120_000 });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'not-needed', maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
  });

  it('lists its languages in /v1/models', async () => {
    const models = await client.models.list();
    const whisper = models.data.find((m) => m.id === 'whisper-1') as unknown as { voxmux: { task: string; languages: string[] } };
    assert.equal(whisper.voxmux.task, 'transcription');
    assert.equal(whisper.voxmux.languages.length, 100);
    assert.ok(whisper.voxmux.languages.includes('de') && whisper.voxmux.languages.includes('yue'));
  });

  it('answers json, text, srt, vtt and verbose_json with segments', async () => {
    const [json, text, srt, vtt, verbose] = await Promise.all([
      client.audio.transcriptions.create({ model: 'whisper-1', file: await file() }),
      client.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'text', language: 'en' }),
      client.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'srt', prompt: 'Station.' }),
      client.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'vtt', temperature: 0 }),
      client.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'verbose_json', language: 'de' }),
    ]);
    assert.equal(typeof json.text, 'string');
    assert.equal(typeof text, 'string');
    assert.match(srt as unknown as string, /^(1\n00:00:\d\d,\d{3} --> 00:00:\d\d,\d{3}\n|$)/);
    assert.match(vtt as unknown as string, /^WEBVTT/);
    const body = verbose as unknown as { language: string; duration: number; segments: OpenAI.Audio.TranscriptionSegment[] };
    assert.equal(body.language, 'german');
    assert.ok(body.duration > 1 && body.duration < 5, String(body.duration));
    assert.ok(body.segments.length > 0);
    for (const segment of body.segments) {
      assert.ok(0 <= segment.start && segment.start <= segment.end && segment.end <= body.duration);
      // How the segment was decoded, as OpenAI reports it: one window, from the start.
      assert.equal(segment.seek, 0);
      assert.equal(segment.temperature, 0);
      assert.ok(segment.tokens.length > 0 && segment.tokens.every((t) => Number.isInteger(t) && t >= 0));
      assert.ok(segment.avg_logprob < 0 && segment.compression_ratio > 0, JSON.stringify(segment));
      assert.ok(segment.no_speech_prob >= 0 && segment.no_speech_prob <= 1);
    }
  });

  it('translates through /v1/audio/translations in json, verbose_json and srt', async () => {
    const [json, verbose, srt] = await Promise.all([
      client.audio.translations.create({ model: 'whisper-1', file: await file(), prompt: 'Station.' }),
      client.audio.translations.create({ model: 'whisper-1', file: await file(), response_format: 'verbose_json', temperature: 0.2 }),
      client.audio.translations.create({ model: 'whisper-1', file: await file(), response_format: 'srt' }),
    ]);
    assert.equal(typeof json.text, 'string');
    const body = verbose as unknown as { task: string; language: string; duration: number; segments: unknown[] };
    assert.deepEqual([body.task, body.language], ['translate', 'english']);
    assert.ok(body.duration > 1 && body.duration < 5, String(body.duration));
    assert.equal(typeof srt, 'string');
    const models = await client.models.list();
    const whisper = models.data.find((m) => m.id === 'whisper') as unknown as { voxmux: { translation: boolean } };
    assert.equal(whisper.voxmux.translation, true);
  });

  it('refuses a language the model does not know, in the error envelope', async () => {
    await assert.rejects(
      client.audio.transcriptions.create({ model: 'whisper-1', file: await file(), language: 'xx' }),
      (err: InstanceType<typeof OpenAI.APIError>) => {
        assert.equal(err.status, 400);
        assert.equal((err.error as { code: string }).code, 'unsupported_option');
        return true;
      },
    );
  });

  it('gives word timestamps from the cross-attention', async () => {
    const verbose = await client.audio.transcriptions.create({
      model: 'whisper-1',
      file: await file(),
      response_format: 'verbose_json',
      language: 'en',
      timestamp_granularities: ['word', 'segment'],
    });
    const body = verbose as unknown as { text: string; duration: number; words: { word: string; start: number; end: number }[] };
    assert.ok(Array.isArray(body.words));
    assert.equal(body.words.map((w) => w.word).join(' '), body.text.split(/\s+/).filter(Boolean).join(' '));
    for (const w of body.words) assert.ok(0 <= w.start && w.start <= w.end && w.end <= body.duration);
  });

  it('detects the language of each piece of a long recording on its own window: one encoder window a piece', async () => {
    // flite's 16 kHz 16-bit WAV: its samples follow the 'data' chunk's 8-byte header.
    const samples = new Int16Array(speech.buffer.slice(speech.byteOffset + speech.indexOf('data') + 8, speech.byteOffset + speech.length));
    const long = new Int16Array(40 * 16_000); // the phrase, then a second of silence, over and over: cut at the pauses
    for (let at = 0; at + samples.length <= long.length; at += samples.length + 16_000) long.set(samples, at);
    const counts = async () => {
      const names = ['clips', 'windows', 'encoderWindows'];
      const values = await Promise.all(
        names.map((name) => server.metric('voxmux_instance_engine_events_total', { model: 'whisper', name })),
      );
      return Object.fromEntries(names.map((name, i) => [name, values[i]!]));
    };
    // The engine's counts reach /metrics with the heartbeats: wait until they stop changing (and, after the
    // call, until they have changed: a heartbeat may come late on a busy machine).
    const settled = async (changedFrom?: string) => {
      let last = JSON.stringify(await counts());
      for (const until = Date.now() + 20_000; Date.now() < until;) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        const now = JSON.stringify(await counts());
        if (now === last && now !== changedFrom) return now;
        last = now;
      }
      throw new Error(`the engine's counts did not settle${changedFrom === undefined ? '' : ' on new values'} in 20 s: ${last}`);
    };
    const beforeText = await settled();
    const before = JSON.parse(beforeText) as Record<string, number>;
    const result = await client.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(pcm16Wav(long), 'long.wav') });
    assert.equal(typeof result.text, 'string');
    const after = JSON.parse(await settled(beforeText)) as Record<string, number>;
    const [clips, windows, encoderWindows] = ['clips', 'windows', 'encoderWindows'].map((name) => after[name]! - before[name]!);
    assert.ok(clips! >= 2, `the recording was cut into pieces: ${clips} clips`);
    assert.equal(windows, clips, 'each piece is one decode window');
    assert.equal(encoderWindows, windows, 'no second window for the language detection of a piece');
  });
});
