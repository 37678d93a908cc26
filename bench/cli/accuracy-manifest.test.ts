import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadAccuracyManifest, occurrenceKeys } from './accuracy-manifest.js';
import { isBenchError } from './bench-error.js';

async function folderWithAudio(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'voxmux-manifest-'));
  await writeFile(join(dir, 'a.wav'), 'x');
  await writeFile(join(dir, 'b.flac'), 'x');
  return dir;
}

async function rejectsWith(manifestText: string, pattern: RegExp): Promise<void> {
  const dir = await folderWithAudio();
  await writeFile(join(dir, 'm.jsonl'), manifestText);
  await assert.rejects(
    loadAccuracyManifest(join(dir, 'm.jsonl')),
    (err) => isBenchError(err) && err.code === 'usage' && pattern.test(err.message),
  );
}

describe('loadAccuracyManifest', () => {
  it("reads voxmux's and NeMo's keys, relative to the manifest's folder, skipping blank lines", async () => {
    const dir = await folderWithAudio();
    const manifest = join(dir, 'm.jsonl');
    await writeFile(
      manifest,
      [
        '{"audio": "a.wav", "reference": "one two"}',
        '',
        `{"audio_filepath": "${join(dir, 'b.flac')}", "text": "three", "duration": 1.5}\r`,
        '{"audio": "a.wav"}',
        '',
      ].join('\n'),
    );
    assert.deepEqual(await loadAccuracyManifest(manifest), [
      { audio: 'a.wav', audioPath: join(dir, 'a.wav'), reference: 'one two' },
      { audio: join(dir, 'b.flac'), audioPath: join(dir, 'b.flac'), reference: 'three' },
      { audio: 'a.wav', audioPath: join(dir, 'a.wav') },
    ]);
  });

  it('names the line of every problem', async () => {
    await rejectsWith('{"audio": "a.wav"}\nnot json\n', /m\.jsonl:2 is not JSON/);
    await rejectsWith('["a.wav"]\n', /m\.jsonl:1 is not an object/);
    await rejectsWith('{"reference": "x"}\n', /"audio" \(or "audio_filepath"\) .* at .*m\.jsonl:1/);
    await rejectsWith('{"audio": "a.wav", "text": 3}\n', /"reference" \(or "text"\) .* at .*m\.jsonl:1/);
    await rejectsWith('{"audio": "missing.wav"}\n', /audio file of .*m\.jsonl:1 to exist/);
    await rejectsWith('\n\n', /at least one line/);
  });

  it('fails clearly on a manifest that cannot be read', async () => {
    await assert.rejects(loadAccuracyManifest('/nonexistent/m.jsonl'), (err) => isBenchError(err) && /cannot be read/.test(err.message));
    const dir = await folderWithAudio();
    await assert.rejects(loadAccuracyManifest(dir), (err) => isBenchError(err) && /is not one/.test(err.message));
  });
});

describe('occurrenceKeys', () => {
  it('tells repeated files apart by their occurrence', () => {
    const keys = occurrenceKeys(['a.wav', 'b.wav', 'a.wav']);
    assert.equal(new Set(keys).size, 3);
    assert.deepEqual(occurrenceKeys(['b.wav', 'a.wav', 'a.wav']), [keys[1], keys[0], keys[2]]);
  });
});
