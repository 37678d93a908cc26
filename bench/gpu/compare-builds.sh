#!/usr/bin/env bash
# Two builds of voxmux side by side on one GPU machine: a baseline tree (an earlier release's bundle,
# model host and bench/gpu scripts) and this tree, each serving the same configuration of
# asr-configs.mjs, alternately (baseline, this, baseline, this, ... for ROUNDS rounds), then compared.
#
# Needs what run-asr.sh needs, for both trees: node on PATH, each tree's bundle (.bundle/voxmux.mjs,
# npm run bundle) and python3 with torch + CUDA.
# Usage: bash bench/gpu/compare-builds.sh OUT_DIR BASELINE_DIR CONFIG [ROUNDS]   (ROUNDS default 1)
# BASELINE_DIR holds .bundle/voxmux.mjs, host/ and bench/gpu/ of the baseline, for example made from
# a checkout of the previous release with `npm run bundle`.
# ASR_BENCH_* variables (levels, step length, idle requests) reach both runs alike.
set -uo pipefail
out=${1:?usage: compare-builds.sh OUT_DIR BASELINE_DIR CONFIG [ROUNDS]}
baseline=$(cd "${2:?usage: compare-builds.sh OUT_DIR BASELINE_DIR CONFIG [ROUNDS]}" && pwd)
config=${3:?usage: compare-builds.sh OUT_DIR BASELINE_DIR CONFIG [ROUNDS]}
rounds=${4:-1}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
results=()
for round in $(seq 1 "$rounds"); do
  for side in baseline candidate; do
    tree=$root
    [ "$side" = baseline ] && tree=$baseline
    echo "== round $round: $side ($tree)"
    bash "$tree/bench/gpu/run-asr.sh" "$out/$side-$round" "$config" 2>&1 | tee "$out/$side-$round.log" | grep -E '^(==|ready|server|capacity|idle)|p95' | tail -6
    result="$out/$side-$round/runs/$config/results.json"
    [ -e "$result" ] && results+=("$result")
  done
done
if [ ${#results[@]} -ge 2 ]; then
  node "$root/.bundle/voxmux.mjs" bench compare "${results[@]}" --out "$out/compare" | tee "$out/compare.txt"
fi
