# Shell helpers shared by the serving benchmarks (bench/gpu/run-asr.sh, run-speech.sh, boot.sh, the CPU
# runs under bench/diarize-cpu/ and bench/diarize-gateway-cpu/, ...): source it.
# The GPU machine may have no curl: HTTP goes through node.

# GET a URL to stdout; fails unless 2xx.
get() { node -e 'fetch(process.argv[1]).then(async (r) => { process.stdout.write(await r.text()); process.exit(r.ok ? 0 : 1); }, () => process.exit(1))' "$1"; }

# POST to a URL with no body, the answer to stdout; fails unless 2xx.
post() { node -e 'fetch(process.argv[1], { method: "POST" }).then(async (r) => { process.stdout.write(await r.text()); process.exit(r.ok ? 0 : 1); }, () => process.exit(1))' "$1"; }

# Every instance of every model ready, not just one per model: an instance still warming up would
# pause dispatch (exclusiveWarmup) or take no streams in the middle of a ramp.
all_ready() {
  get "$1" | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    const all = Object.values(JSON.parse(s).models).flatMap((m) => m.instances);
    process.exit(all.length > 0 && all.every((i) => i.state === "ready") ? 0 : 1); })'
}

# wait_ready CHECK URL PID LOG TIMEOUT_S: polls CHECK (get or all_ready) on URL until it passes;
# fails (and prints the log's tail) when the server PID exits or TIMEOUT_S pass.
wait_ready() {
  local check=$1 url=$2 pid=$3 log=$4 timeout_s=$5 started
  started=$(date +%s)
  until $check "$url" > /dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then echo "server died"; tail -20 "$log"; return 1; fi
    if [ $(( $(date +%s) - started )) -gt "$timeout_s" ]; then echo "server not ready in $timeout_s s"; tail -20 "$log"; kill -9 "$pid"; return 1; fi
    sleep 1
  done
  echo "ready after $(( $(date +%s) - started )) s"
}

# build_baseline ROOT COMMIT: a build of COMMIT beside the checkout at ROOT (a git worktree sharing its
# node_modules, removed when the script exits), for side-by-side runs; its folder in $baseline_dir.
build_baseline() {
  local root=$1 commit=$2
  baseline_dir=$(mktemp -d)/baseline
  git -C "$root" worktree add --detach -q "$baseline_dir" "$commit"
  trap 'git -C "'"$root"'" worktree remove --force "'"$baseline_dir"'"' EXIT
  ln -s "$root/node_modules" "$baseline_dir/node_modules"
  (cd "$baseline_dir" && npx tsc -p tsconfig.build.json)
}

# build_sides ROOT [BASELINE_COMMIT]: builds the checkout at ROOT and, given a commit, a baseline beside it
# (build_baseline); the sides to run are then in $sides as NAME:FOLDER, the candidate first.
build_sides() {
  local root=$1 baseline=${2:-}
  (cd "$root" && npx tsc -p tsconfig.build.json)
  sides=("candidate:$root")
  if [ -n "$baseline" ]; then
    build_baseline "$root" "$baseline"
    sides+=("baseline:$baseline_dir")
  fi
}
