import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SequenceItem, SequenceResult } from '../../scheduler/index.js';
import { createEnergyDetector } from '../index.js';
import { diarizeRecording } from './diarize-recording.js';

/** An engine that takes items of at most `maxItemS` seconds: each item is one turn of speaker seq % 2, final with the next item. */
function fakeSequences(maxItemS: number) {
  const items: SequenceItem[] = [];
  const ended: string[] = [];
  let open: { start: number; end: number; speaker: number } | undefined;
  return {
    items,
    ended,
    sequences: {
      submit: async (_model: string, item: SequenceItem): Promise<SequenceResult> => {
        items.push(item);
        const lengthS = item.audio.length / 16_000;
        if (lengthS > maxItemS) throw new Error(`Expected a chunk of at most ${maxItemS} s: got ${lengthS} s`);
        const offset = item.options.chunkOffsetS as number;
        const turn = { start: offset, end: offset + lengthS, speaker: item.seq % 2 };
        const finalized = open === undefined ? [] : [open];
        open = turn;
        const output = item.isLast
          ? { finalized: [...finalized, turn], provisional: [], speakers: Math.min(2, item.seq + 1) }
          : { finalized, provisional: [turn], speakers: Math.min(2, item.seq + 1) };
        return { sessionId: item.sessionId, seq: item.seq, output };
      },
      end: async (_model: string, sessionId: string) => void ended.push(sessionId),
    },
  };
}

describe('diarizeRecording', () => {
  it("sends a recording longer than the engine's longest item as a session of items no longer than it", async () => {
    const { sequences, items, ended } = fakeSequences(60);
    const result = await diarizeRecording(
      {
        model: 'sortformer',
        wantsSpeechRegions: false,
        maxItemMs: 60_000,
        samples: new Int16Array(150 * 16_000),
        bounds: { maxSpeakers: 2 },
        submitOptions: { timeoutMs: 10_000 },
      },
      { sequences, voiceActivity: createEnergyDetector() },
    );
    assert.deepEqual(
      items.map((i) => [i.seq, i.audio.length / 16_000, i.isLast, i.options]),
      [
        [0, 60, false, { maxSpeakers: 2, chunkOffsetS: 0 }],
        [1, 60, false, { maxSpeakers: 2, chunkOffsetS: 60 }],
        [2, 30, true, { maxSpeakers: 2, chunkOffsetS: 120 }],
      ],
    );
    assert.equal(new Set(items.map((i) => i.sessionId)).size, 1);
    assert.deepEqual(ended, [items[0]!.sessionId]);
    assert.deepEqual(result, {
      segments: [
        { start: 0, end: 60, speaker: 'speaker_0' },
        { start: 60, end: 120, speaker: 'speaker_1' },
        { start: 120, end: 150, speaker: 'speaker_0' },
      ],
      speakers: 2,
    });
  });

  it('sends a recording as one is_last item when the engine takes items of any length, or it fits', async () => {
    for (const maxItemMs of [undefined, 150_000]) {
      const { sequences, items } = fakeSequences(Infinity);
      await diarizeRecording(
        {
          model: 'm',
          wantsSpeechRegions: false,
          ...(maxItemMs === undefined ? {} : { maxItemMs }),
          samples: new Int16Array(150 * 16_000),
          bounds: {},
          submitOptions: { timeoutMs: 10_000 },
        },
        { sequences, voiceActivity: createEnergyDetector() },
      );
      assert.deepEqual(
        items.map((i) => [i.seq, i.audio.length, i.isLast]),
        [[0, 150 * 16_000, true]],
      );
    }
  });
});
