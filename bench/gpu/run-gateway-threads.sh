#!/usr/bin/env bash
# Gateway threads (gateway.threads) on one machine, side by side in one run:
#   (1) the gateway's ceiling: the `test` engine (answers at once), 45 s WAV uploads (whole: no cut
#       at pauses, gateway.splitAboveMs 0), closed loop,
#       with 0, 1, 3 and 7 gateway threads (1, 2, 4 and 8 HTTP loops). CLIENTS bench processes
#       run at once (one Node client cannot send 1.44 MB uploads fast enough), each at
#       LEVEL / CLIENTS connections; requests/s are summed, the p95 is the clients' highest; the main
#       loop's and the threads' busy shares come from /metrics over the step (warmup included), as
#       the main loop's time per call (its ceiling is 1000 / that many calls a second);
#   (2) with the GPU model (GATEWAY_THREADS_ASR=1): c25 of asr-configs.mjs with 0 gateway threads
#       and c25-t3 with 3, the usual ramp of one client (run-asr.sh, p95 <= 1 s).
# Needs: node on PATH, the bundle (.bundle/voxmux.mjs, npm run bundle), koffi in node_modules (the
# bundle loads it for gateway threads), python3 (with torch + CUDA for part 2).
# Usage: bash bench/gpu/run-gateway-threads.sh OUT_DIR
# Settings: GATEWAY_THREADS_LIST (0,1,3,7), GATEWAY_THREADS_LEVELS (64,128,256), GATEWAY_THREADS_CLIENTS (4),
# GATEWAY_THREADS_STEP_S (6), GATEWAY_THREADS_INSTANCES (1: test instances behind the main thread; one
# Python instance answering 450-580 uploads a second was itself near its limit), GATEWAY_THREADS_ASR (1),
# ASR_BENCH_LEVELS for part 2 (1,64,128,192,256,320,384).
set -uo pipefail
out=${1:?usage: run-gateway-threads.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/bench/gpu/serve-lib.sh"
threads_list=${GATEWAY_THREADS_LIST:-0,1,3,7}
levels=${GATEWAY_THREADS_LEVELS:-64,128,256}
clients=${GATEWAY_THREADS_CLIENTS:-4}
step_s=${GATEWAY_THREADS_STEP_S:-6}
instances=${GATEWAY_THREADS_INSTANCES:-1}
mkdir -p "$out/logs" "$out/runs" "$out/configs"
python3 "$root/bench/gpu/make-clip.py" /tmp/voxmux-clip45.wav 45
export VOXMUX_SUPERVISOR_PYTHON_PATH=${VOXMUX_SUPERVISOR_PYTHON_PATH:-$(command -v python3)}
{ echo "command: bash bench/gpu/run-gateway-threads.sh $*"; echo "commit: ${BENCH_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null)}";
  echo "cpus: $(nproc)"; echo "test instances: $instances"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null; node --version; } > "$out/machine.txt"

echo "| gateway threads | clients | requests/s | p95 ms (highest client) | errors | main loop busy % | gateway threads busy % (sum) | main loop ms per call | server CPU % |" > "$out/ceiling.md"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" >> "$out/ceiling.md"
# The main loop's and the gateway threads' busy seconds and the calls answered so far, from /metrics.
loop_counters() {
  get "$1" | node -e '
    let text = ""; process.stdin.on("data", (d) => (text += d)).on("end", () => {
      const sum = (re) => text.split("\n").filter((l) => re.test(l)).reduce((a, l) => a + Number(l.split(" ").pop()), 0);
      console.log([sum(/^voxmux_event_loop_busy_seconds_total /), sum(/^voxmux_gateway_thread_busy_seconds_total\{/),
        sum(/^voxmux_gateway_calls_total\{endpoint="\/v1\/audio\/transcriptions"/), Date.now() / 1000].join(" "));
    });'
}
port=8600
for threads in ${threads_list//,/ }; do
  port=$((port + 1))
  cat > "$out/configs/test-t$threads.json" <<EOF
{ "gateway": { "threads": $threads, "maxBodyBytes": 8388608, "requestTimeoutMs": 120000, "splitAboveMs": 0 },
  "scheduler": { "maxQueuedRequests": 4096, "lengthBucketsMs": [45000], "maxRunningBatchesPerInstance": 3 },
  "supervisor": { "hostPath": "$root/host" },
  "models": { "parakeet": { "adapter": "test", "instances": $instances, "maxBatchSize": 32, "maxQueueDelayMs": 5, "dispatchWhenIdle": true } } }
EOF
  node "$root/.bundle/voxmux.mjs" serve --config "$out/configs/test-t$threads.json" --port "$port" --log-level warn > "$out/logs/test-t$threads.server.log" 2>&1 &
  server=$!
  wait_ready all_ready "http://127.0.0.1:$port/health/ready" $server "$out/logs/test-t$threads.server.log" 120 || { echo "server t$threads not started"; continue; }
  for level in ${levels//,/ }; do
    per=$(( (level + clients - 1) / clients ))
    cpu0=$(awk '{print $14+$15}' /proc/$server/stat 2>/dev/null || echo 0)
    loops0=$(loop_counters "http://127.0.0.1:$port/metrics")
    for c in $(seq 1 "$clients"); do
      node "$root/.bundle/voxmux.mjs" bench transcribe --url "http://127.0.0.1:$port" --model parakeet --audio /tmp/voxmux-clip45.wav \
        --concurrency "$per" --duration-s "$step_s" --warmup-s 2 --abandon-after-s 5 --metrics-url off --gpu off \
        --out "$out/runs/test-t$threads-c$level-client$c" --label "t$threads-c$level-$c" > "$out/logs/test-t$threads-c$level-client$c.log" 2>&1 &
    done
    wait $(jobs -p | grep -v "^$server$") 2>/dev/null
    cpu1=$(awk '{print $14+$15}' /proc/$server/stat 2>/dev/null || echo 0)
    loops1=$(loop_counters "http://127.0.0.1:$port/metrics")
    LOOPS="$loops0 $loops1" node -e '
      const fs = require("fs"); const [dir, threads, level, clients, seconds, ticks] = process.argv.slice(1);
      let rps = 0, p95 = 0, errors = 0;
      for (let c = 1; c <= Number(clients); c++) {
        const file = `${dir}/runs/test-t${threads}-c${level}-client${c}/results.json`;
        if (!fs.existsSync(file)) { errors = NaN; continue; }
        const step = JSON.parse(fs.readFileSync(file, "utf8")).steps[0];
        rps += step.requestsPerSecond; p95 = Math.max(p95, step.latencyMs.p95 ?? 0); errors += step.errors;
      }
      const cpu = (Number(ticks) / 100 / Number(seconds)) * 100;
      const [m0, t0, c0, s0, m1, t1, c1, s1] = process.env.LOOPS.split(" ").map(Number);
      const span = s1 - s0;
      const main = ((m1 - m0) / span) * 100, others = ((t1 - t0) / span) * 100, perCall = ((m1 - m0) * 1000) / Math.max(1, c1 - c0);
      fs.appendFileSync(`${dir}/ceiling.md`, `| ${threads} | ${level} | ${rps.toFixed(1)} | ${p95.toFixed(0)} | ${errors} | ${main.toFixed(0)} | ${others.toFixed(0)} | ${perCall.toFixed(2)} | ${cpu.toFixed(0)} |\n`);
    ' "$out" "$threads" "$level" "$clients" "$((step_s + 7))" "$((cpu1 - cpu0))"
  done
  get "http://127.0.0.1:$port/metrics" > "$out/logs/test-t$threads.metrics.txt"
  kill -TERM $server; wait $server 2>/dev/null
done
cat "$out/ceiling.md"

if [ "${GATEWAY_THREADS_ASR:-1}" = 1 ]; then
  ASR_BENCH_LEVELS=${ASR_BENCH_LEVELS:-1,64,128,192,256,320,384} ASR_BENCH_IDLE_REQUESTS=${ASR_BENCH_IDLE_REQUESTS:-10} \
    bash "$root/bench/gpu/run-asr.sh" "$out/asr" c25-1x-b32-graphs-3inflight-compiled-all-fp8-idle c25-t3 2>&1 | tail -40
fi
