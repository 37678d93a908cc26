/**
 * A corpus of malformed calls: each gets the right 4xx status and the OpenAI error envelope with
 * a stable code, and the server keeps serving afterwards.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

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
const good = floatWav(noise(3200, 1));

interface Case {
  name: string;
  status: number;
  code: string;
  /** A file to upload with model=echo, or a whole custom request. */
  file?: Buffer;
  fields?: Record<string, string | string[]>;
  raw?: { contentType?: string; body: string | Buffer; method?: string; path?: string };
}

const CASES: Case[] = [
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

describe('malformed requests', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({
      config: {
        models: { echo: { adapter: 'test', instances: 1 } },
        gateway: { maxBodyBytes: 512 * 1024, maxAudioDurationMs: 2000 },
      },
    });
  });
  after(async () => {
    await server.stop();
  });

  it(`has at least 30 cases (${CASES.length})`, () => assert.ok(CASES.length >= 30));

  for (const c of CASES) {
    it(`answers ${c.status} ${c.code}: ${c.name}`, async () => {
      let res: Response;
      if (c.raw !== undefined) {
        const method = c.raw.method ?? 'POST';
        res = await fetch(`${server.url}${c.raw.path ?? '/v1/audio/transcriptions'}`, {
          method,
          headers: c.raw.contentType === undefined ? {} : { 'content-type': c.raw.contentType },
          body: method === 'GET' ? undefined : c.raw.body,
        });
      } else {
        const body = new FormData();
        for (const [k, v] of Object.entries(c.fields ?? { model: 'echo' })) for (const value of [v].flat()) body.append(k, value);
        if (c.file !== undefined) body.append('file', new Blob([c.file]), 'upload.wav');
        res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', body });
      }
      const payload = (await res.json()) as { error: { message: string; type: string; param: string | null; code: string } };
      assert.equal(res.status, c.status, JSON.stringify(payload));
      assert.equal(payload.error.code, c.code, payload.error.message);
      assert.equal(typeof payload.error.message, 'string');
      assert.ok(payload.error.message.length > 0);
      assert.ok(['invalid_request_error', 'authentication_error', 'rate_limit_error', 'server_error'].includes(payload.error.type));
      assert.ok('param' in payload.error);
    });
  }

  it('keeps serving after the corpus', async () => {
    const body = new FormData();
    body.append('model', 'echo');
    body.append('file', new Blob([good]), 'ok.wav');
    const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', body });
    assert.equal(res.status, 200);
    assert.match(((await res.json()) as { text: string }).text, /^echo samples=3200 /);
    assert.equal((await server.readiness()).status, 200);
  });
});
