// Long-audio latency on a GPU machine: one long 16 kHz WAV sent with stream=true to the bundled
// server serving parakeet (configuration c25 of asr-configs.mjs, with room for a long upload), once
// whole (gateway.splitAboveMs 0) and once cut into pieces (splitAboveMs 30 s, pieceTargetMs 15 s):
// time to the first transcript.text.delta and to transcript.text.done, ROUNDS times each.
// Pauses are found by frame energy (gateway.voiceActivity 'energy'): the bundle leaves onnxruntime out.
//
// Needs: node on PATH, the bundle .bundle/voxmux.mjs, python3 with torch + CUDA.
// Usage: node bench/gpu/long-audio.mjs OUT_DIR WAV [ROUNDS]   (writes OUT_DIR/long-audio.json)
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const [outDir, wavPath, roundsArg = '3'] = process.argv.slice(2);
if (outDir === undefined || wavPath === undefined) {
  process.stderr.write('usage: node bench/gpu/long-audio.mjs OUT_DIR WAV [ROUNDS]\n');
  process.exit(2);
}
const root = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const rounds = Number(roundsArg);
const wav = readFileSync(wavPath);
const audioS = (wav.length - 44) / 32_000;
mkdirSync(join(outDir, 'configs'), { recursive: true });

function run(command, args) {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { stdio: 'inherit' });
    child.once('exit', (code) => (code === 0 ? done() : fail(new Error(`${command} exited ${code}`))));
  });
}

await run('node', [join(root, 'bench/gpu/asr-configs.mjs'), join(outDir, 'configs'), join(root, 'host')]);
const base = JSON.parse(readFileSync(join(outDir, 'configs', 'c25-1x-b32-graphs-3inflight-compiled-all-fp8-idle.json'), 'utf8'));

async function isReady(url) {
  try {
    const res = await fetch(`${url}/health/ready`);
    if (!res.ok) return false;
    const body = await res.json();
    return Object.values(body.models).every((m) => m.instances.every((i) => i.state === 'ready'));
  } catch {
    return false;
  }
}

async function transcribe(url) {
  const form = new FormData();
  form.append('model', 'parakeet');
  form.append('stream', 'true');
  form.append('file', new Blob([wav]), 'long.wav');
  const started = performance.now();
  const res = await fetch(`${url}/v1/audio/transcriptions`, { method: 'POST', body: form });
  if (!res.ok) throw new Error(`status ${res.status}: ${await res.text()}`);
  let firstDeltaMs;
  let deltas = 0;
  let pending = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    pending += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = pending.indexOf('\n\n')) !== -1) {
      const event = JSON.parse(pending.slice(0, end).replace(/^data: /, ''));
      pending = pending.slice(end + 2);
      if (event.type === 'transcript.text.delta') {
        deltas += 1;
        firstDeltaMs ??= performance.now() - started;
      }
    }
  }
  return { firstDeltaMs, doneMs: performance.now() - started, deltas };
}

const results = [];
for (const [index, mode] of ['whole', 'pieces'].entries()) {
  const config = structuredClone(base);
  config.gateway = {
    ...config.gateway,
    maxBodyBytes: 64 * 1024 * 1024,
    maxAudioDurationMs: 1_200_000,
    requestTimeoutMs: 600_000,
    splitAboveMs: mode === 'whole' ? 0 : 30_000,
    pieceTargetMs: 15_000,
    voiceActivity: 'energy',
  };
  const configPath = join(outDir, 'configs', `long-audio-${mode}.json`);
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  const port = 8600 + index;
  const url = `http://127.0.0.1:${port}`;
  const server = spawn('node', [join(root, '.bundle/voxmux.mjs'), 'serve', '--config', configPath, '--port', String(port)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    const deadline = Date.now() + 300_000;
    while (!(await isReady(url))) {
      if (Date.now() > deadline) throw new Error(`${mode}: not ready in 300 s`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    await transcribe(url); // the first long call compiles and warms whatever the long shapes need
    for (let round = 1; round <= rounds; round++) {
      const timing = await transcribe(url);
      results.push({ mode, round, ...timing });
      process.stdout.write(
        `${mode} round ${round}: first delta ${(timing.firstDeltaMs / 1000).toFixed(3)} s, done ${(timing.doneMs / 1000).toFixed(3)} s, ${timing.deltas} deltas\n`,
      );
    }
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
  }
}
writeFileSync(join(outDir, 'long-audio.json'), JSON.stringify({ audioS, startedAt: new Date().toISOString(), results }, null, 2));
