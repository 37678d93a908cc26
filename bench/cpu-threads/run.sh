#!/usr/bin/env bash
# The CPU side of Sortformer session steps in 1, 2 and 4 processes, each with PyTorch's intra-op
# threads at 1 and at 2 (one per core on a 2-core machine), side by side in one run (contend.py).
# Usage: bash bench/cpu-threads/run.sh OUT.jsonl [SECONDS]   (SECONDS per configuration, default 8)
set -euo pipefail
out=${1:?usage: run.sh OUT.jsonl [SECONDS]}
seconds=${2:-8}
root=$(cd "$(dirname "$0")/../.." && pwd)
{
  echo "{\"date\": \"$(date -u +%FT%TZ)\", \"commit\": \"$(git -C "$root" rev-parse --short HEAD)\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\", \"cores\": $(nproc), \"command\": \"bash bench/cpu-threads/run.sh $*\"}"
  for processes in 1 2 4; do
    for threads in 1 2; do
      /usr/bin/python3 "$root/bench/cpu-threads/contend.py" --processes "$processes" --threads "$threads" --seconds "$seconds"
    done
  done
} | tee "$out"
