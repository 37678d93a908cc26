#!/usr/bin/env bash
# One GPU session's exploration run: the opt-in GPU tests, the model alone (plain and compiled decode
# step), then run-asr.sh on the given server configurations. Each part has its own time limit so
# one slow part cannot take the others' results with it. Everything lands in OUT_DIR.
# Usage: bash bench/gpu/explore.sh OUT_DIR [CONFIG ...]   (env: EXPLORE_SKIP=tests,micro to skip parts;
# EXPLORE_GPU_TESTS: test paths under host/ to run instead of all of tests/gpu; EXPLORE_MICRO_ARGS: more
# flags for bench_parakeet.py, e.g. "--buckets-ms 5000,15000,30000,45000,60000")
set -uo pipefail
out=${1:?usage: explore.sh OUT_DIR [CONFIG ...]}; shift
root=$(cd "$(dirname "$0")/../.." && pwd)
skip=${EXPLORE_SKIP:-}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
git -C "$root" rev-parse HEAD > "$out/commit.txt" 2>/dev/null || true
if [[ $skip != *tests* ]]; then
  echo "== GPU tests"
  GPU_TEST_PYTHON=python3 timeout 240 bash "$root/scripts/test-gpu.sh" ${EXPLORE_GPU_TESTS:-} > "$out/gpu-tests.txt" 2>&1
  grep -v DEBUG "$out/gpu-tests.txt" | tail -25
fi
if [[ $skip != *micro* ]]; then
  # heuristic: cuDNN's default algorithms; plain: the defaults (cuDNN timed at warmup); compiled: plus the
  # torch.compile'd decode step; compiled-all: the encoder layers compiled too; compiled-all-fp8:
  # compiled-all with FP8 encoder matrix products; compiled-all-triton(-fp8): compiled-all(-fp8) with
  # the encoder's own Triton kernels (experimental). All others but heuristic and compiled also profile one batch without graphs.
  # EXPLORE_MICRO_VARIANTS picks a subset (the default leaves
  # compiled-all-fp8 out).
  for variant in ${EXPLORE_MICRO_VARIANTS:-heuristic plain compiled compiled-all}; do
    flags=()
    [ "$variant" = heuristic ] && flags=(--no-cudnn-benchmark)
    [ "$variant" = plain ] && flags=(--profile-batch "${EXPLORE_PROFILE_BATCH:-32}")
    [ "$variant" = compiled ] && flags=(--compile-decode-step)
    [ "$variant" = compiled-all ] && flags=(--compile-decode-step --compile-encoder --profile-batch "${EXPLORE_PROFILE_BATCH:-32}")
    [ "$variant" = compiled-all-fp8 ] && flags=(--compile-decode-step --compile-encoder --matmul fp8 --profile-batch "${EXPLORE_PROFILE_BATCH:-32}")
    [ "$variant" = compiled-all-triton ] && flags=(--compile-decode-step --compile-encoder --kernels triton --profile-batch "${EXPLORE_PROFILE_BATCH:-32}")
    [ "$variant" = compiled-all-triton-fp8 ] && flags=(--compile-decode-step --compile-encoder --kernels triton --matmul fp8 --profile-batch "${EXPLORE_PROFILE_BATCH:-32}")
    echo "== model alone ($variant)"
    timeout "${EXPLORE_MICRO_TIMEOUT_S:-360}" python3 "$root/host/bench_parakeet.py" --device cuda --config full --modes graph \
      --batch-sizes "${EXPLORE_MICRO_BATCHES:-1,16,32}" --iterations 5 "${flags[@]}" ${EXPLORE_MICRO_ARGS:-} --out "$out/micro-$variant.json" 2>&1 \
      | grep -v DEBUG | tail -12 | tee "$out/micro-$variant.txt"
  done
fi
if [ $# -gt 0 ]; then
  echo "== server"
  bash "$root/bench/gpu/run-asr.sh" "$out/asr" "$@"
fi
