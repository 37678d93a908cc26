#!/usr/bin/env bash
# The ASR serving benchmark on one GPU machine: for each configuration in asr-configs.mjs, start
# the whole server (Node gateway + scheduler + Python hosts), time single requests on the idle
# server (ASR_BENCH_IDLE_REQUESTS one after another), drive it over HTTP with 45 s WAV clips at
# concurrency 1..256 with `voxmux bench` (requests still queued 5 s after a step's window are
# abandoned, not waited for), stop it; then compare the runs side by side.
#
# Needs: node on PATH (carry a Node 20 binary to a GPU machine that has none), the
# bundle .bundle/voxmux.mjs (npm run bundle), python3 with torch + CUDA.
# Usage: bash bench/gpu/run-asr.sh OUT_DIR [CONFIG ...]   (default: every configuration)
# ASR_BENCH_HOST_PATH: another model host tree (default host/), e.g. a baseline commit's, for a side-by-side run.
# ASR_BENCH_WAIT_FOR: all (default: every instance ready before the first request) or one.
# ASR_BENCH_RATES: an open loop instead of ASR_BENCH_LEVELS' closed one: offered requests/s (Poisson
# arrivals), e.g. 40,50,60,70, which tests a target of N requests/s at p95 <= 1 s directly.
# ASR_BENCH_CLOSED_CONFIGS: sides that run ASR_BENCH_LEVELS' closed loop even where ASR_BENCH_RATES is set
# (a naive side that serves a request or two a second, beside the sides the offered rates are for).
# ASR_BENCH_CONFIGS_SCRIPT (default asr-configs.mjs) and ASR_BENCH_MODEL (default parakeet): another set of
# configurations and the model they serve (run-whisper.sh: whisper-configs.mjs, whisper).
# ASR_BENCH_READY_S (default 420): how long a server may take before every instance is ready (a Whisper
# side that warms every join shape takes up to about 200 s with two instances).
# BENCH_COMMIT: the commit the results record, where this tree's git metadata names another (a copy).
set -uo pipefail
out=${1:?usage: run-asr.sh OUT_DIR [CONFIG ...]}; shift
root=$(cd "$(dirname "$0")/../.." && pwd)
# Powers of two up to 256, and steps between 64 and 256 where the capacity at p95 <= 1 s lies.
levels=${ASR_BENCH_LEVELS:-1,2,4,8,16,32,64,96,128,160,192,224,256}
step_s=${ASR_BENCH_STEP_S:-4}
# Single-request latency on the idle server: this many requests one after another (0: skip).
idle_requests=${ASR_BENCH_IDLE_REQUESTS:-50}
ready_s=${ASR_BENCH_READY_S:-420}
commit=()
[ -n "${BENCH_COMMIT:-}" ] && commit=(--commit "$BENCH_COMMIT")
mkdir -p "$out/configs" "$out/runs" "$out/runs-idle" "$out/logs"
case ${ASR_BENCH_WAIT_FOR:-all} in
  all) ready_check=all_ready ;;
  one) ready_check=get ;;
  *) echo "ASR_BENCH_WAIT_FOR must be all or one: got $ASR_BENCH_WAIT_FOR" >&2; exit 2 ;;
esac
# Model hosts need the python3 that has torch with CUDA, which need not be /usr/bin/python3.
export VOXMUX_SUPERVISOR_PYTHON_PATH=${VOXMUX_SUPERVISOR_PYTHON_PATH:-$(command -v python3)}
# get and all_ready. ASR_BENCH_WAIT_FOR=one starts as soon as /health/ready does (one instance per
# model), to measure the dispatch pause while later instances warm up.
. "$root/bench/gpu/serve-lib.sh"
model=${ASR_BENCH_MODEL:-parakeet}
node "${ASR_BENCH_CONFIGS_SCRIPT:-$root/bench/gpu/asr-configs.mjs}" "$out/configs" "${ASR_BENCH_HOST_PATH:-$root/host}"
python3 "$root/bench/gpu/make-clip.py" /tmp/voxmux-clip45.wav 45
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=($(cd "$out/configs" && ls *.json | sed 's/\.json$//'))
for name in "${configs[@]}"; do
  [ -e "$out/configs/$name.json" ] || { echo "unknown configuration $name: known are $(cd "$out/configs" && ls *.json | sed 's/\.json$//' | tr '\n' ' ')" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
port=8400
for name in "${configs[@]}"; do
  port=$((port + 1))
  if [ -n "${ASR_BENCH_RATES:-}" ] && [[ " ${ASR_BENCH_CLOSED_CONFIGS:-} " != *" $name "* ]]; then
    load=(--rate "$ASR_BENCH_RATES")
  else
    load=(--concurrency "$levels")
  fi
  echo "== $name (port $port)"
  node "$root/.bundle/voxmux.mjs" serve --config "$out/configs/$name.json" --port "$port" --log-level info > "$out/logs/$name.server.log" 2>&1 &
  server=$!
  wait_ready $ready_check "http://127.0.0.1:$port/health/ready" $server "$out/logs/$name.server.log" "$ready_s" || { echo "server $name not started"; continue; }
  get "http://127.0.0.1:$port/health/ready" > "$out/logs/$name.ready.json"
  if [ "$idle_requests" -gt 0 ]; then
    node "$root/.bundle/voxmux.mjs" bench transcribe --url "http://127.0.0.1:$port" --model "$model" \
      --audio /tmp/voxmux-clip45.wav --concurrency 1 --max-requests "$idle_requests" --duration-s 120 --warmup-s 0 \
      --timeout-s 120 --out "$out/runs-idle/$name" --label "$name idle" ${commit[@]+"${commit[@]}"} 2>&1 | grep -v '^step .* | ' | tail -4 | tee "$out/logs/$name.idle.txt"
  fi
  node "$root/.bundle/voxmux.mjs" bench transcribe --url "http://127.0.0.1:$port" --model "$model" \
    --audio /tmp/voxmux-clip45.wav "${load[@]}" --duration-s "$step_s" --warmup-s 1 \
    --slo 'p95<=1000ms' --gpu-hour-usd 3.5 --target-rps 1000 --timeout-s 120 --abandon-after-s 5 \
    --out "$out/runs/$name" --label "$name" ${commit[@]+"${commit[@]}"} 2>&1 | grep -v '^step .* | ' | tee "$out/logs/$name.bench.txt"
  get "http://127.0.0.1:$port/metrics" > "$out/logs/$name.metrics.txt"
  kill -TERM $server; wait $server
done
# Side by side, when more than one configuration ran.
results=("$out"/runs/*/results.json)
if [ ${#results[@]} -ge 2 ] && [ -e "${results[0]}" ]; then
  node "$root/.bundle/voxmux.mjs" bench compare "${results[@]}" --out "$out/compare" | tee "$out/compare.txt"
fi
