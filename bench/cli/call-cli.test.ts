import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { callNotes } from './call-cli.js';
import { planTurn } from './call-workload.js';
import type { BenchResults, StepResult } from './report.js';

const step = (level: number, requestsPerSecond: number) => ({ level, requestsPerSecond }) as StepResult;

function results(capacity: BenchResults['capacity'], gpuHourUsd?: number): BenchResults {
  return {
    steps: [step(4, 0.4), step(8, 0.8)],
    options: { gpus: 2, ...(gpuHourUsd === undefined ? {} : { gpuHourUsd }) },
    ...(capacity === undefined ? {} : { capacity }),
  } as BenchResults;
}

const totals = { turns: 10, callsOpened: 3, wordErrors: 3, words: 60, llmTurns: 10, promptTokens: 1000, completionTokens: 200 };
const prices = { callMinutes: [5, 20], llmUsdPerMillion: { input: 1, output: 10 } };

describe('callNotes (#19)', () => {
  it('prices a call as its share of the GPUs at the calls held, plus its turns’ LLM tokens', () => {
    const notes = callNotes(results({ basis: 'slo', level: 8, gpus: 2 }, 3), totals, prices);
    assert.equal(notes[0], "Transcripts of the callers' speech: WER 5.0 % over 10 turns (3 calls opened)");
    assert.equal(notes[1], 'Calls held at the SLO: 8 concurrent call(s) on 2 GPU(s)');
    // GPU: 2 GPUs x $3/h x 5/60 h / 8 calls = $0.0625. LLM: 6 turns a minute (0.8 turns/s over 8 calls)
    // x (100 x $1 + 20 x $10) / 1e6 a turn x 5 minutes = $0.009.
    assert.equal(
      notes[2],
      'Cost of a 5-minute call: GPU $0.0625 (2 GPU(s) at $3/h shared by 8 calls), LLM $0.00900 (6.0 turns a minute), total $0.0715',
    );
    assert.match(notes[3]!, /^Cost of a 20-minute call: GPU \$0\.2500 .* LLM \$0\.0360 .* total \$0\.2860$/);
  });

  it('says so when no level met the SLO, or when the GPU price is unknown', () => {
    assert.deepEqual(callNotes(results({ basis: 'peak', level: 8, gpus: 2 }), totals, prices).slice(1), [
      'Calls held at the SLO: none of the levels met it',
    ]);
    assert.match(
      callNotes(results({ basis: 'slo', level: 4, gpus: 2 }), totals, prices)[2]!,
      /GPU share unknown \(no --gpu-hour-usd\), LLM/,
    );
  });
});

describe('planTurn (#19)', () => {
  it('draws the same utterance and pause for the same seed and turn, within the pause range', () => {
    const utterances = ['a', 'b', 'c'].map((text) => ({ voice: 'v', text, pcm: Buffer.alloc(2) }));
    const options = { utterances, seed: 7, thinkMs: [100, 200] as const };
    const turns = Array.from({ length: 50 }, (_, i) => planTurn(options, i));
    assert.deepEqual(
      turns,
      Array.from({ length: 50 }, (_, i) => planTurn(options, i)),
    );
    assert.ok(turns.every((t) => t.thinkMs >= 100 && t.thinkMs <= 200));
    assert.equal(new Set(turns.map((t) => t.utterance.text)).size, 3);
  });
});
