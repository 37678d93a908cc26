#!/usr/bin/env bash
# The Sortformer host's CPU work per session chunk outside the forward pass, for this checkout and,
# given a commit, that commit's host/ beside it, the two sides alternating round by round in one run:
#   - by stage (host/bench_sortformer_host.py: the adapter as served, full shapes, bf16 storage, its
#     forward pass replaced by synthetic predictions);
#   - through the instance's pipeline (host/bench_sequence_pipeline.py: the same adapter in the host's
#     threads, its forward pass a wait of SORTFORMER_HOST_FORWARD_MS (8) + SORTFORMER_HOST_FORWARD_MS_PER
#     (0.5) ms per session, batches of SORTFORMER_HOST_PIPELINE_BATCH (16), 1, 2 and 3 in flight).
#
#   bash bench/sortformer-host-cpu/run.sh OUT [BASELINE_COMMIT] [ROUNDS]
#
# SORTFORMER_HOST_BATCH_SIZES (1,16,64): sessions per batch of the stage bench. Writes OUT/results.jsonl
# and OUT/pipeline.jsonl (one line per side and round) and OUT/summary.md (per side, the medians over
# the rounds).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
baseline=${2:-}
rounds=${3:-3}
batch_sizes=${SORTFORMER_HOST_BATCH_SIZES:-1,16,64}
forward_ms=${SORTFORMER_HOST_FORWARD_MS:-8}
forward_ms_per=${SORTFORMER_HOST_FORWARD_MS_PER:-0.5}
pipeline_batch=${SORTFORMER_HOST_PIPELINE_BATCH:-16}
python=/usr/bin/python3
sides=("candidate:$root/host")
if [ -n "$baseline" ]; then
  base_dir=$(mktemp -d)
  trap 'rm -rf "$base_dir"' EXIT
  git -C "$root" archive "$baseline" host | tar -x -C "$base_dir"
  sides+=("baseline:$base_dir/host")
fi
: > "$out/results.jsonl"
: > "$out/pipeline.jsonl"
for round in $(seq 1 "$rounds"); do
  for side in "${sides[@]}"; do
    name=${side%%:*} host=${side#*:}
    "$python" "$root/host/bench_sortformer_host.py" --host "$host" --batch-sizes "$batch_sizes" \
      --label "$name round $round" --out "$out/results.jsonl"
    "$python" "$root/host/bench_sequence_pipeline.py" --host "$host" --batch-size "$pipeline_batch" \
      --in-flight 1,2,3 --forward-ms-base "$forward_ms" --forward-ms-per-session "$forward_ms_per" \
      --label "$name round $round" --out "$out/pipeline.jsonl"
  done
done
"$python" - "$out/results.jsonl" "$out/pipeline.jsonl" > "$out/summary.md" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
pipeline_runs = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8")]
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
first = pipeline_runs[0]
print(f"\nThrough the pipeline: batches of {first['batchSize']} sessions, the forward pass a wait of "
      f"{first['forwardMsBase']:g} + {first['forwardMsPerSession']:g} ms per session; medians of the rounds.\n")
print("| side | in flight | batches/s | chunks/s | ms per batch | host ms per batch beyond the wait | `update` ms per chunk | chunks/s per round |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for side in dict.fromkeys(r["label"].split(" round")[0] for r in pipeline_runs):
    mine = [r for r in pipeline_runs if r["label"].startswith(side + " round")]
    for i, level in enumerate(mine[0]["levels"]):
        levels = [r["levels"][i] for r in mine]
        med = {k: statistics.median(x[k] for x in levels)
               for k in ("batchesPerSecond", "chunksPerSecond", "msPerBatch", "hostMsPerBatchBeyondWait")}
        each = ", ".join(f"{x['chunksPerSecond']:.1f}" for x in levels)
        update = statistics.median(x["stageMsPerChunk"].get("update", 0.0) for x in levels)
        print(f"| {side} | {level['inFlight']} | {med['batchesPerSecond']:.2f} | **{med['chunksPerSecond']:.1f}** | "
              f"{med['msPerBatch']:.2f} | {med['hostMsPerBatchBeyondWait']:.2f} | {update:.3f} | {each} |")
PY
cat "$out/summary.md"
