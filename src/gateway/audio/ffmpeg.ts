/**
 * Decodes compressed audio by running ffmpeg on a temporary copy of the upload and reading raw
 * 16 kHz mono float32 from its stdout.
 *
 * NOTE: this is the one file besides supervisor/spawn.ts that uses child_process. Decoding
 * untrusted media in a separate, short-lived process is a security boundary: a demuxer or codec
 * bug triggered by a hostile file crashes or hangs ffmpeg, which is killed and reported, instead
 * of corrupting the gateway. The process is not a model instance and has no lifecycle for the
 * supervisor to manage, so it is spawned here rather than through it.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../../core/clock.js';
import { errors } from '../../core/error-catalog.js';
import { isServiceError } from '../../core/errors.js';
import { DECODED_SAMPLE_RATE_HZ, FFMPEG_DEMUXER, type AudioFormat } from './audio-format.js';

export interface FfmpegDecodeOptions {
  format: AudioFormat;
  ffmpegPath: string;
  /** Directory for the temporary input file. */
  tmpDir: string;
  /** ffmpeg is killed after this long, and the decode fails. */
  timeoutMs: number;
  /** Output beyond this duration (plus a margin) is not read: ffmpeg stops or is killed. */
  maxDurationMs: number;
  signal?: AbortSignal | undefined;
  clock: Clock;
}

export interface FfmpegDecoded {
  /** 16 kHz mono samples in [-1, 1]. */
  samples: Int16Array;
  /** From ffmpeg's description of the input stream; 0 when it did not say. */
  sourceSampleRateHz: number;
  sourceChannels: number;
}

/**
 * ffmpeg decodes up to maxDurationMs plus this much, so that audio just over the limit is seen
 * to be over it, without decoding the rest of a long file.
 */
const OVER_LIMIT_MARGIN_MS = 1000;
/** stderr kept for messages and stream details: its first and last parts. */
const STDERR_KEEP_BYTES = 16 * 1024;
const MESSAGE_MAX_CHARS = 300;

/**
 * Decodes `bytes` (already sniffed as `format`) to 16 kHz mono.
 *
 * @throws invalid_audio when ffmpeg fails, times out or produces a partial sample
 * @throws empty_audio when it produces no samples
 * @throws audio_too_long when the output runs past maxDurationMs plus the margin (the caller
 *   compares the exact length with maxDurationMs)
 * @throws internal_error when ffmpeg cannot be started or the temporary file cannot be written
 * @throws signal.reason when the signal aborts (ffmpeg is killed first)
 */
export async function decodeWithFfmpeg(bytes: Uint8Array, options: FfmpegDecodeOptions): Promise<FfmpegDecoded> {
  options.signal?.throwIfAborted();
  const inputPath = join(options.tmpDir, `voxmux-audio-${randomUUID()}`);
  try {
    try {
      // 'wx': never follow or overwrite something already at that path; 0600: the upload is private.
      await writeFile(inputPath, bytes, { flag: 'wx', mode: 0o600 });
    } catch (cause) {
      throw errors.internal({ cause });
    }
    return await runFfmpeg(inputPath, options);
  } finally {
    await rm(inputPath, { force: true });
  }
}

function ffmpegArguments(inputPath: string, options: FfmpegDecodeOptions): string[] {
  const limitSeconds = (options.maxDurationMs + OVER_LIMIT_MARGIN_MS) / 1000;
  return [
    '-nostdin',
    '-hide_banner',
    '-nostats',
    // 'level' tags each line ([error], [info]) so error lines can be told from stream details.
    '-loglevel',
    'level+info',
    '-protocol_whitelist',
    'file',
    '-f',
    FFMPEG_DEMUXER[options.format],
    // By path, not a pipe, so MP4 files with the moov box at the end can be read.
    '-i',
    `file:${inputPath}`,
    '-map',
    '0:a:0',
    '-vn',
    '-sn',
    '-dn',
    '-ac',
    '1',
    '-ar',
    String(DECODED_SAMPLE_RATE_HZ),
    // swresample's default stereo-to-mono matrix is 0.707 per channel, which can clip; capping
    // the matrix sum at 1 makes it the channel mean, as the WAV path computes it.
    '-rematrix_maxval',
    '1.0',
    '-t',
    limitSeconds.toFixed(3),
    // ffmpeg converts to 16-bit with clipping (lossy decoders overshoot full scale).
    '-f',
    's16le',
    '-',
  ];
}

type Outcome = { kind: 'exited'; exitCode: number | null; signal: NodeJS.Signals | null } | { kind: 'failed'; error: unknown };

function runFfmpeg(inputPath: string, options: FfmpegDecodeOptions): Promise<FfmpegDecoded> {
  return new Promise((resolve, reject) => {
    const maxOutputSamples = Math.ceil(((options.maxDurationMs + OVER_LIMIT_MARGIN_MS) * DECODED_SAMPLE_RATE_HZ) / 1000);
    const maxOutputBytes = (maxOutputSamples + 1) * 2;
    const child = spawn(options.ffmpegPath, ffmpegArguments(inputPath, options), {
      stdio: ['ignore', 'pipe', 'pipe'],
      windowsHide: true,
    });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    const stderr = createStderrKeeper(STDERR_KEEP_BYTES);
    /** Set when we kill ffmpeg: the reason the decode fails, whatever ffmpeg's exit says. */
    let killReason: unknown;
    let isSettled = false;

    const kill = (reason: unknown): void => {
      if (killReason !== undefined) return;
      killReason = reason;
      child.kill('SIGKILL');
    };
    const timer = options.clock.setTimeout(() => {
      kill(errors.invalidAudio({ reason: `decoding did not finish within ${options.timeoutMs} ms` }));
    }, options.timeoutMs);
    const onAbort = (): void => kill(options.signal?.reason ?? new Error('Aborted'));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    // An abort during the temporary-file write fired no event for this listener.
    if (options.signal?.aborted === true) onAbort();

    child.stdout.on('data', (chunk: Buffer) => {
      if (killReason !== undefined) return;
      stdoutBytes += chunk.length;
      if (stdoutBytes > maxOutputBytes) {
        // -t should have stopped it; a misbehaving decoder is cut off here regardless.
        const durationMs = (stdoutBytes / 2 / DECODED_SAMPLE_RATE_HZ) * 1000;
        kill(errors.audioTooLong({ durationMs, maxAudioDurationMs: options.maxDurationMs }));
        return;
      }
      stdout.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));

    const settle = (outcome: Outcome): void => {
      if (isSettled) return;
      isSettled = true;
      timer.cancel();
      options.signal?.removeEventListener('abort', onAbort);
      try {
        resolve(interpret(outcome));
      } catch (error) {
        reject(error);
      }
    };
    const interpret = (outcome: Outcome): FfmpegDecoded => {
      if (killReason !== undefined) throw killReason;
      if (outcome.kind === 'failed') throw errors.internal({ cause: outcome.error });
      // The temporary path is ours, not the client's business.
      const log = stderr.text().replaceAll(`file:${inputPath}`, 'input').replaceAll(inputPath, 'input');
      if (outcome.exitCode !== 0) {
        const how = outcome.exitCode === null ? `was killed by ${outcome.signal ?? 'a signal'}` : `exited with code ${outcome.exitCode}`;
        throw errors.invalidAudio({ reason: `ffmpeg ${how}: ${errorSummary(log)}`, cause: new Error(log) });
      }
      if (stdoutBytes % 2 !== 0) {
        throw errors.invalidAudio({ reason: `ffmpeg produced ${stdoutBytes} bytes, not a whole number of samples` });
      }
      if (stdoutBytes === 0) throw errors.emptyAudio();
      return { samples: toPcm16(stdout, stdoutBytes), ...sourceStream(log) };
    };

    // 'close' comes after the exit and after stdout and stderr have been read to their end.
    child.on('close', (exitCode, signal) => settle({ kind: 'exited', exitCode, signal }));
    child.on('error', (error) => {
      // A spawn failure emits 'error' and may never emit 'close'.
      if (child.pid === undefined) settle({ kind: 'failed', error });
      else kill(isServiceError(error) ? error : errors.internal({ cause: error }));
    });
  });
}

function toPcm16(chunks: readonly Buffer[], totalBytes: number): Int16Array {
  // One fresh, aligned buffer: chunk offsets need not be 2-byte aligned.
  const samples = new Int16Array(totalBytes / 2);
  const bytes = new Uint8Array(samples.buffer);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return samples;
}

/** The error lines of an ffmpeg log, made safe and short for a client-facing message. */
function errorSummary(log: string): string {
  const lines = log.split('\n').map((line) => line.trim());
  const errorLines = lines.filter((line) => /\[(error|fatal|panic)\]/.test(line));
  const chosen = errorLines.length > 0 ? errorLines : lines.filter((line) => line.length > 0).slice(-3);
  const text = chosen
    // Drop the "[mp3 @ 0x55c9a0b39900]" context (a heap address) and the level tag.
    .map((line) => line.replace(/\[[^\]]*@ 0x[0-9a-f]+\]\s*/g, '').replace(/\[(error|fatal|panic|warning|info)\]\s*/g, ''))
    .join('; ')
    .replace(/[^\x20-\x7e]/g, '?');
  if (text.length === 0) return 'no error message';
  return text.length > MESSAGE_MAX_CHARS ? `${text.slice(0, MESSAGE_MAX_CHARS)}...` : text;
}

/** Reads rate and channels from the input dump: "Stream #0:0: Audio: mp3, 44100 Hz, stereo, fltp". */
function sourceStream(log: string): { sourceSampleRateHz: number; sourceChannels: number } {
  const inputDump = log.split(/\n[^\n]*Output #0/)[0] ?? '';
  const match = /Stream #0:\d+[^:]*: Audio: [^\n]*?(\d+) Hz, ([^,\n]+)/.exec(inputDump);
  if (match === null) return { sourceSampleRateHz: 0, sourceChannels: 0 };
  return { sourceSampleRateHz: Number(match[1]), sourceChannels: channelCount(match[2] ?? '') };
}

const LAYOUT_CHANNELS: Readonly<Record<string, number>> = {
  mono: 1,
  stereo: 2,
  '2.1': 3,
  '3.0': 3,
  '3.0(back)': 3,
  '4.0': 4,
  quad: 4,
  'quad(side)': 4,
  '3.1': 4,
  '5.0': 5,
  '5.0(side)': 5,
  '4.1': 5,
  '5.1': 6,
  '5.1(side)': 6,
  '6.0': 6,
  '6.0(front)': 6,
  hexagonal: 6,
  '6.1': 7,
  '6.1(back)': 7,
  '6.1(front)': 7,
  '7.0': 7,
  '7.0(front)': 7,
  '7.1': 8,
  '7.1(wide)': 8,
  '7.1(wide-side)': 8,
  octagonal: 8,
  downmix: 2,
};

function channelCount(layout: string): number {
  const trimmed = layout.trim();
  const counted = /^(\d+) channels/.exec(trimmed);
  if (counted !== null) return Number(counted[1]);
  return LAYOUT_CHANNELS[trimmed] ?? 0;
}

/** Keeps the first and the last `keepBytes` of a stream, dropping the middle of a long one. */
function createStderrKeeper(keepBytes: number): { push(chunk: Buffer): void; text(): string } {
  let head = Buffer.alloc(0);
  let tail = Buffer.alloc(0);
  let isTruncated = false;
  return {
    push(chunk) {
      if (head.length < keepBytes) {
        const room = keepBytes - head.length;
        head = Buffer.concat([head, chunk.subarray(0, room)]);
        chunk = chunk.subarray(room);
      }
      if (chunk.length === 0) return;
      tail = Buffer.concat([tail, chunk]);
      if (tail.length > keepBytes) {
        tail = tail.subarray(tail.length - keepBytes);
        isTruncated = true;
      }
    },
    text() {
      return `${head.toString('utf8')}${isTruncated ? '\n...\n' : ''}${tail.toString('utf8')}`;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// encoding (speech synthesis)

/** The compressed formats ffmpeg encodes for speech, each in the container OpenAI sends it in. */
export type FfmpegEncodedFormat = 'mp3' | 'opus' | 'aac' | 'flac';

/**
 * Encoder arguments by format. Every muxer flushes each packet as it is written (and Ogg pages
 * are cut every 60 ms instead of every second), so encoded audio leaves while synthesis goes on.
 */
const ENCODER_ARGUMENTS: Readonly<Record<FfmpegEncodedFormat, readonly string[]>> = {
  mp3: ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3'],
  opus: ['-c:a', 'libopus', '-b:a', '32k', '-application', 'voip', '-page_duration', '60000', '-f', 'ogg'],
  aac: ['-c:a', 'aac', '-b:a', '64k', '-f', 'adts'],
  flac: ['-c:a', 'flac', '-f', 'flac'],
};

export interface FfmpegEncoderOptions {
  format: FfmpegEncodedFormat;
  ffmpegPath: string;
  /** Rate of the 16-bit mono PCM written to the encoder. */
  sampleRateHz: number;
  /** Receives the encoded bytes in order, as ffmpeg writes them. */
  onData: (bytes: Uint8Array) => void;
}

/** One long-lived ffmpeg that encodes a call's PCM as it arrives (see startFfmpegEncoder). */
export interface FfmpegEncoder {
  /**
   * Writes 16-bit PCM; resolves when ffmpeg can take more (its stdin drained).
   * @throws internal_error when ffmpeg failed
   */
  write(samples: Int16Array): Promise<void>;
  /**
   * Ends the input; resolves once ffmpeg exited and every encoded byte reached onData.
   * @throws internal_error when ffmpeg failed
   */
  end(): Promise<void>;
  /** Kills ffmpeg now (the call failed or its client left); nothing more reaches onData. */
  destroy(): void;
}

/**
 * Starts ffmpeg as a streaming encoder: raw PCM on stdin, the container's bytes on stdout. It runs
 * on the gateway's own output (synthesized audio), so it needs no timeout of its own: the call's
 * deadline and the client's disconnect end it through destroy().
 */
export function startFfmpegEncoder(options: FfmpegEncoderOptions): FfmpegEncoder {
  const args = [
    '-hide_banner',
    '-nostats',
    '-loglevel',
    'error',
    // No probing: ffmpeg would otherwise read seconds of input (the default analyzeduration is
    // 5 s) before it encodes the first frame. (Not `-fflags nobuffer`: it drops the packet read
    // while probing, the first 40 ms of the speech.)
    '-probesize',
    '32',
    '-analyzeduration',
    '0',
    '-f',
    's16le',
    '-ar',
    String(options.sampleRateHz),
    '-ac',
    '1',
    '-i',
    'pipe:0',
    ...ENCODER_ARGUMENTS[options.format],
    '-flush_packets',
    '1',
    'pipe:1',
  ];
  const child = spawn(options.ffmpegPath, args, { stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
  const stderr = createStderrKeeper(STDERR_KEEP_BYTES);
  let failure: unknown;
  let isDestroyed = false;
  const exited = new Promise<void>((resolve, reject) => {
    child.on('close', (exitCode, signal) => {
      if (failure === undefined && exitCode !== 0 && !isDestroyed) {
        const how = exitCode === null ? `was killed by ${signal ?? 'a signal'}` : `exited with code ${exitCode}`;
        failure = errors.internal({ cause: new Error(`ffmpeg ${how} while encoding ${options.format}: ${stderr.text()}`) });
      }
      if (failure !== undefined) reject(failure);
      else resolve();
    });
    child.on('error', (error) => {
      failure ??= errors.internal({ cause: error });
      // A spawn failure emits 'error' and may never emit 'close'.
      if (child.pid === undefined) reject(failure);
    });
  });
  exited.catch(() => undefined);
  child.stdout.on('data', (chunk: Buffer) => {
    if (!isDestroyed) options.onData(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  });
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  // An ffmpeg that died takes its stdin with it: EPIPE is reported through `exited`.
  child.stdin.on('error', () => undefined);
  return {
    async write(samples) {
      if (failure !== undefined) throw failure;
      if (isDestroyed || samples.length === 0) return;
      const bytes = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
      if (child.stdin.write(bytes)) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          child.stdin.off('drain', done);
          child.off('close', done);
          resolve();
        };
        child.stdin.on('drain', done);
        child.on('close', done);
      });
      if (failure !== undefined) throw failure;
    },
    async end() {
      child.stdin.end();
      await exited;
    },
    destroy() {
      if (isDestroyed) return;
      isDestroyed = true;
      child.stdin.destroy();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
