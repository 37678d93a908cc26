import assert from 'node:assert/strict';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runBenchCli } from './cli.js';
import { loadUtterances, saveUtterances, UTTERANCES_MANIFEST } from './call-utterances.js';

const utterances = [
  { voice: 'alloy', text: 'Hello there.', pcm: Buffer.from([1, 0, 2, 0, 255, 255]) },
  { voice: 'echo', text: 'Can you hear me?', pcm: Buffer.from([0, 128]) },
];

describe('saved call utterances (#19)', () => {
  it('reads back what was saved: voices, texts and samples', async () => {
    const dir = join(await mkdtemp(join(tmpdir(), 'voxmux-utterances-')), 'made-here');
    await saveUtterances(dir, utterances);
    assert.deepEqual(await loadUtterances(dir), utterances);
    const manifest = JSON.parse(await readFile(join(dir, UTTERANCES_MANIFEST), 'utf8')) as Record<string, unknown>;
    assert.deepEqual([manifest.format, manifest.sampleRate, manifest.channels], ['pcm_s16le', 24_000, 1]);
  });

  it('refuses a missing manifest, another format, a path for a file name and odd-sized samples', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voxmux-utterances-'));
    await assert.rejects(loadUtterances(dir), /Expected .*utterances\.json to be saved utterances/);
    await saveUtterances(dir, utterances);
    const manifest = JSON.parse(await readFile(join(dir, UTTERANCES_MANIFEST), 'utf8')) as {
      sampleRate: number;
      utterances: { file: string }[];
    };
    const rewrite = (m: unknown) => writeFile(join(dir, UTTERANCES_MANIFEST), JSON.stringify(m));
    await rewrite({ ...manifest, sampleRate: 16_000 });
    await assert.rejects(loadUtterances(dir), /pcm_s16le at 24000 Hz, mono: got another shape/);
    await rewrite({ ...manifest, utterances: [{ ...manifest.utterances[0], file: '../etc/passwd' }] });
    await assert.rejects(loadUtterances(dir), /a voice, a text and a file name/);
    await rewrite(manifest);
    await writeFile(join(dir, manifest.utterances[1]!.file), Buffer.from([1, 2, 3]));
    await assert.rejects(loadUtterances(dir), /to hold 16-bit samples: got 3 bytes/);
  });

  it('takes --utterances alone: the saved speech is used as it is', async () => {
    let text = '';
    const write = (chunk: string) => ((text += chunk), true);
    const code = await runBenchCli(['call', '--url', 'http://127.0.0.1:9', '--utterances', '/nowhere', '--voices', 'alloy'], {
      stdout: { write },
      stderr: { write },
      isTTY: false,
    });
    assert.equal(code, 2, text);
    assert.match(text, /Expected --utterances without --voices/);
  });
});
