import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeControllerMessage,
  decodeHostMessage,
  encodeMessage,
  encodeMessageBuffer,
  runSequenceBatchMessage,
  splitSequenceBody,
  type AnyMessage,
  type MessageOf,
} from './codec.js';
import { decodeFrame, encodeFrame, MessageTag } from './frame.js';

const roundTrip = (message: AnyMessage) => decodeFrame(encodeMessageBuffer(message));
const badFrame = { code: 'bad_frame' };

describe('protocol codec', () => {
  it('writes meta keys, nested ones too, in table order', () => {
    const bytes = encodeMessageBuffer({
      type: 'BatchResult',
      correlationId: 1,
      computeMs: 2,
      results: [{ transcript: null, error: { message: 'm', code: 'model_failed' }, requestId: 'r' }],
      batchId: 'b',
    });
    assert.equal(
      bytes.subarray(24).toString(),
      '{"batchId":"b","results":[{"requestId":"r","error":{"code":"model_failed","message":"m"},"transcript":null}],"computeMs":2}',
    );
  });

  it('rejects meta that breaks the schema, in both directions', () => {
    const heartbeat = encodeFrame({ type: MessageTag.Heartbeat, correlationId: 1, meta: { seq: -1 }, body: new Uint8Array(0) });
    assert.throws(() => decodeControllerMessage(decodeFrame(heartbeat)), badFrame);
    const extra = encodeFrame({ type: MessageTag.Heartbeat, correlationId: 1, meta: { seq: 1, x: 1 }, body: new Uint8Array(0) });
    assert.throws(() => decodeControllerMessage(decodeFrame(extra)), badFrame);
    const ack = encodeFrame({ type: MessageTag.Closed, correlationId: 1, meta: {}, body: new Uint8Array(1) });
    assert.throws(() => decodeHostMessage(decodeFrame(ack)), badFrame);
    assert.throws(
      () => encodeMessage({ type: 'Error', correlationId: 1, code: 'nope' as 'bad_frame', message: 'm', requestId: null }),
      badFrame,
    );
  });

  it('checks body lengths against the layout', () => {
    const meta = {
      batchId: 'b',
      requests: [
        {
          requestId: 'r',
          samples: 2,
          language: null,
          prompt: null,
          wordTimestamps: false,
          task: 'transcribe',
          temperature: 0,
          piece: false,
        },
      ],
    };
    const frame = (bytes: number) =>
      decodeFrame(encodeFrame({ type: MessageTag.RunBatch, correlationId: 1, meta, body: new Uint8Array(bytes) }));
    assert.equal(decodeControllerMessage(frame(4)).type, 'RunBatch');
    for (const bytes of [0, 3, 5, 8]) assert.throws(() => decodeControllerMessage(frame(bytes)), badFrame);
  });

  it('round-trips a sequence batch: PCM views then attached states, one item per session', () => {
    const message = runSequenceBatchMessage({
      batchId: 'b',
      items: [
        { requestId: 'a', sessionId: 's1', seq: 0, audio: new Int16Array([1, -2]), state: { kind: 'new' }, isLast: false, options: {} },
        {
          requestId: 'b',
          sessionId: 's2',
          seq: 3,
          audio: new Int16Array([3]),
          state: { kind: 'attached', bytes: new Uint8Array([9, 8, 7]) },
          isLast: true,
          options: { k: 1 },
        },
      ],
    });
    const decoded = decodeControllerMessage(roundTrip(message)) as MessageOf<'RunSequenceBatch', Uint8Array>;
    const parts = splitSequenceBody(decoded);
    assert.deepEqual(
      parts.map((p) => [[...p.audio], [...p.state]]),
      [
        [[1, -2], []],
        [[3], [9, 8, 7]],
      ],
    );
    const twice = { ...message, items: [message.items[0]!, { ...message.items[1]!, sessionId: 's1' }] };
    assert.throws(() => encodeMessage(twice), badFrame);
    const stateless = { ...message, items: [message.items[0]!, { ...message.items[1]!, stateIn: 'resident' as const }] };
    assert.throws(() => encodeMessage(stateless), badFrame);
  });

  it('needs exactly one of error and transcript in a batch result', () => {
    const result = (error: null | { code: 'model_failed'; message: string }) =>
      encodeMessage({
        type: 'BatchResult',
        correlationId: 1,
        batchId: 'b',
        computeMs: 1,
        results: [{ requestId: 'r', error, transcript: null }],
      });
    assert.throws(() => result(null), badFrame);
    assert.doesNotThrow(() => result({ code: 'model_failed', message: 'm' }));
  });
});
