/**
 * The fuzz corpus of malformed calls, shared by the tests that feed it: the API-level cases
 * (test/e2e/malformed-requests.test.ts: multipart fields, audio files, content types, routes) and
 * the HTTP-level classes fed over raw sockets (test/e2e/http-malformed.test.ts), with their
 * expected status and error code. test/e2e/memory-idle.test.ts replays all of it to measure the
 * gateway's memory. The cases expect the server configuration in CORPUS_CONFIG.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { floatWav, noise } from './audio.js';

export const BODY_TIMEOUT_MS = 800;

/** The server configuration the corpus's expectations are written for. */
export const CORPUS_CONFIG = {
  models: { echo: { adapter: 'test', instances: 1 } },
  gateway: { maxBodyBytes: 512 * 1024, maxAudioDurationMs: 2000, bodyTimeoutMs: BODY_TIMEOUT_MS },
};

function wavHeader(o: {
  format?: number;
  channels?: number;
  rateHz?: number;
  bits?: number;
  blockAlign?: number;
  dataBytes?: number;
  fmtSize?: number;
  magic?: string;
}): Buffer {
  const channels = o.channels ?? 1;
  const bits = o.bits ?? 16;
  const rate = o.rateHz ?? 16000;
  const fmtSize = o.fmtSize ?? 16;
  const h = Buffer.alloc(20 + fmtSize + 8);
  h.write(o.magic ?? 'RIFF', 0);
  h.writeUInt32LE(Math.min(0xffffffff, h.length - 8 + (o.dataBytes ?? 0)), 4);
  h.write('WAVE', 8);
  h.write('fmt ', 12);
  h.writeUInt32LE(fmtSize, 16);
  if (fmtSize >= 16) {
    h.writeUInt16LE(o.format ?? 1, 20);
    h.writeUInt16LE(channels, 22);
    h.writeUInt32LE(rate, 24);
    h.writeUInt32LE(Math.floor(rate * channels * (bits / 8)) >>> 0, 28);
    h.writeUInt16LE((o.blockAlign ?? channels * Math.ceil(bits / 8)) & 0xffff, 32);
    h.writeUInt16LE(bits, 34);
  }
  h.write('data', 20 + fmtSize);
  h.writeUInt32LE(o.dataBytes ?? 0, 24 + fmtSize);
  return h;
}

const pcm = (bytes: number) => Buffer.alloc(bytes, 1);
/** A valid 0.2 s upload. */
export const good = floatWav(noise(3200, 1));

export interface Case {
  name: string;
  status: number;
  code: string;
  /** A file to upload with model=echo, or a whole custom request. */
  file?: Buffer;
  fields?: Record<string, string | string[]>;
  raw?: { contentType?: string; body: string | Buffer; method?: string; path?: string };
}

export const CASES: Case[] = [
  { name: 'empty file', file: Buffer.alloc(0), status: 400, code: 'empty_audio' },
  { name: 'one byte', file: Buffer.from([0x52]), status: 415, code: 'unsupported_audio_format' },
  { name: 'truncated RIFF header', file: Buffer.from('RIFF\x10\x00\x00\x00WAVE'), status: 400, code: 'invalid_audio' },
  {
    name: 'wrong magic RIFX',
    file: Buffer.concat([wavHeader({ magic: 'RIFX', dataBytes: 100 }), pcm(100)]),
    status: 415,
    code: 'unsupported_audio_format',
  },
  {
    name: 'text named .wav',
    file: Buffer.from('hello, this is not audio at all\n'.repeat(10)),
    status: 415,
    code: 'unsupported_audio_format',
  },
  { name: 'RIFF without a data chunk', file: wavHeader({}).subarray(0, 36), status: 400, code: 'invalid_audio' },
  { name: 'zero samples', file: wavHeader({ dataBytes: 0 }), status: 400, code: 'empty_audio' },
  { name: '0 channels', file: Buffer.concat([wavHeader({ channels: 0, dataBytes: 100 }), pcm(100)]), status: 400, code: 'invalid_audio' },
  {
    name: '65535 channels',
    file: Buffer.concat([wavHeader({ channels: 65535, dataBytes: 100 }), pcm(100)]),
    status: 400,
    code: 'invalid_audio',
  },
  {
    name: '0 Hz sample rate',
    file: Buffer.concat([wavHeader({ rateHz: 0, dataBytes: 100 }), pcm(100)]),
    status: 400,
    code: 'invalid_audio',
  },
  { name: '13-bit samples', file: Buffer.concat([wavHeader({ bits: 13, dataBytes: 100 }), pcm(100)]), status: 400, code: 'invalid_audio' },
  { name: '0-bit samples', file: Buffer.concat([wavHeader({ bits: 0, dataBytes: 100 }), pcm(100)]), status: 400, code: 'invalid_audio' },
  {
    name: 'block align mismatch',
    file: Buffer.concat([wavHeader({ blockAlign: 7, dataBytes: 100 }), pcm(100)]),
    status: 400,
    code: 'invalid_audio',
  },
  {
    name: 'fmt chunk of size 0',
    file: Buffer.concat([wavHeader({ fmtSize: 0, dataBytes: 100 }), pcm(100)]),
    status: 400,
    code: 'invalid_audio',
  },
  {
    name: 'ADPCM WAV with garbage data',
    file: Buffer.concat([wavHeader({ format: 2, bits: 4, blockAlign: 1, dataBytes: 100 }), pcm(100)]),
    status: 400,
    code: 'invalid_audio',
  },
  {
    // A truncated WAV decodes its whole frames (#16); one byte is not a whole 16-bit frame.
    name: 'declared 10 MB of data, 1 byte present',
    file: Buffer.concat([wavHeader({ dataBytes: 10_000_000 }), pcm(1)]),
    status: 400,
    code: 'invalid_audio',
  },
  { name: 'truncated mp3 (ID3 only)', file: Buffer.from('ID3\x04\x00\x00\x00\x00\x00\x00'), status: 400, code: 'invalid_audio' },
  { name: 'truncated flac', file: Buffer.from('fLaC\x00\x00\x00\x22'), status: 400, code: 'invalid_audio' },
  { name: 'truncated ogg', file: Buffer.from('OggS\x00\x02\x00\x00\x00\x00'), status: 400, code: 'invalid_audio' },
  { name: 'truncated webm', file: Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x01, 0x00]), status: 400, code: 'invalid_audio' },
  {
    name: 'PNG image',
    file: Buffer.from('\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR', 'latin1'),
    status: 415,
    code: 'unsupported_audio_format',
  },
  {
    name: 'PDF document',
    file: Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n', 'latin1'),
    status: 415,
    code: 'unsupported_audio_format',
  },
  { name: 'JSON file', file: Buffer.from('{"text": "not audio"}'), status: 415, code: 'unsupported_audio_format' },
  {
    name: 'random bytes',
    file: Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 251)),
    status: 415,
    code: 'unsupported_audio_format',
  },
  { name: 'audio over the maximum duration', file: floatWav(noise(16000 * 3, 2)), status: 413, code: 'audio_too_long' },
  { name: 'body over the limit', file: Buffer.alloc(600 * 1024, 1), status: 413, code: 'body_too_large' },
  { name: 'unknown model', file: good, fields: { model: 'no-such-model' }, status: 404, code: 'model_not_found' },
  { name: 'missing model', file: good, fields: {}, status: 400, code: 'missing_parameter' },
  { name: 'missing file', fields: { model: 'echo' }, status: 400, code: 'missing_parameter' },
  { name: 'bad response_format', file: good, fields: { model: 'echo', response_format: 'xml' }, status: 400, code: 'invalid_parameter' },
  { name: 'temperature not a number', file: good, fields: { model: 'echo', temperature: 'hot' }, status: 400, code: 'invalid_parameter' },
  { name: 'temperature out of range', file: good, fields: { model: 'echo', temperature: '3' }, status: 400, code: 'invalid_parameter' },
  {
    name: 'bad timestamp granularity',
    file: good,
    fields: { model: 'echo', 'timestamp_granularities[]': 'char' },
    status: 400,
    code: 'invalid_parameter',
  },
  { name: 'stream not a boolean', file: good, fields: { model: 'echo', stream: 'maybe' }, status: 400, code: 'invalid_parameter' },
  {
    name: 'stream with srt',
    file: good,
    fields: { model: 'echo', stream: 'true', response_format: 'srt' },
    status: 400,
    code: 'invalid_parameter',
  },
  { name: 'bad language', file: good, fields: { model: 'echo', language: 'english!!' }, status: 400, code: 'invalid_parameter' },
  { name: 'unknown field', file: good, fields: { model: 'echo', colour: 'blue' }, status: 400, code: 'invalid_parameter' },
  { name: 'model given twice', file: good, fields: { model: ['echo', 'echo'] }, status: 400, code: 'invalid_parameter' },
  { name: 'JSON body', raw: { contentType: 'application/json', body: '{"model":"echo"}' }, status: 400, code: 'invalid_content_type' },
  { name: 'plain text body', raw: { contentType: 'text/plain', body: 'hello' }, status: 400, code: 'invalid_content_type' },
  { name: 'multipart without boundary', raw: { contentType: 'multipart/form-data', body: 'x' }, status: 400, code: 'invalid_parameter' },
  {
    name: 'truncated multipart body',
    raw: {
      contentType: 'multipart/form-data; boundary=XYZ',
      body: '--XYZ\r\nContent-Disposition: form-data; name="model"\r\n\r\necho\r\n--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF',
    },
    status: 400,
    code: 'invalid_parameter',
  },
  { name: 'GET on the upload route', raw: { method: 'GET', body: '' }, status: 404, code: 'route_not_found' },
  { name: 'unknown route', raw: { method: 'POST', path: '/v1/audio/nothing', body: '' }, status: 404, code: 'route_not_found' },
];

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface Envelope {
  error: { message: string; type: string; param: string | null; code: string };
}

/**
 * Writes `pieces` to a fresh connection (a number is a pause in milliseconds, for stalled uploads)
 * and reads the first response: its head and its Content-Length body.
 */
export function rawCall(url: string, pieces: Array<string | Buffer | number>, timeoutMs = 10_000): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let received = Buffer.alloc(0);
    let isDone = false;
    const finish = (answer: RawAnswer | Error): void => {
      if (isDone) return;
      isDone = true;
      clearTimeout(timer);
      socket.destroy();
      if (answer instanceof Error) reject(answer);
      else resolve(answer);
    };
    const timer = setTimeout(() => finish(new Error(`no answer in ${timeoutMs} ms: ${received.toString('latin1')}`)), timeoutMs);
    const tryParse = (): void => {
      const headEnd = received.indexOf('\r\n\r\n');
      if (headEnd === -1) return;
      const [statusLine = '', ...lines] = received.subarray(0, headEnd).toString('latin1').split('\r\n');
      const headers = Object.fromEntries(
        lines.map((line) => [line.slice(0, line.indexOf(':')).trim().toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      const length = Number(headers['content-length'] ?? NaN);
      const body = received.subarray(headEnd + 4);
      if (Number.isFinite(length) && body.length < length) return;
      finish({ status: Number(statusLine.split(' ')[1]), headers, body: body.subarray(0, length).toString('utf8') });
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      tryParse();
    });
    socket.on('error', () => tryParse());
    socket.on('close', () => {
      tryParse();
      finish(new Error(`closed without an answer: ${received.toString('latin1')}`));
    });
    socket.on('connect', () => {
      void (async () => {
        for (const piece of pieces) {
          if (isDone || socket.destroyed) return;
          if (typeof piece === 'number') await new Promise((r) => setTimeout(r, piece));
          else socket.write(piece);
        }
      })();
    });
  });
}

export function assertEnvelope(answer: RawAnswer, status: number, code: string | string[]): void {
  assert.equal(answer.status, status, answer.body);
  assert.match(answer.headers['content-type'] ?? '', /^application\/json/);
  const payload = JSON.parse(answer.body) as Envelope;
  assert.ok([code].flat().includes(payload.error.code), `${payload.error.code}: ${payload.error.message}`);
  assert.ok(payload.error.message.length > 0);
  assert.ok(['invalid_request_error', 'server_error'].includes(payload.error.type), payload.error.type);
  assert.ok('param' in payload.error);
}

export const BOUNDARY = 'voxmuxBoundary';

export function multipartBody(file: Buffer, boundary = BOUNDARY): Buffer {
  return Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\necho\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
}

export function head(lines: string[]): string {
  return `POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n${lines.map((line) => `${line}\r\n`).join('')}\r\n`;
}

export const goodBody = multipartBody(good);

/** One malformed call of each class, by name: the raw pieces and the answer they must get. */
export const CLASSES: Array<{ name: string; pieces: Array<string | Buffer | number>; status: number; code: string | string[] }> = [
  {
    name: 'a multipart boundary of 300 characters',
    pieces: [
      head([
        `Content-Type: multipart/form-data; boundary=${'b'.repeat(300)}`,
        `Content-Length: ${multipartBody(good, 'b'.repeat(300)).length}`,
      ]),
      multipartBody(good, 'b'.repeat(300)),
    ],
    status: 400,
    code: 'invalid_parameter',
  },
  {
    name: 'control characters in the Content-Type',
    pieces: [head([`Content-Type: multipart/form-data; boundary=a\x01\x7fb`, `Content-Length: ${goodBody.length}`]), goodBody],
    status: 400,
    code: 'malformed_request',
  },
  {
    name: 'broken chunked encoding',
    pieces: [
      head([`Content-Type: multipart/form-data; boundary=${BOUNDARY}`, 'Transfer-Encoding: chunked']),
      `10\r\n${goodBody.subarray(0, 16).toString('latin1')}\r\nZZ-not-a-size\r\n`,
    ],
    status: 400,
    code: 'malformed_request',
  },
  {
    name: 'headers over the size limit',
    pieces: [head([`Content-Type: multipart/form-data; boundary=${BOUNDARY}`, `X-Padding: ${'p'.repeat(20_000)}`, 'Content-Length: 0'])],
    status: 431,
    code: 'headers_too_large',
  },
  {
    name: 'an upload that stalls half way',
    pieces: [
      head([`Content-Type: multipart/form-data; boundary=${BOUNDARY}`, `Content-Length: ${goodBody.length}`]),
      goodBody.subarray(0, 500),
      BODY_TIMEOUT_MS * 4,
    ],
    status: 408,
    code: 'body_timeout',
  },
  {
    name: 'a body shorter than its Content-Length',
    pieces: [
      head([`Content-Type: multipart/form-data; boundary=${BOUNDARY}`, `Content-Length: ${goodBody.length + 1000}`]),
      goodBody,
      BODY_TIMEOUT_MS * 4,
    ],
    status: 408,
    code: 'body_timeout',
  },
  {
    name: 'a body longer than its Content-Length',
    pieces: [head([`Content-Type: multipart/form-data; boundary=${BOUNDARY}`, `Content-Length: ${goodBody.length - 200}`]), goodBody],
    status: 400,
    // Whichever comes first: the route finds the form cut short, or the parser the bytes after it.
    code: ['invalid_parameter', 'malformed_request'],
  },
  {
    name: 'random bytes instead of a request',
    pieces: [Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 7919 + 13) % 256))],
    status: 400,
    code: 'malformed_request',
  },
];

/** Sends one API-level case (multipart over fetch, or its raw body). */
export function sendCase(url: string, c: Case): Promise<Response> {
  if (c.raw !== undefined) {
    const method = c.raw.method ?? 'POST';
    return fetch(`${url}${c.raw.path ?? '/v1/audio/transcriptions'}`, {
      method,
      headers: c.raw.contentType === undefined ? {} : { 'content-type': c.raw.contentType },
      body: method === 'GET' ? undefined : c.raw.body,
    });
  }
  const body = new FormData();
  for (const [k, v] of Object.entries(c.fields ?? { model: 'echo' })) for (const value of [v].flat()) body.append(k, value);
  if (c.file !== undefined) body.append('file', new Blob([c.file]), 'upload.wav');
  return fetch(`${url}/v1/audio/transcriptions`, { method: 'POST', body });
}
