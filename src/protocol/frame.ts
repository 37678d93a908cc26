/**
 * The instance wire format (docs/protocol.md): a 24-byte little-endian header, compact JSON meta,
 * then a binary body. Audio and tensors travel only in the body.
 */
import { errors } from '../core/error-catalog.js';
import { MESSAGE_NAMES, MESSAGE_TABLE, type MessageName, type MessageTable } from './message-table.js';

export const FRAME_MAGIC = 0x584d5856; // the bytes 'V','X','M','X'
export const PROTOCOL_VERSION = 7;
export const HEADER_BYTES = 24;
export const MAX_META_BYTES = 1 << 20;
export const MAX_BODY_BYTES = 1 << 30;

/** Numeric wire tags by message name, from the message table (the one place TS enums-by-number are allowed: protocol tags). */
export const MessageTag = Object.fromEntries(MESSAGE_NAMES.map((name) => [name, MESSAGE_TABLE[name].tag])) as {
  readonly [N in MessageName]: MessageTable[N]['tag'];
};
export type { MessageName };
export type MessageTagValue = (typeof MessageTag)[MessageName];

const TAG_TO_NAME = new Map<number, MessageName>(MESSAGE_NAMES.map((name) => [MESSAGE_TABLE[name].tag, name]));

export function messageNameOf(tag: number): MessageName | undefined {
  return TAG_TO_NAME.get(tag);
}

export interface Frame {
  type: MessageTagValue;
  flags: number;
  correlationId: number;
  meta: Record<string, unknown>;
  body: Uint8Array;
}

export function encodeFrame(frame: Omit<Frame, 'flags'> & { flags?: number }): Buffer {
  return Buffer.concat(
    encodeFrameChunks({ type: frame.type, correlationId: frame.correlationId, meta: frame.meta, flags: frame.flags }, [frame.body]),
  );
}

/**
 * Encodes a frame whose body is the concatenation of `bodyParts`, as the chunks to write in order:
 * the header and meta in one new buffer, then the body parts themselves, uncopied. Written with
 * one gathered write, a batch's audio goes from the request buffers to the pipe without a copy in
 * JavaScript; the parts must stay unmodified until the write completes.
 */
export function encodeFrameChunks(
  frame: { type: MessageTagValue; correlationId: number; meta: Record<string, unknown>; flags?: number },
  bodyParts: readonly Uint8Array[],
): Uint8Array[] {
  const metaBytes = Buffer.from(JSON.stringify(frame.meta), 'utf8');
  if (metaBytes.length > MAX_META_BYTES) throw errors.badFrame({ reason: `meta of ${metaBytes.length} bytes` });
  let bodyLength = 0;
  for (const part of bodyParts) bodyLength += part.byteLength;
  if (bodyLength > MAX_BODY_BYTES) throw errors.badFrame({ reason: `body of ${bodyLength} bytes` });
  const head = Buffer.allocUnsafe(HEADER_BYTES + metaBytes.length);
  head.writeUInt32LE(FRAME_MAGIC, 0);
  head.writeUInt16LE(PROTOCOL_VERSION, 4);
  head.writeUInt16LE(frame.type, 6);
  head.writeUInt32LE(frame.flags ?? 0, 8);
  head.writeUInt32LE(frame.correlationId >>> 0, 12);
  head.writeUInt32LE(metaBytes.length, 16);
  head.writeUInt32LE(bodyLength, 20);
  metaBytes.copy(head, HEADER_BYTES);
  return [head, ...bodyParts.filter((part) => part.byteLength > 0)];
}

/**
 * Incremental decoder: push chunks as they arrive, take whole frames out. Throws a bad_frame
 * ServiceError on the first malformed header; the caller must then drop the connection.
 */
export class FrameDecoder {
  #chunks: Buffer[] = [];
  #buffered = 0;

  push(chunk: Buffer): Frame[] {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.#buffered < HEADER_BYTES) break;
      const head = this.#peek(HEADER_BYTES);
      const { metaLength, bodyLength } = parseHeader(head);
      const total = HEADER_BYTES + metaLength + bodyLength;
      if (this.#buffered < total) break;
      const whole = this.#take(total);
      frames.push(decodeFrame(whole));
    }
    return frames;
  }

  #peek(n: number): Buffer {
    if (this.#chunks[0] !== undefined && this.#chunks[0].length >= n) return this.#chunks[0].subarray(0, n);
    const joined = Buffer.concat(this.#chunks);
    this.#chunks = [joined];
    return joined.subarray(0, n);
  }

  #take(n: number): Buffer {
    const joined = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
    const out = joined.subarray(0, n);
    const rest = joined.subarray(n);
    this.#chunks = rest.length > 0 ? [rest] : [];
    this.#buffered -= n;
    return out;
  }
}

function parseHeader(head: Buffer): { type: number; flags: number; correlationId: number; metaLength: number; bodyLength: number } {
  const magic = head.readUInt32LE(0);
  if (magic !== FRAME_MAGIC) throw errors.badFrame({ reason: `magic 0x${magic.toString(16)}` });
  const version = head.readUInt16LE(4);
  if (version !== PROTOCOL_VERSION) throw errors.protocolMismatch({ expected: PROTOCOL_VERSION, got: version });
  const type = head.readUInt16LE(6);
  if (messageNameOf(type) === undefined) throw errors.badFrame({ reason: `unknown type 0x${type.toString(16)}` });
  const flags = head.readUInt32LE(8);
  if (flags !== 0) throw errors.badFrame({ reason: `flags 0x${flags.toString(16)}` });
  const metaLength = head.readUInt32LE(16);
  const bodyLength = head.readUInt32LE(20);
  if (metaLength > MAX_META_BYTES) throw errors.badFrame({ reason: `meta length ${metaLength}` });
  if (bodyLength > MAX_BODY_BYTES) throw errors.badFrame({ reason: `body length ${bodyLength}` });
  return { type, flags, correlationId: head.readUInt32LE(12), metaLength, bodyLength };
}

/** Decodes exactly one whole frame (header, meta and body all present). */
export function decodeFrame(bytes: Buffer): Frame {
  if (bytes.length < HEADER_BYTES) throw errors.badFrame({ reason: `${bytes.length} bytes is shorter than a header` });
  const h = parseHeader(bytes);
  if (bytes.length !== HEADER_BYTES + h.metaLength + h.bodyLength) {
    throw errors.badFrame({ reason: `length ${bytes.length} does not match the header` });
  }
  let meta: unknown;
  try {
    meta = JSON.parse(bytes.toString('utf8', HEADER_BYTES, HEADER_BYTES + h.metaLength));
  } catch (cause) {
    throw errors.badFrame({ reason: `meta is not JSON: ${(cause as Error).message}` });
  }
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) {
    throw errors.badFrame({ reason: 'meta is not a JSON object' });
  }
  return {
    type: h.type as MessageTagValue,
    flags: h.flags,
    correlationId: h.correlationId,
    meta: meta as Record<string, unknown>,
    body: bytes.subarray(HEADER_BYTES + h.metaLength),
  };
}
