#!/usr/bin/env bash
# Voice calls on the CPU defaults through the server: pocketsphinx hears, Debian voices speak (and
# voice the callers), the bench's fake LLM answers (150 ms to its first token, 50 tokens/s), and
# `voxmux bench call` ramps concurrent calls.
#
#   bash bench/call-cpu/run.sh OUT [CONCURRENCY] [DURATION_S]
#
# Defaults: concurrency 1,2,4, 40 s windows after 10 s of warmup. Writes OUT/config.json,
# OUT/server.log and the bench's results (results.json, results.csv, plot.svg, summary.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
levels=${2:-1,2,4}
duration_s=${3:-40}
port=8761 llm_port=8762
source "$root/bench/gpu/serve-lib.sh"
(cd "$root" && npx tsc -p tsconfig.build.json)
cat > "$out/config.json" <<JSON
{
  "gateway": {"port": $port},
  "models": {
    "pocketsphinx-en-us": {"adapter": "pocketsphinx", "instances": 2},
    "voxmux-speech-cpu": {"adapter": "debian-voices", "aliases": ["tts-1"], "instances": 2}
  },
  "realtime": {"partialIntervalMs": 0, "llm": {"baseUrl": "http://127.0.0.1:$llm_port/v1", "model": "fake-llm"}}
}
JSON
node "$root/bin/voxmux.mjs" serve --config "$out/config.json" > "$out/server.log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' EXIT
wait_ready all_ready "http://127.0.0.1:$port/health/ready" "$pid" "$out/server.log" 120
node "$root/bin/voxmux.mjs" bench call --url "http://127.0.0.1:$port" --fake-llm "$llm_port" \
  --concurrency "$levels" --duration-s "$duration_s" --warmup-s 10 --gpu off --label "calls on the CPU defaults" --out "$out"
