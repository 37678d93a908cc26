import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTurnDetector, type TurnEvent } from './turn-detector.js';

const FRAME_MS = 32;

function run(
  probabilities: number[],
  policy = { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500 },
): (TurnEvent & { frame: number })[] {
  const detector = createTurnDetector(policy);
  const out: (TurnEvent & { frame: number })[] = [];
  probabilities.forEach((p, frame) => {
    const event = detector.push(p, { frameStartMs: frame * FRAME_MS, frameMs: FRAME_MS });
    if (event !== undefined) out.push({ ...event, frame });
  });
  return out;
}

describe('TurnDetector (server VAD turn taking)', () => {
  it('starts speech at the first frame at the threshold, reported prefixPaddingMs earlier', () => {
    const events = run([...Array<number>(20).fill(0.1), 0.5, 0.9]);
    assert.deepEqual(events, [{ type: 'speechStarted', audioStartMs: 20 * FRAME_MS - 300, frame: 20 }]);
  });

  it('never reports a start before the session began', () => {
    assert.deepEqual(run([0.9]), [{ type: 'speechStarted', audioStartMs: 0, frame: 0 }]);
  });

  it('stops once silence has lasted silenceDurationMs, reported where the silence began', () => {
    // 16 silent frames of 32 ms = 512 ms >= 500 ms; 15 frames = 480 ms is not enough.
    const events = run([0.9, 0.9, ...Array<number>(16).fill(0.1)]);
    assert.deepEqual(events.at(-1), { type: 'speechStopped', audioEndMs: 2 * FRAME_MS, frame: 17 });
    assert.equal(run([0.9, 0.9, ...Array<number>(15).fill(0.1)]).length, 1);
  });

  it('a short pause inside speech does not end the turn', () => {
    const events = run([0.9, ...Array<number>(10).fill(0.1), 0.9, ...Array<number>(10).fill(0.1)]);
    assert.deepEqual(
      events.map((e) => e.type),
      ['speechStarted'],
    );
  });

  it('reset forgets a turn in progress', () => {
    const detector = createTurnDetector({ threshold: 0.5, prefixPaddingMs: 0, silenceDurationMs: 100 });
    detector.push(0.9, { frameStartMs: 0, frameMs: FRAME_MS });
    assert.equal(detector.isSpeaking, true);
    detector.reset();
    assert.equal(detector.isSpeaking, false);
    assert.deepEqual(detector.push(0.9, { frameStartMs: 32, frameMs: FRAME_MS }), { type: 'speechStarted', audioStartMs: 32 });
  });
});
