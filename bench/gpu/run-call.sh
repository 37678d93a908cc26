#!/usr/bin/env bash
# The voice-call benchmark on one GPU machine (issue #19): for each configuration of
# bench/gpu/call-configs.mjs, a server, then `voxmux bench call` ramping concurrent calls with the
# bench's fake LLM (150 ms to its first token, 50 tokens/s): end of speech to first audio byte less
# the LLM's time, per stage, stalls, calls held at p50 <= 300 ms / p95 <= 600 ms with no stalls, and
# the cost of 5- and 20-minute calls at CALL_BENCH_GPU_HOUR_USD (3.5).
#
# Needs: node on PATH, the bundle (.bundle/voxmux.mjs and .bundle/voxmux-bench.mjs: npm run bundle),
# python3 with torch + CUDA, flite (the callers' voices) unless CALL_BENCH_UTTERANCES is given.
# Usage: bash bench/gpu/run-call.sh OUT_DIR [CONFIG ...]   (default: call-a-naive call-b-voxmux)
# CALL_BENCH_LEVELS (1,2,4,8,16,32,48,64), CALL_BENCH_STEP_S (40), CALL_BENCH_WARMUP_S (10),
# CALL_BENCH_FAKE_LLM_PORT (8799), CALL_BENCH_ABANDON_S (10: turns still running this long after a
# level's window are cut off, so a saturated level does not hold the run), CALL_BENCH_SILENCE_MS (500:
# server VAD's silence_duration_ms, which the end of speech to first audio includes); CALL_BENCH_CONFIGS_ONLY=1 writes the configurations and stops.
# CALL_BENCH_UTTERANCES=DIR: the callers' speech saved by `bench call --save-utterances` on a machine
# with the Debian voices (a GPU machine without flite): the servers then run no Debian voices.
set -uo pipefail
out=${1:?usage: run-call.sh OUT_DIR [CONFIG ...]}; shift
root=$(cd "$(dirname "$0")/../.." && pwd)
levels=${CALL_BENCH_LEVELS:-1,2,4,8,16,32,48,64}
step_s=${CALL_BENCH_STEP_S:-40}
warmup_s=${CALL_BENCH_WARMUP_S:-10}
abandon_s=${CALL_BENCH_ABANDON_S:-10}
silence_ms=${CALL_BENCH_SILENCE_MS:-500}
gpu_hour_usd=${CALL_BENCH_GPU_HOUR_USD:-3.5}
llm_port=${CALL_BENCH_FAKE_LLM_PORT:-8799}
mkdir -p "$out/configs" "$out/runs" "$out/logs"
. "$root/bench/gpu/serve-lib.sh"
node "$root/bench/gpu/call-configs.mjs" "$out/configs" "${CALL_BENCH_HOST_PATH:-$root/host}" || exit 2
[ "${CALL_BENCH_CONFIGS_ONLY:-0}" = 1 ] && exit 0
export VOXMUX_SUPERVISOR_PYTHON_PATH=${VOXMUX_SUPERVISOR_PYTHON_PATH:-$(command -v python3)}
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(call-a-naive call-b-voxmux)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "command: bash bench/gpu/run-call.sh $out ${configs[*]}"
  echo "levels=$levels step_s=$step_s warmup_s=$warmup_s abandon_s=$abandon_s silence_ms=$silence_ms gpu_hour_usd=$gpu_hour_usd utterances=${CALL_BENCH_UTTERANCES:-synthesized by the server}"
} > "$out/run.txt"
callers=(--speech-model voxmux-speech-cpu --voices alloy,ash,echo)
[ -n "${CALL_BENCH_UTTERANCES:-}" ] && callers=(--utterances "$CALL_BENCH_UTTERANCES")
port=8600
for name in "${configs[@]}"; do
  port=$((port + 1))
  [ -e "$out/configs/$name.json" ] || { echo "no configuration $name"; continue; }
  echo "== $name (port $port)"
  node "$root/.bundle/voxmux.mjs" serve --config "$out/configs/$name.json" --port "$port" --log-level info > "$out/logs/$name.server.log" 2>&1 &
  server=$!
  wait_ready all_ready "http://127.0.0.1:$port/health/ready" $server "$out/logs/$name.server.log" 900 || { echo "server $name not started"; continue; }
  node "$root/.bundle/voxmux.mjs" bench call --url "http://127.0.0.1:$port" --fake-llm "$llm_port" \
    "${callers[@]}" --assistant-voice alloy \
    --concurrency "$levels" --duration-s "$step_s" --warmup-s "$warmup_s" --abandon-after-s "$abandon_s" --silence-ms "$silence_ms" --gpu-hour-usd "$gpu_hour_usd" \
    --out "$out/runs/$name" --label "$name" 2>&1 | grep -v '^step .* | ' | tee "$out/logs/$name.bench.txt"
  get "http://127.0.0.1:$port/metrics" > "$out/logs/$name.metrics-after.txt"
  kill -TERM $server; wait $server
done
