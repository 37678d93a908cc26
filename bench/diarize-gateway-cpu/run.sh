#!/usr/bin/env bash
# The gateway's CPU time per diarization session chunk, without a GPU: the whole server with the
# `test` engine's diarizer (it answers at once, so the gateway's own work is what is timed), driven
# by `voxmux bench diarize --mode load` (15 s chunks of a 16 kHz 16-bit WAV, 480 KB each, sessions
# sending as fast as answered). With a baseline commit, a server built from that commit runs the same
# load in the same run, the two sides alternating round by round.
#
#   bash bench/diarize-gateway-cpu/run.sh OUT [BASELINE_COMMIT] [ROUNDS]
#
# Per side and round: the gateway process's CPU seconds (user + system, /proc) over the load, per
# chunk answered; chunks/s; per-chunk p50/p95. The server runs with MALLOC_MMAP_THRESHOLD_ set (the
# value the launcher gives its gateway child), so the launcher is the gateway and no child is started.
# DIARIZE_GATEWAY_SESSIONS (32): the sessions sending; DIARIZE_GATEWAY_IDLE_SESSIONS (0): sessions opened
# before the load that send one short chunk and then nothing, so that the gateway and the scheduler
# hold that many more (a real-time load of N sessions has N open and few sending at any moment).
# Writes OUT/results.jsonl and OUT/summary.md; the bench's files and the server logs go to OUT/runs/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
runs=$out/runs
mkdir -p "$runs"
baseline=${2:-}
rounds=${3:-3}
sessions=${DIARIZE_GATEWAY_SESSIONS:-32}
idle_sessions=${DIARIZE_GATEWAY_IDLE_SESSIONS:-0}
source "$root/bench/gpu/serve-lib.sh"
build_sides "$root" "$baseline"
/usr/bin/python3 "$root/bench/gpu/make-clip.py" "$out/clip90.wav" 90
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
: > "$out/results.jsonl"
port=8770
for round in $(seq 1 "$rounds"); do
  for side in "${sides[@]}"; do
    name=${side%%:*} dir=${side#*:}
    port=$((port + 1))
    cat > "$runs/config.json" <<JSON
{"gateway": {"port": $port}, "scheduler": {"maxRunningBatchesPerInstance": 3},
 "models": {"diar": {"adapter": "test", "task": "diarization", "instances": 1, "maxBatchSize": 64, "maxQueueDelayMs": 2}}}
JSON
    (cd "$dir" && MALLOC_MMAP_THRESHOLD_=65536 VOXMUX_SUPERVISOR_PYTHON_PATH=/usr/bin/python3 exec node bin/voxmux.mjs serve --config "$runs/config.json") > "$runs/$name-$round-server.log" 2>&1 &
    pid=$!
    wait_ready all_ready "http://127.0.0.1:$port/health/ready" "$pid" "$runs/$name-$round-server.log" 120
    load() {
      node "$root/bin/voxmux.mjs" bench diarize --mode load --url "http://127.0.0.1:$port" --model diar --audio "$out/clip90.wav" \
        --sessions "$1" --chunk-s 15 --pacing asap --timeout-s 60 --label "$name round $round" --out "$2" > "$2.txt" 2>&1
    }
    load 4 "$runs/warmup"
    # Idle sessions: opened 64 at a time; each sends one 1 s chunk, so that the scheduler holds its
    # state too, then nothing more (they would expire after the model's 600 s).
    node -e 'const [url, n, wav] = [process.argv[1], Number(process.argv[2]), process.argv[3]];
      const chunk = new Blob([require("node:fs").readFileSync(wav).subarray(0, 44 + 32000)]);
      const ok = async (r, status) => { if (r.status !== status) throw new Error(`${r.url}: ${r.status} ${await r.text()}`); return r; };
      (async () => { for (let i = 0; i < n; i += 64) await Promise.all(Array.from({ length: Math.min(64, n - i) }, async () => {
        const { id } = await (await ok(await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "diar" }) }), 201)).json();
        const form = new FormData(); form.set("seq", "0"); form.set("file", chunk, "a.wav");
        await ok(await fetch(`${url}/${id}/chunks`, { method: "POST", body: form }), 200);
      })); })().catch((e) => { console.error(e.message); process.exit(1); });' "http://127.0.0.1:$port/v1/audio/diarization/sessions" "$idle_sessions" "$out/clip90.wav"
    c0=$(cpu_s "$pid")
    load "$sessions" "$runs/$name-$round"
    c1=$(cpu_s "$pid")
    kill -TERM "$pid"; wait "$pid" || true
    IDLE=$idle_sessions node - "$runs/$name-$round/results.json" "$name" "$round" "$c0" "$c1" >> "$out/results.jsonl" <<'JS'
const r = JSON.parse(require('node:fs').readFileSync(process.argv[2], 'utf8'));
const [, , , side, round, c0, c1] = process.argv;
const t = r.totals;
const ok = t.ok;
const cpuS = Number(c1) - Number(c0);
const errors = Object.values(t.errors).reduce((a, b) => a + b, 0) + t.sessionsFailed;
console.log(JSON.stringify({ side, round: Number(round), idleSessions: Number(process.env.IDLE), chunksOk: ok, errors, chunksPerSecond: t.chunksPerSecond,
  p50Ms: t.latencyMs.p50, p95Ms: t.latencyMs.p95, gatewayCpuS: Number(cpuS.toFixed(2)), gatewayCpuMsPerChunk: Number(((1000 * cpuS) / ok).toFixed(2)) }));
JS
  done
done
rm -rf "$runs/warmup" "$runs/warmup.txt" "$out/clip90.wav"
node - "$out" "${sides[@]%%:*}" > "$out/summary.md" <<'JS'
const { readFileSync } = require('node:fs');
const [out, ...names] = process.argv.slice(2);
const rows = readFileSync(`${out}/results.jsonl`, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor((s.length - 1) / 2)]; };
console.log(`${rows[0].idleSessions} idle sessions open beside the sending ones.\n`);
console.log('| side | round | chunks ok | errors | chunks/s | p50 ms | p95 ms | gateway CPU s | gateway CPU ms per chunk |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const r of rows) console.log(`| ${r.side} | ${r.round} | ${r.chunksOk} | ${r.errors} | ${r.chunksPerSecond?.toFixed(1)} | ${r.p50Ms?.toFixed(1)} | ${r.p95Ms?.toFixed(1)} | ${r.gatewayCpuS} | ${r.gatewayCpuMsPerChunk} |`);
console.log('');
for (const name of names) {
  const mine = rows.filter((r) => r.side === name);
  console.log(`- ${name}: median ${median(mine.map((r) => r.gatewayCpuMsPerChunk))} ms of gateway CPU per chunk, ${median(mine.map((r) => r.chunksPerSecond)).toFixed(1)} chunks/s`);
}
JS
cat "$out/summary.md"
