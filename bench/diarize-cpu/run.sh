#!/usr/bin/env bash
# Accuracy of the CPU default diarizer (voxmux-diarize-cpu, the classical-diarizer adapter) through
# the server, as it serves: the gateway's Silero VAD regions, whole files (POST /v1/audio/diarization)
# and sessions of 15 s chunks (the sessions API, scored on the final timeline). With a baseline
# commit, the same runs against a server built from that commit, side by side.
#
#   bash bench/diarize-cpu/run.sh OUT [BASELINE_COMMIT] [MANIFEST]
#
# MANIFEST defaults to bench/diarize-cpu/testdata.jsonl: the two 30 s AMI excerpts of pyannote's
# debug set and Picovoice's 3-speaker sample from the shared test data (beside the repository).
# Writes OUT/<side>-<whole|chunks>/ (results.json, results.csv, summary.md) and OUT/summary.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
baseline=${2:-}
manifest=$(cd "$(dirname "${3:-$root/bench/diarize-cpu/testdata.jsonl}")" && pwd)/$(basename "${3:-testdata.jsonl}")
source "$root/bench/gpu/serve-lib.sh"
build_sides "$root" "$baseline"

port=8751
for side in "${sides[@]}"; do
  name=${side%%:*} dir=${side#*:}
  port=$((port + 1))
  cat > "$out/$name-config.json" <<JSON
{"gateway": {"port": $port}, "models": {"voxmux-diarize-cpu": {"adapter": "classical-diarizer", "instances": 1}}}
JSON
  (cd "$dir" && exec node bin/voxmux.mjs serve --config "$out/$name-config.json") > "$out/$name-server.log" 2>&1 &
  pid=$!
  wait_ready all_ready "http://127.0.0.1:$port/health/ready" "$pid" "$out/$name-server.log" 180
  for how in whole chunks; do
    flags=()
    [ "$how" = chunks ] && flags=(--chunk-s 15)
    node "$root/bin/voxmux.mjs" bench diarize --mode accuracy --url "http://127.0.0.1:$port" --model voxmux-diarize-cpu \
      --manifest "$manifest" --concurrency 1 "${flags[@]}" --label "$name $how" --out "$out/$name-$how"
  done
  kill -TERM "$pid"; wait "$pid" || true
done

node - "$out" "${sides[@]%%:*}" > "$out/summary.md" <<'JS'
const { readFileSync } = require('node:fs');
const [out, ...names] = process.argv.slice(2);
const pct = (x) => `${(100 * x).toFixed(1)} %`;
const rows = [];
for (const name of names)
  for (const how of ['whole', 'chunks']) {
    const r = JSON.parse(readFileSync(`${out}/${name}-${how}/results.json`, 'utf8'));
    const t = r.totals;
    const per = r.items.map((i) => `${i.audio.split('/').pop()} ${i.score ? pct(i.score.der) : i.errorCode}`).join(', ');
    rows.push(`| ${name} | ${how === 'whole' ? 'whole file' : '15 s chunks'} | ${pct(t.der)} | ${pct(t.missedS / t.scoredSpeechS)} | ${pct(t.falseAlarmS / t.scoredSpeechS)} | ${pct(t.confusionS / t.scoredSpeechS)} | ${per} |`);
  }
console.log('| side | as | DER | missed | false alarm | confusion | per file |\n| --- | --- | --- | --- | --- | --- | --- |');
console.log(rows.join('\n'));
JS
cat "$out/summary.md"
