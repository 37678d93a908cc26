/**
 * The CPU default diarizer (`classical-diarizer`) through the server (#17): conversations of
 * distinct flite and eSpeak NG voices with known turns, synthesized here by the host tests' own
 * generator, diarized as a whole file and as a session of 15 s chunks. The gateway finds the speech
 * with Silero VAD and hands the regions to the engine, as it does in service; the DER (0.25 s
 * collar, overlap scored) is the bench's scorer.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { diarizationErrorRate, parseRttm, type Turn } from '../../bench/cli/diarization-error-rate.js';
import type { DiarizationJson, DiarizationSessionCreated } from '../../src/api/diarization.js';
import { buildServer, type Server } from '../../src/app/build-server.js';
import { systemClock } from '../../src/core/clock.js';
import { readProcessEnvironment } from '../../src/config/env.js';
import { loadConfig } from '../../src/config/load.js';
import { spawnInstance } from '../../src/supervisor/index.js';
import { pcm16Wav } from '../support/audio.js';
import { HOST_PATH } from '../support/supervisor-fixture.js';
import { silentLogger } from '../support/test-logger.js';

const SAMPLE_RATE_HZ = 16_000;
const CHUNK_SAMPLES = 15 * SAMPLE_RATE_HZ;
/** The host tests' conversations (host/tests/test_classical_diarizer.py): voices, seed, length in seconds. */
const CONVERSATIONS = {
  fourFlite: { voices: ['flite-slt', 'flite-rms', 'flite-awb', 'flite-kal16'], seed: 1, seconds: 75 },
  threeMixed: { voices: ['flite-kal', 'espeak-en-us+f2', 'espeak-en-gb-scotland+m3'], seed: 2, seconds: 50 },
};

interface Conversation {
  audio: Int16Array;
  turns: Turn[];
}

/** Writes a conversation with the host tests' generator; its 16 kHz samples and reference turns. */
function synthesize(dir: string, name: string, spec: { voices: string[]; seed: number; seconds: number }): Conversation {
  const script = [
    'import sys, numpy as np',
    'from diarization_support import synthesize_conversation',
    'talk = synthesize_conversation(sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4]))',
    'np.asarray(talk.audio, dtype="<i2").tofile(sys.argv[1] + ".pcm")',
    'open(sys.argv[1] + ".rttm", "w").write("".join(f"SPEAKER x 1 {t.start:.3f} {t.end - t.start:.3f} <NA> <NA> {t.speaker} <NA> <NA>\\n" for t in talk.turns))',
  ].join('\n');
  const base = join(dir, name);
  execFileSync('/usr/bin/python3', ['-c', script, base, spec.voices.join(','), String(spec.seed), String(spec.seconds)], {
    env: { ...process.env, PYTHONPATH: `${join(HOST_PATH, 'tests')}:${HOST_PATH}` },
  });
  const bytes = readFileSync(`${base}.pcm`);
  return {
    audio: new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2),
    turns: parseRttm(readFileSync(`${base}.rttm`, 'utf8')),
  };
}

function multipart(fields: Record<string, string>, file: Buffer): { payload: Buffer; headers: Record<string, string> } {
  const boundary = 'voxmuxdiarization';
  const head = Object.entries(fields)
    .map(([name, value]) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
    .join('');
  const payload = Buffer.concat([
    Buffer.from(`${head}--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="a.wav"\r\ncontent-type: audio/wav\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

const asTurns = (result: DiarizationJson): Turn[] => result.segments.map((s) => ({ start: s.start, end: s.end, speaker: s.speaker }));

let server: Server;
const talks = new Map<string, Conversation>();
before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'voxmux-diarization-cpu-'));
  for (const [name, spec] of Object.entries(CONVERSATIONS)) talks.set(name, synthesize(dir, name, spec));
  const config = loadConfig({
    file: {
      models: { 'voxmux-diarize-cpu': { adapter: 'classical-diarizer', instances: 1 } },
      supervisor: { hostPath: HOST_PATH, gpus: [] },
    },
  });
  server = await buildServer(config, { log: silentLogger(), clock: systemClock, spawn: spawnInstance, baseEnv: readProcessEnvironment() });
  await server.startInstances();
});
after(() => server.destroy());

describe('the CPU default diarizer through the server (#17)', () => {
  for (const name of Object.keys(CONVERSATIONS)) {
    it(`diarizes the ${name} conversation as a whole file with DER <= 10 %`, async () => {
      const talk = talks.get(name)!;
      const res = await server.app.inject({
        method: 'POST',
        url: '/v1/audio/diarization',
        ...multipart({ model: 'voxmux-diarize-cpu' }, pcm16Wav(talk.audio)),
      });
      assert.equal(res.statusCode, 200, res.body);
      const { der } = diarizationErrorRate(talk.turns, asTurns(res.json<DiarizationJson>()));
      assert.ok(der <= 0.1, `${name} whole file: DER ${(der * 100).toFixed(1)} %`);
    });

    it(`diarizes the ${name} conversation as a session of 15 s chunks with DER <= 15 %`, async () => {
      const talk = talks.get(name)!;
      const created = await server.app.inject({
        method: 'POST',
        url: '/v1/audio/diarization/sessions',
        payload: JSON.stringify({ model: 'voxmux-diarize-cpu' }),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(created.statusCode, 201, created.body);
      const { id } = created.json<DiarizationSessionCreated>();
      for (let seq = 0; seq * CHUNK_SAMPLES < talk.audio.length; seq++) {
        const chunk = talk.audio.subarray(seq * CHUNK_SAMPLES, (seq + 1) * CHUNK_SAMPLES);
        const res = await server.app.inject({
          method: 'POST',
          url: `/v1/audio/diarization/sessions/${id}/chunks`,
          ...multipart({ seq: String(seq) }, pcm16Wav(chunk)),
        });
        assert.equal(res.statusCode, 200, res.body);
      }
      const closed = await server.app.inject({ method: 'DELETE', url: `/v1/audio/diarization/sessions/${id}` });
      assert.equal(closed.statusCode, 200, closed.body);
      const { der } = diarizationErrorRate(talk.turns, asTurns(closed.json<DiarizationJson>()));
      assert.ok(der <= 0.15, `${name} in 15 s chunks: DER ${(der * 100).toFixed(1)} %`);
    });
  }
});
