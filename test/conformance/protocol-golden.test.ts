import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { decodeFrame, encodeFrame, FrameDecoder, messageNameOf, type MessageTagValue } from '../../src/protocol/frame.js';
import {
  decodeControllerMessage,
  decodeHostMessage,
  decodeMessage,
  encodeMessageBuffer,
  runBatchMessage,
  splitSequenceBody,
  splitStates,
  type MessageOf,
} from '../../src/protocol/codec.js';
import { MESSAGE_NAMES, MESSAGE_TABLE } from '../../src/protocol/message-table.js';

const dir = new URL('../fixtures/protocol/', import.meta.url);
const names = readdirSync(dir)
  .filter((f) => f.endsWith('.bin'))
  .map((f) => f.slice(0, -4));

interface Twin {
  name: string;
  type: number;
  version: number;
  flags: number;
  correlationId: number;
  meta: Record<string, unknown>;
  bodyBase64: string;
}

describe('protocol golden frames (shared with the Python host)', () => {
  it('has a golden frame for every message type', () => {
    const seen = new Set(names.map((n) => (JSON.parse(readFileSync(new URL(`${n}.json`, dir), 'utf8')) as Twin).name));
    for (const name of MESSAGE_NAMES) {
      assert.ok(seen.has(name), `missing golden frame for ${name}`);
    }
  });

  for (const name of names) {
    it(`decodes and re-encodes ${name} byte for byte`, () => {
      const bytes = readFileSync(new URL(`${name}.bin`, dir));
      const twin = JSON.parse(readFileSync(new URL(`${name}.json`, dir), 'utf8')) as Twin;
      const frame = decodeFrame(bytes);
      assert.equal(messageNameOf(frame.type), twin.name);
      assert.equal(frame.correlationId, twin.correlationId);
      assert.deepEqual(frame.meta, twin.meta);
      assert.equal(Buffer.from(frame.body).toString('base64'), twin.bodyBase64);
      const again = encodeFrame({
        type: twin.type as MessageTagValue,
        correlationId: twin.correlationId,
        meta: twin.meta,
        body: Buffer.from(twin.bodyBase64, 'base64'),
      });
      assert.equal(again.toString('hex'), bytes.toString('hex'));
      const message = decodeMessage(frame);
      assert.equal(message.type, twin.name);
      const isDown = MESSAGE_TABLE[message.type].direction === 'down';
      assert.equal((isDown ? decodeControllerMessage(frame) : decodeHostMessage(frame)).type, twin.name);
      assert.throws(() => (isDown ? decodeHostMessage(frame) : decodeControllerMessage(frame)), { code: 'bad_frame' });
      // The typed message re-encodes to the same bytes, keys in table order.
      assert.equal(encodeMessageBuffer(message).toString('hex'), bytes.toString('hex'));
    });
  }

  it('encodes a RunBatch exactly as the golden frame', () => {
    const twin = JSON.parse(readFileSync(new URL('run-batch.json', dir), 'utf8')) as Twin;
    const body = Buffer.from(twin.bodyBase64, 'base64');
    const pcm = new Int16Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength));
    const requests = twin.meta.requests as {
      requestId: string;
      samples: number;
      language: string | null;
      prompt: string | null;
      wordTimestamps: boolean;
      task: 'transcribe' | 'translate';
      temperature: number;
    }[];
    let offset = 0;
    const message = runBatchMessage(
      {
        batchId: twin.meta.batchId as string,
        requests: requests.map((r) => {
          const audio = pcm.slice(offset, offset + r.samples);
          offset += r.samples;
          return { ...r, audio };
        }),
      },
      twin.correlationId,
    );
    assert.ok(Array.isArray(message.body), "the body is the requests' PCM views, uncopied");
    assert.equal(encodeMessageBuffer(message).toString('hex'), readFileSync(new URL('run-batch.bin', dir)).toString('hex'));
  });

  it('splits the sequence golden frames into audio and states', () => {
    const batch = decodeMessage(decodeFrame(readFileSync(new URL('run-sequence-batch.bin', dir)))) as MessageOf<
      'RunSequenceBatch',
      Uint8Array
    >;
    const parts = splitSequenceBody(batch);
    assert.deepEqual(
      parts.map((p) => [...p.audio]),
      [[100, -100], [7]],
    );
    assert.deepEqual(
      parts.map((p) => Buffer.from(p.state).toString()),
      ['', 'state'],
    );
    const result = decodeMessage(decodeFrame(readFileSync(new URL('sequence-result.bin', dir)))) as MessageOf<'SequenceResult', Uint8Array>;
    assert.deepEqual(
      splitStates(result).map((s) => [...s]),
      [[1, 2, 3], []],
    );
  });

  it('reassembles frames split at every byte boundary', () => {
    const bytes = Buffer.concat(names.map((n) => readFileSync(new URL(`${n}.bin`, dir))));
    const decoder = new FrameDecoder();
    let count = 0;
    for (let i = 0; i < bytes.length; i += 7) count += decoder.push(bytes.subarray(i, Math.min(bytes.length, i + 7))).length;
    assert.equal(count, names.length);
  });

  it('rejects bad magic, version, flags, type and lengths', () => {
    const good = readFileSync(new URL('heartbeat.bin', dir));
    const mutate = (offset: number, write: (b: Buffer) => void) => {
      const b = Buffer.from(good);
      write(b);
      return b;
    };
    const cases: [string, Buffer, string][] = [
      ['magic', mutate(0, (b) => b.writeUInt32LE(0xdeadbeef, 0)), 'bad_frame'],
      ['version 1', mutate(4, (b) => b.writeUInt16LE(1, 4)), 'protocol_mismatch'],
      ['version 2', mutate(4, (b) => b.writeUInt16LE(2, 4)), 'protocol_mismatch'],
      ['version 3', mutate(4, (b) => b.writeUInt16LE(3, 4)), 'protocol_mismatch'],
      ['version 4', mutate(4, (b) => b.writeUInt16LE(4, 4)), 'protocol_mismatch'],
      ['version 6', mutate(4, (b) => b.writeUInt16LE(6, 4)), 'protocol_mismatch'],
      ['version 8', mutate(4, (b) => b.writeUInt16LE(8, 4)), 'protocol_mismatch'],
      ['type', mutate(6, (b) => b.writeUInt16LE(0x42, 6)), 'bad_frame'],
      ['flags', mutate(8, (b) => b.writeUInt32LE(1, 8)), 'bad_frame'],
      ['meta length', mutate(16, (b) => b.writeUInt32LE(2 << 20, 16)), 'bad_frame'],
      ['short', good.subarray(0, 10), 'bad_frame'],
      ['meta not an object', Buffer.concat([good.subarray(0, 16), Buffer.from([2, 0, 0, 0, 0, 0, 0, 0]), Buffer.from('[]')]), 'bad_frame'],
    ];
    for (const [what, bytes, code] of cases) {
      assert.throws(
        () => decodeFrame(bytes),
        (e: { code: string }) => e.code === code,
        what,
      );
    }
  });
});
