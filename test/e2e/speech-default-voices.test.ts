/**
 * The default speech engine end to end: the built server with the default config's models
 * (debian-voices: flite, Festival, eSpeak NG; pocketsphinx for transcription), real ffmpeg
 * encoders, and the unmodified openai SDK. The voices are real speech, so the round trip through
 * the default recogniser is a check of what was said.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { Stream } from 'openai/streaming';
import { probeAudio, wordErrorRate } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

// The default models (src/config/schema.ts) with one instance each, to spare the test machine's cores.
const CONFIG = {
  models: {
    'voxmux-speech-cpu': { adapter: 'debian-voices', aliases: ['tts-1'], instances: 1 },
    'pocketsphinx-en-us': { adapter: 'pocketsphinx', aliases: ['whisper-1'], instances: 1 },
  },
};

const INPUT = 'The meeting starts at nine tomorrow morning. Please bring the report with you.';
const WORDS = INPUT.split(' ').length;
/** Plausible speech: 1.5 to 5 words a second. */
const MIN_SECONDS = WORDS / 5;
const MAX_SECONDS = WORDS / 1.5;

let server: RunningServer;
let client: OpenAI;
before(async () => {
  server = await startServer({ config: CONFIG, timeoutMs: 120_000 });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 60_000 });
});
after(async () => {
  await server?.stop('SIGTERM');
});

async function speak(voice: string, format: 'mp3' | 'opus' | 'aac' | 'flac' | 'wav' | 'pcm', input = INPUT): Promise<Buffer> {
  const response = await client.audio.speech.create({ model: 'tts-1', voice, input, response_format: format });
  return Buffer.from(await response.arrayBuffer());
}

describe('the default speech engine (debian-voices) with the openai SDK', () => {
  for (const format of ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const) {
    it(`alloy (flite slt) as ${format}: ffmpeg decodes mono audio of a plausible length for the text`, async () => {
      const probed = probeAudio(await speak('alloy', format), { rawPcm24k: format === 'pcm' });
      assert.equal(probed.channels, 1);
      if (format !== 'opus') assert.equal(probed.sampleRateHz, 24_000);
      assert.ok(
        probed.decodedSeconds > MIN_SECONDS && probed.decodedSeconds < MAX_SECONDS,
        `${format}: ${probed.decodedSeconds} s for ${WORDS} words`,
      );
    });
  }

  it('pcm is 24 kHz 16-bit mono: the same samples as the wav, whose header says 24,000 Hz', async () => {
    const wav = probeAudio(await speak('alloy', 'wav'));
    assert.equal(wav.sampleRateHz, 24_000);
    const pcm = await speak('alloy', 'pcm');
    assert.ok(Buffer.from(pcm).equals(Buffer.from(wav.samples.buffer, wav.samples.byteOffset, wav.samples.byteLength)));
  });

  for (const voice of ['alloy', 'coral', 'nova'] as const) {
    it(`${voice}: SSE deltas concatenate to the same pcm as the plain response (a deterministic voice)`, async () => {
      const plain = await speak(voice, 'pcm');
      const response = await client.audio.speech.create({
        model: 'tts-1',
        voice,
        input: INPUT,
        response_format: 'pcm',
        stream_format: 'sse',
      });
      const parts: Buffer[] = [];
      let doneCount = 0;
      const stream = Stream.fromSSEResponse<{ type: string; audio?: string }>(response, new AbortController());
      for await (const event of stream) {
        if (event.type === 'speech.audio.delta') parts.push(Buffer.from(event.audio ?? '', 'base64'));
        if (event.type === 'speech.audio.done') doneCount += 1;
      }
      assert.equal(doneCount, 1);
      assert.ok(Buffer.concat(parts).equals(plain), `${voice}: ${Buffer.concat(parts).length} streamed bytes against ${plain.length}`);
    });
  }

  it('coral (Festival HTS) with nothing to say ("...") answers an mp3 that decodes, not an ID3 tag alone', async () => {
    const probed = probeAudio(await speak('coral', 'mp3', '...'));
    assert.equal(probed.sampleRateHz, 24_000);
    assert.ok(probed.decodedSeconds >= 0.1, `${probed.decodedSeconds} s`);
  });

  for (const voice of ['alloy', 'nova'] as const) {
    it(`${voice}: a lone surrogate in the input (JSON "\\ud800") is read as a space, not a 500 from the engine`, async () => {
      const probed = probeAudio(await speak(voice, 'wav', '\ud800Hello there.'));
      assert.ok(probed.decodedSeconds > 0.3, `${probed.decodedSeconds} s`);
    });
  }

  it('the 13 OpenAI voices are 13 different voices', async () => {
    const names = ['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'nova', 'onyx', 'sage', 'shimmer', 'verse', 'marin', 'cedar'];
    const audio = await Promise.all(names.map((voice) => speak(voice, 'pcm', 'Good morning.')));
    for (const [i, a] of audio.entries()) {
      assert.ok(a.length > 0, names[i]);
      for (const [j, b] of audio.entries()) if (j > i) assert.ok(!a.equals(b), `${names[i]} and ${names[j]} sound the same`);
    }
  });

  it('what flite says, the default recogniser hears: WER <= 25 % on a synthesized wav sent back through transcriptions', async () => {
    const wav = await speak('alloy', 'wav');
    const transcript = await client.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(wav, 'speech.wav') });
    const { errors, words } = wordErrorRate(INPUT, transcript.text);
    assert.ok(errors / words <= 0.25, `WER ${errors}/${words}: "${transcript.text}"`);
  });

  it('GET /v1/audio/voices lists the 112 voices with the OpenAI names mapped to them', async () => {
    const res = await fetch(`${server.url}/v1/audio/voices?model=tts-1`);
    assert.equal(res.status, 200);
    const list = (await res.json()) as { data: { id: string; engine: string; sample_rate: number; aliases?: string[] }[] };
    assert.equal(list.data.length, 112);
    const slt = list.data.find((v) => v.id === 'flite-slt');
    assert.deepEqual([slt?.engine, slt?.sample_rate, slt?.aliases], ['debian-voices', 16_000, ['alloy']]);
    const aliased = list.data.flatMap((v) => v.aliases ?? []);
    assert.equal(aliased.length, 13);
  });
});
