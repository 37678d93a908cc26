#!/usr/bin/env bash
# The diarization benchmark of issue #17 on one GPU, in one run that fits a 9-minute limit. One server
# (`mixed` of diarize-configs.mjs: parakeet 1 x 100 % and DIARIZE_BENCH_INSTANCES sortformer x
# DIARIZE_BENCH_MPS_PERCENT %, all under MPS on GPU 0) serves every phase:
#   (a) diarization alone (the ASR instance idle):
#       a1-idle         one session sending DIARIZE_BENCH_IDLE_CHUNKS chunks as fast as answered: p50 per chunk;
#       a2-rt-N         for each N in DIARIZE_BENCH_LEVELS, N real-time sessions (a chunk every chunk length,
#                       starts spread over one chunk length) of a two-chunk recording;
#   (b) ASR beside diarization:
#       b1-asr-alone    the ASR ramp (`bench transcribe`, 45 s clips, closed loop, p95 <= 1 s) with the
#                       diarization instances idle;
#       b2-asr-with-diarization and b2-diarization-load
#                       the same ramp while DIARIZE_BENCH_B_SESSIONS real-time sessions run (the ramp starts
#                       once every session has started, and they last until it ends);
#       b3-asr-alone-again  the ramp alone once more, for the run-to-run noise.
# Every phase adds itself to OUT/results.json and OUT/summary.md as soon as it ends (diarize-results.mjs);
# a phase that would not end within DIARIZE_BENCH_BUDGET_S of the start is skipped and recorded so.
# Time with the defaults, for a 9-minute (540 s) limit: setup ~5 s; boot 30-150 s (nine instances load
# one after another; sortformer captures a graph per batch size, parakeet compiles); a1 ~3 s; a2 ~32 s
# per level (two chunk lengths and the last answers) on a server that keeps up, up to 145 s a level on one
# that does not (the first H200 run), ~65 s; b1 ~50 s (6 levels x (1 s warmup + 4 s window + drain));
# b2 90 s (6-chunk sessions: 15 s for every session to start, the ramp, 15 s margin); b3 ~50 s: ~270 s
# after the boot. Run it as `timeout 535 bash bench/gpu/run-diarize.sh OUT_DIR`. The instances'
# 'batch pipeline' log lines (batch sizes, model time, the adapter's stage times) are copied to
# OUT/logs/pipeline.jsonl.
# The ASR capacity alone is measured on the same server with the diarization instances idle, not on a
# server without them: the same processes, MPS daemon and partitions, no second boot, so the load is
# the only difference between b1/b3 and b2.
#
# Needs: node on PATH, the bundle (.bundle/voxmux.mjs and .bundle/voxmux-bench.mjs: npm run bundle),
# python3 with torch + CUDA (numpy for the clips).
# Usage: bash bench/gpu/run-diarize.sh OUT_DIR
# Settings (environment): DIARIZE_BENCH_LEVELS (500,5000), DIARIZE_BENCH_IDLE_CHUNKS (20),
# DIARIZE_BENCH_CHUNK_S (15), DIARIZE_BENCH_B_SESSIONS (5000), DIARIZE_BENCH_ASR_LEVELS
# (1,64,128,192,224,256), DIARIZE_BENCH_ASR_STEP_S (4), DIARIZE_BENCH_ASR_WARMUP_S (1),
# DIARIZE_BENCH_BUDGET_S (500), DIARIZE_BENCH_BOOT_TIMEOUT_S (240), DIARIZE_BENCH_PHASES (a,b: which
# parts run), DIARIZE_BENCH_PROCESSES (4: bench processes that send the sessions; one process sending
# 5,000 sessions was itself a bottleneck, at 131 % of a core); the server: DIARIZE_BENCH_INSTANCES (8), DIARIZE_BENCH_MPS_PERCENT (12),
# DIARIZE_BENCH_MAX_BATCH (64), DIARIZE_BENCH_QUEUE_DELAY_MS (2), DIARIZE_BENCH_IN_FLIGHT (3: batches in flight per Sortformer instance; the ASR instance has 3), DIARIZE_BENCH_COMPILE (0; 1: the Sortformer encoder compiled; 2: its encoder and head), DIARIZE_BENCH_CPU_THREADS (0: the server's default share of the cores; else each Sortformer instance's cpuThreads),
# DIARIZE_BENCH_DEVICE (cuda), DIARIZE_BENCH_SORTFORMER_CONFIG / DIARIZE_BENCH_ASR_CONFIG (full), see
# diarize-configs.mjs; DIARIZE_BENCH_SERVER (mixed; diarize: the Sortformer instances alone, part a only,
# a boot without the ASR model's compilation, as bench/gpu/run-diarize-layouts.sh runs it). DIARIZE_BENCH_CLIP_DIR: where the WAV clips go (/tmp/voxmux-diarize-clips). BENCH_COMMIT: the commit to record where the tree has no .git.
# BENCH_DRY=1: a dry run without a GPU (tiny CPU models, one instance, tiny levels, 3 s chunks), to
# check the script end to end.
set -uo pipefail
out=${1:?usage: run-diarize.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
started=$(date +%s)
command_line="bash bench/gpu/run-diarize.sh $*"

if [ "${BENCH_DRY:-0}" = 1 ]; then
  export DIARIZE_BENCH_DEVICE=${DIARIZE_BENCH_DEVICE:-cpu} DIARIZE_BENCH_INSTANCES=${DIARIZE_BENCH_INSTANCES:-1}
  : "${DIARIZE_BENCH_LEVELS:=2,4}" "${DIARIZE_BENCH_IDLE_CHUNKS:=3}" "${DIARIZE_BENCH_CHUNK_S:=3}"
  : "${DIARIZE_BENCH_B_SESSIONS:=4}" "${DIARIZE_BENCH_ASR_LEVELS:=1,2}" "${DIARIZE_BENCH_ASR_STEP_S:=2}"
  : "${DIARIZE_BENCH_ASR_WARMUP_S:=0}" "${DIARIZE_BENCH_BOOT_TIMEOUT_S:=300}"
fi
levels=${DIARIZE_BENCH_LEVELS:-500,5000}
idle_chunks=${DIARIZE_BENCH_IDLE_CHUNKS:-20}
chunk_s=${DIARIZE_BENCH_CHUNK_S:-15}
b_sessions=${DIARIZE_BENCH_B_SESSIONS:-5000}
processes=${DIARIZE_BENCH_PROCESSES:-4}
asr_levels=${DIARIZE_BENCH_ASR_LEVELS:-1,64,128,192,224,256}
asr_step_s=${DIARIZE_BENCH_ASR_STEP_S:-4}
asr_warmup_s=${DIARIZE_BENCH_ASR_WARMUP_S:-1}
budget_s=${DIARIZE_BENCH_BUDGET_S:-500}
boot_timeout_s=${DIARIZE_BENCH_BOOT_TIMEOUT_S:-240}
phases=${DIARIZE_BENCH_PHASES:-a,b}
server_config=${DIARIZE_BENCH_SERVER:-mixed}
case "$server_config" in
  mixed) ;;
  diarize) [[ $phases != *b* ]] || { echo "DIARIZE_BENCH_SERVER=diarize has no ASR model: set DIARIZE_BENCH_PHASES=a" >&2; exit 2; } ;;
  *) echo "DIARIZE_BENCH_SERVER must be mixed or diarize: got '$server_config'" >&2; exit 2 ;;
esac
for n in "$idle_chunks" "$chunk_s" "$b_sessions" "$asr_step_s" "$asr_warmup_s" "$budget_s" "$boot_timeout_s"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "DIARIZE_BENCH_* durations and counts must be whole numbers: got '$n'" >&2; exit 2; }
done
# The clips stay out of OUT_DIR (megabytes that need not come back).
clips=${DIARIZE_BENCH_CLIP_DIR:-${TMPDIR:-/tmp}/voxmux-diarize-clips}
mkdir -p "$out/configs" "$out/runs" "$out/logs" "$clips"
. "$root/bench/gpu/serve-lib.sh"
# Model hosts need a python3 with torch (with CUDA on the GPU machine): the first of these that has it.
if [ -z "${VOXMUX_SUPERVISOR_PYTHON_PATH:-}" ]; then
  for candidate in "$(command -v python3)" /usr/bin/python3; do
    if "$candidate" -c 'import torch' 2> /dev/null; then export VOXMUX_SUPERVISOR_PYTHON_PATH=$candidate; break; fi
  done
fi
[ -n "${VOXMUX_SUPERVISOR_PYTHON_PATH:-}" ] || { echo "no python3 with torch: set VOXMUX_SUPERVISOR_PYTHON_PATH" >&2; exit 2; }
python=$VOXMUX_SUPERVISOR_PYTHON_PATH
results=$out/results.json
record() { node "$root/bench/gpu/diarize-results.mjs" "$@" || echo "could not record: $*"; }
elapsed() { echo $(( $(date +%s) - started )); }
# fits NAME SECONDS: true when SECONDS more stay within the budget; otherwise records NAME as skipped.
fits() {
  if [ $(( $(elapsed) + $2 )) -le "$budget_s" ]; then return 0; fi
  echo "== $1 skipped: needs ~$2 s, $(( budget_s - $(elapsed) )) s left of $budget_s"
  record skip "$results" "$1" "needs ~$2 s at $(elapsed) s into a ${budget_s} s budget"
  return 1
}
# The CPU seconds (user + system) a process has used so far, from /proc (0 where there is none).
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# The bench client's CPU seconds from `times` (children's user and system) written to FILE.
children_cpu_s() { awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); s += p[1] * 60 + p[2] } printf "%.2f", s }' "$1" 2>/dev/null || echo 0; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b > 0 ? 100 * a / b : 0) }'; }

# --- provenance
commit=${BENCH_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)}
if command -v nvidia-smi > /dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
else
  gpu=none
fi
machine="$(nproc) CPU cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(uname -sr), node $(node --version), $("$python" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo 'no torch')"
settings="levels=$levels idle_chunks=$idle_chunks chunk_s=$chunk_s b_sessions=$b_sessions asr_levels=$asr_levels asr_step_s=$asr_step_s asr_warmup_s=$asr_warmup_s budget_s=$budget_s phases=$phases processes=$processes $(env | grep '^DIARIZE_BENCH_' | sort | tr '\n' ' ')"
record init "$results" "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" "machine=$machine" "gpu=$gpu" "commit=$commit" \
  "command=${BENCH_DRY:+BENCH_DRY=$BENCH_DRY }$command_line" "settings=$settings" "config=$server_config" status=started

node "$root/bench/gpu/diarize-configs.mjs" "$out/configs" "${DIARIZE_BENCH_HOST_PATH:-$root/host}" || exit 2
instances=$(node -e 'const c = require(process.argv[1]); process.stdout.write(String(c.models.sortformer.instances))' "$out/configs/$server_config.json")
percent=$(node -e 'const c = require(process.argv[1]); process.stdout.write(String(c.models.sortformer.mpsActiveThreadPercentages[0] ?? 100))' "$out/configs/$server_config.json")
record set "$results" "diarizationInstances=$instances" "mpsPercent=$percent"

# --- clips: 16 kHz mono 16-bit WAV, read once by each bench process and reused by every session
# (a 15 s chunk is 480 KB: 5,000 real-time sessions upload about 160 MB/s).
asr_level_count=$(echo "$asr_levels" | tr ',' '\n' | grep -c .)
asr_ramp_s=$(( asr_level_count * (asr_step_s + asr_warmup_s + 3) + 5 ))
# b2's sessions: one chunk length for every session to start, the ramp, and a chunk length of margin.
b_chunks=$(( (chunk_s + asr_ramp_s + chunk_s + chunk_s - 1) / chunk_s ))
"$python" "$root/bench/gpu/make-clip.py" "$clips/idle.wav" $(( idle_chunks * chunk_s )) &&
  "$python" "$root/bench/gpu/make-clip.py" "$clips/two-chunks.wav" $(( 2 * chunk_s )) &&
  "$python" "$root/bench/gpu/make-clip.py" "$clips/b-load.wav" $(( b_chunks * chunk_s )) &&
  "$python" "$root/bench/gpu/make-clip.py" "$clips/asr45.wav" 45 || { record set "$results" status=clips-failed; exit 2; }

# --- the server
port=8600
url=http://127.0.0.1:$port
echo "== boot (budget ${budget_s} s, at $(elapsed) s)"
boot_started=$(date +%s)
node "$root/.bundle/voxmux.mjs" serve --config "$out/configs/$server_config.json" --port "$port" --log-level info > "$out/logs/server.log" 2>&1 &
server=$!
# A server that has not drained 30 s after TERM is killed, so that the port is free for the next run
# (run-diarize-layouts.sh starts one layout after another on it); its instances end with their pipes.
stop_server() {
  kill -TERM $server 2>/dev/null || return 0
  for _ in $(seq 60); do kill -0 $server 2>/dev/null || break; sleep 0.5; done
  kill -KILL $server 2>/dev/null
  wait $server 2>/dev/null
}
trap stop_server EXIT
trap "exit 143" TERM INT
# Ready when every instance is; a model that fails to load ends the run at once, not at the timeout.
boot_failed() {
  grep -q '"msg":"load failed"' "$out/logs/server.log" && { echo "an instance failed to load:"; grep '"load failed"' "$out/logs/server.log" | tail -2 | cut -c1-600; }
}
booted=0
until [ $(( $(date +%s) - boot_started )) -gt "$boot_timeout_s" ]; do
  if all_ready "$url/health/ready" > /dev/null 2>&1; then booted=1; break; fi
  if ! kill -0 $server 2> /dev/null; then echo "server died"; tail -20 "$out/logs/server.log" | cut -c1-600; break; fi
  boot_failed && break
  sleep 1
done
if [ $booted = 0 ]; then
  echo "server not ready after $(( $(date +%s) - boot_started )) s"
  record set "$results" status=server-not-ready "bootS=$(( $(date +%s) - boot_started ))"
  exit 1
fi
record set "$results" "bootS=$(( $(date +%s) - boot_started ))"
get "$url/health/ready" > "$out/logs/ready.json"

# diarize NAME SESSIONS PACING CLIP [background]: one `bench diarize --mode load` (its sessions spread over
# DIARIZE_BENCH_PROCESSES bench processes), recorded as NAME with the bench clients' and the server's
# (gateway process) CPU over its wall time.
diarize() {
  local name=$1 sessions=$2 pacing=$3 clip=$4 t0 c0 t1 c1 client
  t0=$(date +%s.%N); c0=$(cpu_s $server)
  ( node "$root/.bundle/voxmux.mjs" bench diarize --mode load --url "$url" --model sortformer --audio "$clip" \
      --sessions "$sessions" --chunk-s "$chunk_s" --pacing "$pacing" --timeout-s 60 --processes "$processes" \
      --out "$out/runs/$name" --label "$name" > "$out/logs/$name.txt" 2>&1
    times > "$out/logs/$name.times" )
  t1=$(date +%s.%N); c1=$(cpu_s $server)
  local wall; wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  client=$(children_cpu_s "$out/logs/$name.times")
  tail -4 "$out/logs/$name.txt"
  record phase "$results" "$name" "$out/runs/$name/results.json" "wallS=$wall" "clientCpuS=$client" \
    "clientCpuPercent=$(pct "$client" "$wall")" "serverCpuPercent=$(pct "$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" "$wall")"
}
# asr NAME: the ASR ramp, recorded as NAME.
asr() {
  local name=$1
  node "$root/.bundle/voxmux.mjs" bench transcribe --url "$url" --model parakeet --audio "$clips/asr45.wav" \
    --concurrency "$asr_levels" --duration-s "$asr_step_s" --warmup-s "$asr_warmup_s" --slo 'p95<=1000ms' \
    --timeout-s 120 --abandon-after-s 5 --out "$out/runs/$name" --label "$name" 2>&1 | grep -v '^step .* | ' > "$out/logs/$name.txt"
  tail -6 "$out/logs/$name.txt"
  record phase "$results" "$name" "$out/runs/$name/results.json"
}

if [[ $phases == *a* ]]; then
  # (a1) a few seconds; (a2) each level two chunk lengths plus the last answers.
  if fits a1-idle $(( idle_chunks + 15 )); then
    echo "== a1-idle: 1 session, $idle_chunks chunks as fast as answered (at $(elapsed) s)"
    diarize a1-idle 1 asap "$clips/idle.wav"
  fi
  for n in $(echo "$levels" | tr ',' ' '); do
    if fits "a2-rt-$n" $(( 2 * chunk_s + 12 )); then
      echo "== a2-rt-$n: $n real-time sessions of 2 chunks (at $(elapsed) s)"
      diarize "a2-rt-$n" "$n" realtime "$clips/two-chunks.wav"
    fi
  done
fi

if [[ $phases == *b* ]]; then
  if fits b1-asr-alone "$asr_ramp_s"; then
    echo "== b1-asr-alone: ASR ramp $asr_levels, diarization instances idle (at $(elapsed) s)"
    asr b1-asr-alone
  fi
  b_load_s=$(( b_chunks * chunk_s + 10 ))
  if fits b2-asr-with-diarization "$b_load_s"; then
    echo "== b2: $b_sessions real-time sessions of $b_chunks chunks, the ASR ramp once all have started (at $(elapsed) s)"
    diarize b2-diarization-load "$b_sessions" realtime "$clips/b-load.wav" &
    load=$!
    sleep $(( chunk_s + 1 ))
    asr b2-asr-with-diarization
    wait $load
  fi
  if fits b3-asr-alone-again "$asr_ramp_s"; then
    echo "== b3-asr-alone-again (at $(elapsed) s)"
    asr b3-asr-alone-again
  fi
fi

get "$url/metrics" > "$out/logs/metrics.txt"
grep '"batch pipeline"' "$out/logs/server.log" > "$out/logs/pipeline.jsonl" || true
command -v nvidia-smi > /dev/null && nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$out/logs/gpu-apps.csv" 2>&1
record set "$results" status=finished "elapsedS=$(elapsed)"
echo "== done in $(elapsed) s"
cat "$out/summary.md"
