#!/usr/bin/env bash
# The Sortformer host's CPU time per session chunk outside the forward pass (host/bench_sortformer_host.py:
# the adapter as served, full shapes, bf16 storage, its forward pass replaced by synthetic predictions),
# for this checkout and, given a commit, that commit's host/ beside it, the two sides alternating round
# by round in one run.
#
#   bash bench/sortformer-host-cpu/run.sh OUT [BASELINE_COMMIT] [ROUNDS]
#
# SORTFORMER_HOST_BATCH_SIZES (1,16,64): sessions per batch. Writes OUT/results.jsonl (one line per side
# and round) and OUT/summary.md (per side and batch size, the median over the rounds of each stage).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
baseline=${2:-}
rounds=${3:-3}
batch_sizes=${SORTFORMER_HOST_BATCH_SIZES:-1,16,64}
python=/usr/bin/python3
sides=("candidate:$root/host")
if [ -n "$baseline" ]; then
  base_dir=$(mktemp -d)
  trap 'rm -rf "$base_dir"' EXIT
  git -C "$root" archive "$baseline" host | tar -x -C "$base_dir"
  sides+=("baseline:$base_dir/host")
fi
: > "$out/results.jsonl"
for round in $(seq 1 "$rounds"); do
  for side in "${sides[@]}"; do
    name=${side%%:*} host=${side#*:}
    "$python" "$root/host/bench_sortformer_host.py" --host "$host" --batch-sizes "$batch_sizes" \
      --label "$name round $round" --out "$out/results.jsonl"
  done
done
"$python" - "$out/results.jsonl" > "$out/summary.md" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
stages = ("prepare", "stage", "update", "finish")
first = runs[0]
print(f"torch {first['torch']}, Python {first['python']}, {first['threads']} thread(s), config {first['config']}, "
      f"{first['dtype']}, {first['chunkSeconds']:g} s chunks; milliseconds per session chunk, median of "
      f"{sum(1 for r in runs if r['label'].startswith('candidate'))} rounds.\n")
print("| side | batch | " + " | ".join(stages) + " | host total | total per round |")
print("| --- | ---: | " + " | ".join("---:" for _ in stages) + " | ---: | --- |")
for side in dict.fromkeys(r["label"].split(" round")[0] for r in runs):
    mine = [r for r in runs if r["label"].startswith(side + " round")]
    for i, row in enumerate(mine[0]["rows"]):
        rows = [r["rows"][i] for r in mine]
        cells = [f"{statistics.median(x['msPerSession'][s] for x in rows):.3f}" for s in stages]
        total = statistics.median(x["hostMsPerSession"] for x in rows)
        each = ", ".join(f"{x['hostMsPerSession']:.3f}" for x in rows)
        print(f"| {side} | {row['batchSize']} | " + " | ".join(cells) + f" | **{total:.3f}** | {each} |")
PY
cat "$out/summary.md"
