#!/usr/bin/env bash
# The Whisper serving benchmark on one GPU machine, side by side in one run
# (bench/gpu/whisper-configs.mjs): (a) a naive server (batch 1, eager, no cache reuse across requests)
# and (b) voxmux's Whisper engine (with b0, the same engine whose requests join decoding only at host
# batch boundaries; b2, the engine whose joins wait for a group of windows; b3, its encoder beside the
# decode steps; b4, both; b5, its encoder compiled with FP8 products; b6, b2 with 16 host batches in
# flight; b7, b6 on two instances under MPS; b8, b7 with clips cut into two pieces; b9, b8 with the
# encoder compiled; b10, b9 on one instance; b11, b10 with its encoder beside the decode steps; b12,
# b10 with each step launched before the last one's tokens are read; b13, b10 with each piece's
# language detected on its own window; b14, b13 on two instances; b15, b14 with FP8 products; b17, b14
# with the step's logit rules compiled; b18, b14 with its encoder beside the decode steps; b19, b14
# with both; b20, b19 on three instances; b21, b19 with every join's shape met before serving; b22, b19
# with the step also captured over the cache's first 128 positions; b23, b21 with b22's spans; b24, b23
# with a join's eager decoder calls held to the memory-efficient attention kernel), all with
# large-v3-turbo shapes, 45 s clips and a token budget of 3 per audio second. For each: the
# single-request latency on the idle server, then the ramp of run-asr.sh (capacity at p95 <= 1 s, GPU
# busy from nvidia-smi), then the comparison; last, the engine's own tokens per second and the time of
# its encoder call and decode step per batch size, and the encoder eager, compiled and with FP8
# products side by side (bench_whisper.py).
#
# Needs what run-asr.sh needs: node on PATH, the bundle .bundle/voxmux.mjs (npm run bundle), python3
# with torch + CUDA. One command: bash bench/gpu/run-whisper.sh OUT_DIR
# WHISPER_BENCH_IDLE_REQUESTS (default 20), ASR_BENCH_LEVELS (default 1,2,4,...,128), ASR_BENCH_RATES and
# ASR_BENCH_CLOSED_CONFIGS, ASR_BENCH_READY_S and BENCH_COMMIT reach run-asr.sh;
# WHISPER_BENCH_CONFIGS (default: all of them) names the sides to run, in order (each side boots its own
# server and ramps: pick three or four to stay within a 10-minute limit); WHISPER_BENCH_ENGINE=0 skips the
# engine's own part (bench_whisper.py) for a command that runs it first on its own.
set -uo pipefail
out=${1:?usage: run-whisper.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
export ASR_BENCH_CONFIGS_SCRIPT="$root/bench/gpu/whisper-configs.mjs"
export ASR_BENCH_MODEL=whisper
export ASR_BENCH_IDLE_REQUESTS=${WHISPER_BENCH_IDLE_REQUESTS:-20}
export ASR_BENCH_LEVELS=${ASR_BENCH_LEVELS:-1,2,4,8,16,32,48,64,96,128}
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${BENCH_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)}"
  echo "command: bash bench/gpu/run-whisper.sh $out"
} > "$out/run.txt"
# Every side, in the order whisper-configs.mjs declares them, unless WHISPER_BENCH_CONFIGS names some.
all_sides=$(node --input-type=module -e "const { CONFIGS } = await import('$root/bench/gpu/whisper-configs.mjs'); console.log(Object.keys(CONFIGS).join(' '))")
# shellcheck disable=SC2086  # a list of names
bash "$root/bench/gpu/run-asr.sh" "$out" ${WHISPER_BENCH_CONFIGS:-$all_sides}
[ "${WHISPER_BENCH_ENGINE:-1}" = 0 ] && exit 0
python3 "$root/host/bench_whisper.py" --device cuda --config large-v3-turbo --clip-seconds 45 \
  --tokens-per-audio-second 3 --out "$out/engine.json" | tee "$out/engine.txt"
