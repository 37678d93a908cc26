/**
 * Malformed input at the HTTP layer (#16): every failure Node's HTTP parser or the multipart parser
 * can produce answers the OpenAI envelope with a catalogued code, fed over raw sockets where an
 * HTTP client would refuse to send it; and the gateway's memory returns to its idle level after a
 * fuzz run of all of them plus random bytes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { floatWav, noise } from '../support/audio.js';
import { startServer, type RunningServer } from '../support/server-process.js';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

interface Envelope {
  error: { message: string; type: string; param: string | null; code: string };
}

/**
 * Writes `pieces` to a fresh connection (a number is a pause in milliseconds, for stalled uploads)
 * and reads the first response: its head and its Content-Length body.
 */
function rawCall(url: string, pieces: Array<string | Buffer | number>, timeoutMs = 10_000): Promise<RawAnswer> {
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

function assertEnvelope(answer: RawAnswer, status: number, code: string | string[]): void {
  assert.equal(answer.status, status, answer.body);
  assert.match(answer.headers['content-type'] ?? '', /^application\/json/);
  const payload = JSON.parse(answer.body) as Envelope;
  assert.ok([code].flat().includes(payload.error.code), `${payload.error.code}: ${payload.error.message}`);
  assert.ok(payload.error.message.length > 0);
  assert.ok(['invalid_request_error', 'server_error'].includes(payload.error.type), payload.error.type);
  assert.ok('param' in payload.error);
}

const BOUNDARY = 'voxmuxBoundary';

function multipartBody(file: Buffer, boundary = BOUNDARY): Buffer {
  return Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\necho\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
}

function head(lines: string[]): string {
  return `POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n${lines.map((line) => `${line}\r\n`).join('')}\r\n`;
}

const good = floatWav(noise(3200, 1));
const goodBody = multipartBody(good);
const BODY_TIMEOUT_MS = 800;

/** One malformed call of each class, by name: the raw pieces and the answer they must get. */
const CLASSES: Array<{ name: string; pieces: Array<string | Buffer | number>; status: number; code: string | string[] }> = [
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

/** Resident memory of a process, in bytes (Linux). */
function rssBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? NaN) * 1024;
}

describe('malformed requests at the HTTP layer (#16)', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({
      config: {
        models: { echo: { adapter: 'test', instances: 1 } },
        gateway: { maxBodyBytes: 512 * 1024, maxAudioDurationMs: 2000, bodyTimeoutMs: BODY_TIMEOUT_MS, uploadPoolIdleMs: 300 },
      },
    });
  });
  after(async () => {
    await server.stop();
  });

  for (const malformed of CLASSES) {
    it(`answers ${malformed.status} ${[malformed.code].flat().join(' or ')}: ${malformed.name}`, async () => {
      assertEnvelope(await rawCall(server.url, malformed.pieces), malformed.status, malformed.code);
    });
  }

  it('answers a well-formed raw call with 200 (the helper itself works)', async () => {
    const answer = await rawCall(server.url, [
      head([`Content-Type: multipart/form-data; boundary=${BOUNDARY}`, `Content-Length: ${goodBody.length}`, 'Connection: close']),
      goodBody,
    ]);
    assert.equal(answer.status, 200, answer.body);
  });

  it('returns to within 20 % of its idle memory after a fuzz run of every class plus random bytes', async (t) => {
    const pid = server.process.pid!;
    const upload = (file: Buffer) => {
      const body = new FormData();
      body.append('model', 'echo');
      body.append('file', new Blob([file]), 'a.wav');
      return fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', body });
    };
    // Idle is measured after a warm-up of every path, so that the code compiled for them counts.
    for (const malformed of CLASSES.filter((c) => c.status !== 408)) await rawCall(server.url, malformed.pieces);
    for (let i = 0; i < 5; i += 1) assert.equal((await upload(good)).status, 200);
    await new Promise((r) => setTimeout(r, 1000));
    const idle = rssBytes(pid);

    let seed = 7;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const quick = CLASSES.filter((c) => c.status !== 408);
    const calls: Array<Promise<unknown>> = [];
    for (let i = 0; i < 240; i += 1) {
      const pick = random(4);
      if (pick === 0) calls.push(rawCall(server.url, quick[random(quick.length)]!.pieces).catch(() => undefined));
      else if (pick === 1) {
        const bytes = Buffer.from(Array.from({ length: 1 + random(4096) }, () => random(256)));
        calls.push(rawCall(server.url, [bytes], 3000).catch(() => undefined));
      } else if (pick === 2) {
        calls.push(upload(Buffer.from(Array.from({ length: 1 + random(400_000) }, () => random(256)))).catch(() => undefined));
      } else {
        calls.push(upload(floatWav(noise(1600 + random(30_000), 1))).catch(() => undefined));
      }
      if (calls.length >= 8) await Promise.all(calls.splice(0));
    }
    await Promise.all(calls);
    const afterFuzz = rssBytes(pid);

    // Give the pool its idle time and the collector a chance: poll, never sleep longer than needed.
    let settled = rssBytes(pid);
    for (let i = 0; i < 40 && settled > idle * 1.2; i += 1) {
      await new Promise((r) => setTimeout(r, 250));
      await fetch(`${server.url}/health/live`);
      settled = rssBytes(pid);
    }
    const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
    t.diagnostic(`idle ${mib(idle)} MiB, after the fuzz run ${mib(afterFuzz)} MiB, then ${mib(settled)} MiB`);
    assert.ok(settled <= idle * 1.2, `idle ${mib(idle)} MiB, after the fuzz run ${mib(afterFuzz)} MiB, then ${mib(settled)} MiB`);
    assert.equal((await upload(good)).status, 200);
  });
});
