#!/usr/bin/env bash
# Boot-to-ready of the GPU ASR model, its weights read the previous way against parallel large reads,
# side by side in one run (#20). One command, from the repository root:
#
#   bash bench/gpu/boot.sh OUT_DIR
#
# 1. Writes a synthetic Parakeet-TDT-0.6B-v2 .nemo in the real layout (plain tar, ./model_config.yaml,
#    ./model_weights.ckpt: 617,825,926 seeded random fp32 parameters, about 2.47 GB) with
#    bench/gpu/boot-weights.py; nothing is downloaded.
# 2. Reads its weights both ways in one process (boot-weights.py read-compare).
# 3. BOOT_BENCH_ROUNDS rounds (default 3), each starting the whole server once per configuration
#    (boot-configs.mjs: weightRead stream, then parallel; the order alternates each round): the page
#    cache of the .nemo dropped first (fsync + posix_fadvise DONTNEED), the server started, its
#    /health/ready polled every 0.2 s until the instance is ready, then one 45 s clip transcribed.
#    Each instance's boot breakdown (process start, load, warmup and the adapter's stages) comes
#    from /health/ready; the server log keeps its 'instance ready' line.
#    Then (BOOT_BENCH_WAKE=1, the default) the model is put to sleep (POST /v1/models/parakeet/sleep),
#    the page cache dropped again, and one clip sent to the stopped model: the time from that request
#    to its answer is the wake-on-request figure (#20).
# 4. Writes OUT_DIR/results.json (date, machine, commit, command, per-configuration medians, runs),
#    again after every run.
#
# BOOT_BENCH_BASELINE_HOST: another model-host tree (an earlier commit's host/, e.g. from
# `git archive COMMIT host | tar -x -C DIR`): the boots compared are then `baseline` (that tree) and
# `parallel` (this one), both reading in parallel, to measure a change of the host's load path.
# BOOT_BENCH_READ_REPEAT=0 skips the read comparison of step 2.
#
# On one H200 a boot of this model took about 30 s: the default 3 rounds (6 boots), the archive's
# writing and the read comparison take about 6 to 8 minutes; BOOT_BENCH_ROUNDS=2 for a 10-minute limit.
#
# Needs: node on PATH, the bundle .bundle/voxmux.mjs (npm run bundle), python3 with torch + CUDA and
# pyyaml. BOOT_BENCH_NEMO: where the archive goes (default /var/tmp/voxmux-boot/parakeet-tdt-0.6b-synthetic.nemo,
# on a disk rather than a tmpfs, where dropping the page cache would do nothing;
# kept between runs on one machine, rewritten with BOOT_BENCH_REWRITE=1). BOOT_BENCH_COMMIT: the
# commit to record when the tree has no .git.
set -uo pipefail
out=${1:?usage: boot.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${BOOT_BENCH_ROUNDS:-3}
nemo=${BOOT_BENCH_NEMO:-/var/tmp/voxmux-boot/parakeet-tdt-0.6b-synthetic.nemo}
baseline_host=${BOOT_BENCH_BASELINE_HOST:-}
wake=${BOOT_BENCH_WAKE:-1}
read_repeat=${BOOT_BENCH_READ_REPEAT:-3}
command_line="bash bench/gpu/boot.sh $out (BOOT_BENCH_ROUNDS=$rounds BOOT_BENCH_THREADS=${BOOT_BENCH_THREADS:-8} BOOT_BENCH_WAKE=$wake BOOT_BENCH_READ_REPEAT=$read_repeat${baseline_host:+ BOOT_BENCH_BASELINE_HOST=$baseline_host})"
commit=${BOOT_BENCH_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)}
mkdir -p "$out/configs" "$out/runs" "$out/logs"
export VOXMUX_SUPERVISOR_PYTHON_PATH=${VOXMUX_SUPERVISOR_PYTHON_PATH:-$(command -v python3)}
# A .nemo's config is YAML. A python3 without PyYAML (the GPU machine's venv need not have it) can use
# a pure-Python copy carried in .device/pylib (cp -r /usr/lib/python3/dist-packages/yaml .device/pylib/);
# the instances inherit PYTHONPATH.
if ! python3 -c 'import yaml' 2> /dev/null; then
  if [ -d "$root/.device/pylib/yaml" ]; then
    export PYTHONPATH="$root/.device/pylib${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "python3 has no PyYAML: carry a copy in .device/pylib/yaml" >&2; exit 1
  fi
fi
. "$root/bench/gpu/serve-lib.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>/dev/null || echo "no nvidia-smi" > "$out/gpu.txt"
cat "$out/gpu.txt"

if [ ! -f "$nemo" ] || [ "${BOOT_BENCH_REWRITE:-0}" = 1 ]; then
  python3 "$root/bench/gpu/boot-weights.py" write "$nemo" --config "${BOOT_BENCH_MODEL_CONFIG:-full}" > "$out/checkpoint.json" || exit 1
else
  ls -l "$nemo" > "$out/logs/checkpoint-reused.txt"
  python3 -c 'import json, os, sys; print(json.dumps({"path": sys.argv[1], "fileBytes": os.path.getsize(sys.argv[1]), "reused": True}))' "$nemo" > "$out/checkpoint.json"
fi
cat "$out/checkpoint.json"
# Where the archive and the stream path's temporary copy live (a tmpfs there means memory, not disk).
{ df -T "$(dirname "$nemo")" "$(python3 -c 'import tempfile; print(tempfile.gettempdir())')"; free -g; } > "$out/filesystems.txt" 2>&1
cat "$out/filesystems.txt"
if [ "$read_repeat" -gt 0 ]; then
  python3 "$root/bench/gpu/boot-weights.py" read-compare "$nemo" --repeat "$read_repeat" \
    --threads "${BOOT_BENCH_READ_THREADS:-4,8,16}" --out "$out/read-compare.json" > /dev/null || echo "read-compare failed"
fi
node "$root/bench/gpu/boot-configs.mjs" "$out/configs" "$root/host" "$nemo" ${baseline_host:+"$(cd "$baseline_host" && pwd)"} || exit 1
first=stream
[ -n "$baseline_host" ] && first=baseline
[ -f /tmp/voxmux-clip45.wav ] || python3 "$root/bench/gpu/make-clip.py" /tmp/voxmux-clip45.wav 45

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# POST one clip; prints the milliseconds to the answer, fails unless 200.
transcribe_ms() {
  node -e 'const { readFileSync } = require("node:fs");
    const form = new FormData();
    form.append("file", new Blob([readFileSync(process.argv[2])], { type: "audio/wav" }), "clip.wav");
    form.append("model", "parakeet");
    const t0 = performance.now();
    fetch(process.argv[1] + "/v1/audio/transcriptions", { method: "POST", body: form }).then(async (r) => {
      await r.text(); process.stdout.write(String(Math.round(performance.now() - t0))); process.exit(r.ok ? 0 : 1); },
      () => process.exit(1));' "$1" "$2"
}

port=8500
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then order="$first parallel"; else order="parallel $first"; fi
  for name in $order; do
    port=$((port + 1))
    run="$name-round$round"
    echo "== $run (port $port)"
    python3 "$root/bench/gpu/boot-weights.py" drop-cache "$nemo" > /dev/null
    started=$(now_ms)
    node "$root/.bundle/voxmux.mjs" serve --config "$out/configs/$name.json" --port "$port" --log-level info > "$out/logs/$run.server.log" 2>&1 &
    server=$!
    ok=false
    until all_ready "http://127.0.0.1:$port/health/ready" > /dev/null 2>&1; do
      if ! kill -0 "$server" 2>/dev/null; then echo "server died"; tail -20 "$out/logs/$run.server.log"; break; fi
      if grep -q '"instance failed to start"' "$out/logs/$run.server.log"; then
        echo "instance failed to start"; grep '"instance failed to start"' "$out/logs/$run.server.log" | head -1 | cut -c1-600; break
      fi
      if [ $(( $(now_ms) - started )) -gt 600000 ]; then echo "not ready in 600 s"; kill -9 "$server"; break; fi
      sleep 0.2
    done
    if kill -0 "$server" 2>/dev/null && all_ready "http://127.0.0.1:$port/health/ready" > /dev/null 2>&1; then ok=true; fi
    ready_ms=$(( $(now_ms) - started ))
    first_ms=null wake_ms=null
    if $ok; then
      get "http://127.0.0.1:$port/health/ready" > "$out/runs/$run.ready.json"
      first_ms=$(transcribe_ms "http://127.0.0.1:$port" /tmp/voxmux-clip45.wav) || first_ms=null
      get "http://127.0.0.1:$port/metrics" > "$out/logs/$run.metrics.txt"
      grep '"instance ready"' "$out/logs/$run.server.log" | tail -1
      echo "ready after $ready_ms ms; first answer $first_ms ms"
      if [ "$wake" = 1 ]; then
        # A request at a stopped model: sleep it, drop the page cache, then time one clip to its answer.
        if post "http://127.0.0.1:$port/v1/models/parakeet/sleep?wait=true" > /dev/null; then
          python3 "$root/bench/gpu/boot-weights.py" drop-cache "$nemo" > /dev/null
          wake_ms=$(transcribe_ms "http://127.0.0.1:$port" /tmp/voxmux-clip45.wav) || wake_ms=null
          grep '"model woke"' "$out/logs/$run.server.log" | tail -1
          echo "request at the stopped model answered after $wake_ms ms"
        else
          echo "sleep failed"
        fi
      fi
    fi
    printf '{"config":"%s","round":%d,"ok":%s,"serverStartToReadyMs":%d,"firstAnswerMs":%s,"wakeAnswerMs":%s}\n' \
      "$name" "$round" "$ok" "$ready_ms" "$first_ms" "$wake_ms" > "$out/runs/$run.timing.json"
    kill -TERM "$server" 2>/dev/null; wait "$server" 2>/dev/null
    # After every run, so that a run cut off by a time limit still leaves its results.
    python3 "$root/bench/gpu/boot-weights.py" summarize "$out" --command "$command_line" --commit "$commit" > /dev/null
  done
done
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(json.dumps({"commit": r["commit"], "summary": r["summary"], "read": r.get("read-compare", {}).get("summary")}, indent=2))' "$out/results.json"
