import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import {
  AUDIO_FIXTURES,
  FIXTURE_AMPLITUDE,
  FIXTURE_DURATION_MS,
  FIXTURE_TONE_HZ,
  generateAudioFixtures,
} from '../../fixtures/audio/generate.js';
import type { Clock } from '../../../src/core/clock.js';
import { isServiceError } from '../../../src/core/errors.js';
import { createAudioDecoder, type AudioDecoderOptions } from '../../../src/gateway/audio/index.js';

interface ManualTimer {
  delayMs: number;
  fire(): void;
}

/** A Clock whose timers fire only when a test fires them. */
function createManualClock(): { clock: Clock; nextTimer(): Promise<ManualTimer> } {
  const ready: ManualTimer[] = [];
  const waiters: ((timer: ManualTimer) => void)[] = [];
  const clock: Clock = {
    nowMs: () => 0,
    wallMs: () => 0,
    setTimeout(callback, delayMs) {
      let isCancelled = false;
      const timer = { delayMs, fire: () => (isCancelled ? undefined : callback()) };
      const waiter = waiters.shift();
      if (waiter === undefined) ready.push(timer);
      else waiter(timer);
      return { cancel: () => (isCancelled = true) };
    },
  };
  return {
    clock,
    nextTimer: () =>
      new Promise((resolve) => {
        const timer = ready.shift();
        if (timer === undefined) waiters.push(resolve);
        else resolve(timer);
      }),
  };
}

let workDir = '';
let decodeDir = '';
let fixtures = new Map<string, string>();
const fakes = {
  hang: '#!/bin/sh\nexec sleep 30\n',
  zeros: '#!/bin/sh\nexec cat /dev/zero\n',
  partialSample: "#!/bin/sh\nprintf 'abc'\n",
  silent: '#!/bin/sh\nexit 0\n',
  recordArguments: '#!/bin/sh\nprintf \'%s\\n\' "$@" > "$(dirname "$0")/arguments.txt"\nexit 1\n',
};

before(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'voxmux-ffmpeg-test-'));
  decodeDir = join(workDir, 'decode');
  await mkdir(decodeDir);
  fixtures = await generateAudioFixtures(join(workDir, 'fixtures'));
  await writeFile(join(workDir, 'placeholder'), '');
  for (const [name, script] of Object.entries(fakes)) {
    await writeFile(join(workDir, name), script);
    await chmod(join(workDir, name), 0o755);
  }
});

after(async () => {
  await rm(workDir, { recursive: true, force: true });
});

afterEach(async () => {
  // Every decode, whatever its outcome, removes its temporary input.
  assert.deepEqual(await readdir(decodeDir), []);
});

async function fixture(file: string): Promise<Uint8Array> {
  const path = fixtures.get(file);
  assert.ok(path !== undefined, `fixture ${file} was not generated`);
  return readFile(path);
}

function decoderWith(overrides: Partial<AudioDecoderOptions> = {}, clock?: Clock) {
  const options = { maxDurationMs: 60_000, ffmpegPath: 'ffmpeg', tmpDir: decodeDir, ffmpegTimeoutMs: 20_000, ...overrides };
  return clock === undefined ? createAudioDecoder(options) : createAudioDecoder(options, { clock });
}

async function rejectsWithCode(promise: Promise<unknown>, code: string, messagePart?: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(isServiceError(error), `expected a ServiceError: got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (messagePart !== undefined) assert.ok(error.message.includes(messagePart), error.message);
    return true;
  });
}

/** Amplitude of the fixture tone in the decoded 16-bit samples (as floats), and what is left once it is removed. */
function measureTone(pcm: Int16Array): { amplitude: number; residualRms: number } {
  const samples = Float32Array.from(pcm, (value) => value / 32768);
  const from = 1600; // skip codec start-up
  const to = samples.length - 1600;
  let sinSum = 0;
  let cosSum = 0;
  for (let i = from; i < to; i += 1) {
    const phase = (2 * Math.PI * FIXTURE_TONE_HZ * i) / 16000;
    sinSum += (samples[i] ?? 0) * Math.sin(phase);
    cosSum += (samples[i] ?? 0) * Math.cos(phase);
  }
  const count = to - from;
  const a = (2 * sinSum) / count;
  const b = (2 * cosSum) / count;
  let residual = 0;
  for (let i = from; i < to; i += 1) {
    const phase = (2 * Math.PI * FIXTURE_TONE_HZ * i) / 16000;
    residual += ((samples[i] ?? 0) - a * Math.sin(phase) - b * Math.cos(phase)) ** 2;
  }
  return { amplitude: Math.hypot(a, b), residualRms: Math.sqrt(residual / count) };
}

describe('createAudioDecoder: compressed formats through ffmpeg', () => {
  for (const spec of AUDIO_FIXTURES) {
    it(`decodes ${spec.file} as ${spec.format}: 2.5 s of a 440 Hz tone at 16 kHz mono`, async () => {
      const decoder = decoderWith();
      const audio = await decoder.decode(await fixture(spec.file));
      assert.equal(audio.format, spec.format);
      assert.equal(audio.sampleRateHz, 16000);
      assert.equal(audio.sourceSampleRateHz, spec.sourceSampleRateHz);
      assert.equal(audio.sourceChannels, 2);
      // Encoder priming and padding that the container does not trim add a few tens of ms.
      assert.ok(Math.abs(audio.durationMs - FIXTURE_DURATION_MS) <= 60, `duration ${audio.durationMs} ms`);
      const tone = measureTone(audio.samples);
      // Both channels carry the same tone, so the channel mean has the fixture's amplitude.
      assert.ok(Math.abs(tone.amplitude - FIXTURE_AMPLITUDE) < 0.05 * FIXTURE_AMPLITUDE, `amplitude ${tone.amplitude}`);
      assert.ok(tone.residualRms < 0.05 * FIXTURE_AMPLITUDE, `residual ${tone.residualRms}`);
      // 16-bit PCM: ffmpeg clips a lossy decoder's overshoot of full scale.
      assert.ok(audio.samples instanceof Int16Array);
    });
  }

  it('the MP4 fixtures really differ in where the moov box sits', async () => {
    const boxOrder = async (file: string) => {
      const text = Buffer.from(await fixture(file)).toString('latin1');
      return text.indexOf('moov') < text.indexOf('mdat') ? 'moov first' : 'moov last';
    };
    assert.equal(await boxOrder('tone-faststart.m4a'), 'moov first');
    assert.equal(await boxOrder('tone-moov-at-end.m4a'), 'moov last');
  });

  it('the streamed WAV fixture really has unknown sizes, and decodes in process to full length', async () => {
    const bytes = await fixture('tone-streamed.wav');
    assert.equal(Buffer.from(bytes).readUInt32LE(4), 0xffffffff);
    // No ffmpeg: a PCM WAV never leaves the process.
    const audio = await decoderWith({ ffmpegPath: '/nonexistent/ffmpeg' }).decode(bytes);
    assert.equal(audio.durationMs, FIXTURE_DURATION_MS);
  });

  it('decodes several files at once', async () => {
    const decoder = decoderWith();
    const files = ['tone.mp3', 'tone.opus', 'tone-moov-at-end.m4a', 'tone.flac'];
    const results = await Promise.all(files.map(async (file) => decoder.decode(await fixture(file))));
    assert.deepEqual(
      results.map((audio) => audio.format),
      ['mp3', 'ogg-opus', 'm4a', 'flac'],
    );
  });

  it('fails audio_too_long when the decoded audio passes maxDurationMs', async () => {
    const decoder = decoderWith({ maxDurationMs: 1000 });
    await rejectsWithCode(decoder.decode(await fixture('tone.mp3')), 'audio_too_long');
    await rejectsWithCode(decoder.decode(await fixture('tone.webm')), 'audio_too_long');
  });

  it('fails audio_too_long for FLAC from STREAMINFO, before starting ffmpeg', async () => {
    const decoder = decoderWith({ maxDurationMs: 1000, ffmpegPath: '/nonexistent/ffmpeg' });
    await rejectsWithCode(decoder.decode(await fixture('tone.flac')), 'audio_too_long');
  });

  it('passes the sniffed demuxer, the input by path and the duration cap to ffmpeg', async () => {
    const decoder = decoderWith({ ffmpegPath: join(workDir, 'recordArguments'), maxDurationMs: 30_000 });
    await rejectsWithCode(decoder.decode(await fixture('tone-moov-at-end.m4a')), 'invalid_audio', 'exited with code 1');
    const args = (await readFile(join(workDir, 'arguments.txt'), 'utf8')).trim().split('\n');
    const valueAfter = (flag: string): string | undefined => args[args.indexOf(flag) + 1];
    assert.equal(valueAfter('-f'), 'mov');
    assert.match(valueAfter('-i') ?? '', /^file:.*voxmux-audio-/);
    assert.equal(valueAfter('-t'), '31.000');
    assert.equal(valueAfter('-ac'), '1');
    assert.equal(valueAfter('-ar'), '16000');
    assert.deepEqual(args.slice(-3), ['-f', 's16le', '-']);
  });

  it('reports ffmpeg errors as invalid_audio, with its message and without the temporary path', async () => {
    const whole = await fixture('tone-moov-at-end.m4a');
    const decoder = decoderWith();
    await assert.rejects(decoder.decode(whole.subarray(0, 4000)), (error: unknown) => {
      assert.ok(isServiceError(error));
      assert.equal(error.code, 'invalid_audio');
      assert.match(error.message, /moov atom not found/);
      assert.ok(!error.message.includes(decodeDir), error.message);
      return true;
    });
  });

  it('kills ffmpeg and fails invalid_audio when ffmpegTimeoutMs passes', async () => {
    const manual = createManualClock();
    const decoder = decoderWith({ ffmpegPath: join(workDir, 'hang'), ffmpegTimeoutMs: 5000 }, manual.clock);
    const pending = decoder.decode(await fixture('tone.mp3'));
    const timer = await manual.nextTimer();
    assert.equal(timer.delayMs, 5000);
    timer.fire();
    await rejectsWithCode(pending, 'invalid_audio', 'did not finish within 5000 ms');
  });

  it('kills ffmpeg and rejects with the signal reason when the signal aborts', async () => {
    const manual = createManualClock();
    const decoder = decoderWith({ ffmpegPath: join(workDir, 'hang') }, manual.clock);
    const controller = new AbortController();
    const pending = decoder.decode(await fixture('tone.mp3'), controller.signal);
    await manual.nextTimer(); // ffmpeg is running
    const reason = new Error('client disconnected');
    controller.abort(reason);
    await assert.rejects(pending, (error) => error === reason);
  });

  it('stops reading and kills ffmpeg once its output passes the duration cap', async () => {
    const decoder = decoderWith({ ffmpegPath: join(workDir, 'zeros'), maxDurationMs: 2000 });
    await rejectsWithCode(decoder.decode(await fixture('tone.mp3')), 'audio_too_long');
  });

  it('fails invalid_audio when ffmpeg output is not a whole number of float32 samples', async () => {
    const decoder = decoderWith({ ffmpegPath: join(workDir, 'partialSample') });
    await rejectsWithCode(decoder.decode(await fixture('tone.mp3')), 'invalid_audio', 'not a whole number of samples');
  });

  it('fails empty_audio when ffmpeg succeeds without output', async () => {
    const decoder = decoderWith({ ffmpegPath: join(workDir, 'silent') });
    await rejectsWithCode(decoder.decode(await fixture('tone.mp3')), 'empty_audio');
  });

  it('fails internal_error when ffmpeg cannot be started', async () => {
    const decoder = decoderWith({ ffmpegPath: join(workDir, 'no-such-ffmpeg') });
    await rejectsWithCode(decoder.decode(await fixture('tone.mp3')), 'internal_error');
    const notExecutable = decoderWith({ ffmpegPath: join(workDir, 'placeholder') });
    await rejectsWithCode(notExecutable.decode(await fixture('tone.ogg')), 'internal_error');
  });
});
