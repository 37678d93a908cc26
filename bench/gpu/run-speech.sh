#!/usr/bin/env bash
# The speech serving benchmark on one GPU machine (issue #18): two servers one after the other, each
# driven with `voxmux bench speech` over a Zipf mix of 64 random VITS voices at 1..128 concurrent
# streams, then `bench compare` of the two:
#   (a) a-global-lock: one instance, one stream at a time, one voice resident, no host copies
#       (every change of voice loads weights from disk);
#   (b) b-voxmux-residency: several instances under one GPU (MPS), ~16 voices resident each, host copies
#       of every voice, the catalogue preloaded, voice-affinity routing.
# The capacity figure of each run is the most concurrent streams with no stall and first-byte
# p95 <= 250 ms (bench speech's default SLO).
#
# Needs: node on PATH, the bundle (.bundle/voxmux.mjs and .bundle/voxmux-bench.mjs: npm run bundle),
# python3 with torch + CUDA.
# Usage: bash bench/gpu/run-speech.sh OUT_DIR [CONFIG ...]   (default: both configurations)
# SPEECH_BENCH_LEVELS (1,2,4,...,128), SPEECH_BENCH_STEP_S (15: measured window per level),
# SPEECH_BENCH_WARMUP_S (3), SPEECH_BENCH_VOICES (64), SPEECH_BENCH_PACE (playback: each stream
# asks again when its last answer has played, like a caller; none: as fast as answers arrive), SPEECH_BENCH_ZIPF_S (1.1), SPEECH_BENCH_SEED (1);
# the configurations: SPEECH_BENCH_INSTANCES (8), SPEECH_BENCH_RESIDENT_VOICES (16),
# SPEECH_BENCH_STREAMS_PER_INSTANCE (32), SPEECH_BENCH_DTYPE (fp32), SPEECH_BENCH_VOICE_BYTES,
# SPEECH_BENCH_PHONEMIZER (text), SPEECH_BENCH_PRELOAD (1), SPEECH_BENCH_MPS (1: (b) under MPS), SPEECH_BENCH_DEVICE (cuda), see
# speech-configs.mjs. SPEECH_BENCH_HOST_PATH: another model host tree (default host/).
# SPEECH_BENCH_CONFIGS_ONLY=1 writes the configurations and stops (no GPU needed).
set -uo pipefail
out=${1:?usage: run-speech.sh OUT_DIR [CONFIG ...]}; shift
root=$(cd "$(dirname "$0")/../.." && pwd)
levels=${SPEECH_BENCH_LEVELS:-1,2,4,8,16,32,64,128}
step_s=${SPEECH_BENCH_STEP_S:-15}
warmup_s=${SPEECH_BENCH_WARMUP_S:-3}
voices=${SPEECH_BENCH_VOICES:-64}
zipf_s=${SPEECH_BENCH_ZIPF_S:-1.1}
seed=${SPEECH_BENCH_SEED:-1}
pace=${SPEECH_BENCH_PACE:-playback}
mkdir -p "$out/configs" "$out/runs" "$out/logs"
. "$root/bench/gpu/serve-lib.sh"
SPEECH_BENCH_VOICES=$voices node "$root/bench/gpu/speech-configs.mjs" "$out/configs" "${SPEECH_BENCH_HOST_PATH:-$root/host}" || exit 2
[ "${SPEECH_BENCH_CONFIGS_ONLY:-0}" = 1 ] && exit 0
# Model hosts need the python3 that has torch with CUDA, which need not be /usr/bin/python3.
export VOXMUX_SUPERVISOR_PYTHON_PATH=${VOXMUX_SUPERVISOR_PYTHON_PATH:-$(command -v python3)}
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(a-global-lock b-voxmux-residency)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
{ echo "levels=$levels step_s=$step_s warmup_s=$warmup_s voices=$voices zipf_s=$zipf_s seed=$seed pace=$pace"; env | grep '^SPEECH_BENCH_' | sort; } > "$out/settings.txt"
port=8500
for name in "${configs[@]}"; do
  port=$((port + 1))
  [ -e "$out/configs/$name.json" ] || { echo "no configuration $name"; continue; }
  echo "== $name (port $port)"
  node "$root/.bundle/voxmux.mjs" serve --config "$out/configs/$name.json" --port "$port" --log-level info > "$out/logs/$name.server.log" 2>&1 &
  server=$!
  # Preloading 64 voices into every instance reads them all from disk first: allow for it.
  wait_ready all_ready "http://127.0.0.1:$port/health/ready" $server "$out/logs/$name.server.log" 900 || { echo "server $name not started"; continue; }
  get "http://127.0.0.1:$port/health/ready" > "$out/logs/$name.ready.json"
  get "http://127.0.0.1:$port/metrics" > "$out/logs/$name.metrics-before.txt"
  # Calls still running 10 s after a window are abandoned: the baseline's queue at 128 streams
  # would otherwise take minutes to drain between levels.
  node "$root/.bundle/voxmux.mjs" bench speech --url "http://127.0.0.1:$port" --model vits-bench \
    --voice-prefix vits- --voice-count "$voices" --mix zipf --zipf-s "$zipf_s" --seed "$seed" --pace "$pace" \
    --concurrency "$levels" --duration-s "$step_s" --warmup-s "$warmup_s" --timeout-s 120 --abandon-after-s 10 \
    --out "$out/runs/$name" --label "$name" 2>&1 | grep -v '^step .* | ' | tee "$out/logs/$name.bench.txt"
  get "http://127.0.0.1:$port/health/ready" > "$out/logs/$name.ready-after.json"
  get "http://127.0.0.1:$port/metrics" > "$out/logs/$name.metrics.txt"
  # GPU memory per instance process, to hold against its resident budget.
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$out/logs/$name.gpu-apps.csv" 2>&1
  kill -TERM $server; wait $server
done
results=()
for name in a-global-lock b-voxmux-residency; do
  [ -e "$out/runs/$name/results.json" ] && results+=("$out/runs/$name/results.json")
done
if [ ${#results[@]} -ge 2 ]; then
  node "$root/.bundle/voxmux.mjs" bench compare "${results[@]}" --out "$out/compare" | tee "$out/compare.txt"
fi
