/** A long recording synthesized from flite sentences with known pauses, for the pieces tests and bench. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fliteWav, pcm16Wav } from './audio.js';

export interface SpokenSentence {
  text: string;
  /** Where its speech starts and ends in the recording (flite's own leading and trailing silence excluded), in seconds. */
  startS: number;
  endS: number;
}

export interface LongRecording {
  samples: Int16Array;
  sentences: SpokenSentence[];
  /** A 16 kHz mono PCM16 WAV of the samples. */
  wav: Buffer;
}

/** The samples of a 16 kHz mono PCM16 WAV that flite wrote (44-byte header). */
function pcmOf(path: string): Int16Array {
  const bytes = readFileSync(path);
  const data = bytes.subarray(44);
  return new Int16Array(data.buffer.slice(data.byteOffset, data.byteOffset + (data.byteLength & ~1)));
}

/** First and last sample above a small amplitude: where flite's speech is. */
function speechExtent(pcm: Int16Array): [number, number] {
  let first = 0;
  while (first < pcm.length && Math.abs(pcm[first]!) < 200) first++;
  let last = pcm.length - 1;
  while (last > first && Math.abs(pcm[last]!) < 200) last--;
  return [first, last + 1];
}

/** Sentences cycled, each followed by `pauseS` of silence, until `durationS` is filled. */
export function longRecording(options: { texts: readonly string[]; durationS: number; pauseS: number; dir: string }): LongRecording {
  const spoken = options.texts.map((text, i) => {
    const pcm = pcmOf(fliteWav(text, join(options.dir, `sentence-${i}.wav`)));
    const [from, to] = speechExtent(pcm);
    return { text, pcm: pcm.subarray(from, to) };
  });
  const total = Math.round(options.durationS * 16000);
  const pause = Math.round(options.pauseS * 16000);
  const samples = new Int16Array(total);
  const sentences: SpokenSentence[] = [];
  let at = pause;
  for (let i = 0; ; i++) {
    const { text, pcm } = spoken[i % spoken.length]!;
    if (at + pcm.length + pause > total) break;
    samples.set(pcm, at);
    sentences.push({ text, startS: at / 16000, endS: (at + pcm.length) / 16000 });
    at += pcm.length + pause;
  }
  return { samples, sentences, wav: pcm16Wav(samples) };
}

/** Reads a server-sent event stream: each event's arrival time (from `startMs`) and its data. */
export async function readEvents(res: Response, startMs: number): Promise<{ atMs: number; data: Record<string, unknown> }[]> {
  const events: { atMs: number; data: Record<string, unknown> }[] = [];
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    pending += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = pending.indexOf('\n\n')) !== -1) {
      const block = pending.slice(0, end);
      pending = pending.slice(end + 2);
      if (block.startsWith('data: '))
        events.push({ atMs: performance.now() - startMs, data: JSON.parse(block.slice(6)) as Record<string, unknown> });
    }
  }
  return events;
}
