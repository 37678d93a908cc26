#!/usr/bin/env bash
# Part (a) of the diarization benchmark (bench/gpu/run-diarize.sh) for several layouts of the
# Sortformer instances on one GPU, side by side in one run: for each layout a server of the Sortformer
# instances alone (DIARIZE_BENCH_SERVER=diarize: no ASR model to compile, so each boots in seconds)
# runs a1 (one session, chunks as fast as answered) and a2 (DIARIZE_BENCH_LEVELS real-time sessions),
# then stops. A layout is INSTANCESxPERCENT:IN_FLIGHT, for example 4x25:1 (four instances capped at
# 25 % of the SMs, one batch in flight each) or 2x100:2 (two uncapped instances under MPS, two in
# flight). Pick the layout for the full run (parts a and b with the ASR model) from OUT/summary.md.
#
# Usage: bash bench/gpu/run-diarize-layouts.sh OUT_DIR LAYOUT [LAYOUT ...]
# Every other DIARIZE_BENCH_* setting reaches run-diarize.sh (DIARIZE_BENCH_LEVELS, _IDLE_CHUNKS,
# _PROCESSES, _GATEWAY_THREADS, _COMPILE, ...); DIARIZE_BENCH_LAYOUT_BUDGET_S (150) bounds each layout
# (boot included). BENCH_DRY=1 runs it on the CPU with tiny models. Writes OUT_DIR/<layout>/ (each
# run-diarize.sh output) and OUT_DIR/summary.md.
set -uo pipefail
out=${1:?usage: run-diarize-layouts.sh OUT_DIR LAYOUT [LAYOUT ...]}
shift
[ $# -gt 0 ] || { echo "usage: run-diarize-layouts.sh OUT_DIR LAYOUT [LAYOUT ...]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
budget_s=${DIARIZE_BENCH_LAYOUT_BUDGET_S:-150}
for layout in "$@"; do
  [[ $layout =~ ^[0-9]+x[0-9]+:[0-9]+$ ]] || { echo "Expected a layout INSTANCESxPERCENT:IN_FLIGHT (4x25:1): got '$layout'" >&2; exit 2; }
done
mkdir -p "$out"
for layout in "$@"; do
  instances=${layout%%x*} rest=${layout#*x}
  percent=${rest%%:*} in_flight=${rest#*:}
  echo "=== layout $layout: $instances instance(s) at $percent %, $in_flight batch(es) in flight"
  DIARIZE_BENCH_SERVER=diarize DIARIZE_BENCH_PHASES=a DIARIZE_BENCH_INSTANCES=$instances \
    DIARIZE_BENCH_MPS_PERCENT=$percent DIARIZE_BENCH_IN_FLIGHT=$in_flight DIARIZE_BENCH_BUDGET_S=$budget_s \
    timeout $(( budget_s + 30 )) bash "$root/bench/gpu/run-diarize.sh" "$out/$layout" || echo "layout $layout ended with status $?"
done
node - "$out" "$@" > "$out/summary.md" <<'JS'
const { existsSync, readFileSync } = require('node:fs');
const [out, ...layouts] = process.argv.slice(2);
const ms = (v) => (typeof v === 'number' ? v.toFixed(1) : 'n/a');
const lines = ['# Diarization part (a) by layout of the Sortformer instances', ''];
const first = layouts.map((l) => `${out}/${l}/results.json`).find((f) => existsSync(f));
if (first !== undefined) {
  const r = JSON.parse(readFileSync(first, 'utf8'));
  for (const key of ['date', 'machine', 'gpu', 'commit', 'settings']) if (r[key] !== undefined) lines.push(`- ${key}: ${r[key]}`);
  lines.push('');
}
lines.push('| layout | boot s | a1: 1 session p50 / p95 ms | level | chunks/s | ok / chunks | p50 / p95 / p99 ms | errors, expiries |');
lines.push('| --- | ---: | --- | ---: | ---: | ---: | --- | --- |');
for (const layout of layouts) {
  const file = `${out}/${layout}/results.json`;
  if (!existsSync(file)) {
    lines.push(`| ${layout} | | no results | | | | | |`);
    continue;
  }
  const r = JSON.parse(readFileSync(file, 'utf8'));
  const phases = r.phases ?? {};
  const idle = phases['a1-idle']?.totals?.latencyMs;
  const a1 = idle ? `${ms(idle.p50)} / ${ms(idle.p95)}` : 'n/a';
  const levels = Object.entries(phases).filter(([name]) => name.startsWith('a2-rt-'));
  if (levels.length === 0) lines.push(`| ${layout} | ${r.bootS ?? 'n/a'} | ${a1} | | | | | ${r.status ?? ''} |`);
  for (const [name, p] of levels) {
    const t = p.totals ?? {};
    const l = t.latencyMs ?? {};
    const errors = Object.values(t.errors ?? {}).reduce((a, b) => a + b, 0) + (t.sessionsFailed ?? 0);
    lines.push(`| ${layout} | ${r.bootS ?? 'n/a'} | ${a1} | ${name.slice('a2-rt-'.length)} | ${ms(t.chunksPerSecond)} | ` +
      `${t.ok ?? 'n/a'} / ${t.chunks ?? 'n/a'} | ${ms(l.p50)} / ${ms(l.p95)} / ${ms(l.p99)} | ${errors}, ${t.expiries ?? 'n/a'} |`);
  }
}
lines.push('', 'Targets (issue #17): one session p50 <= 20 ms a chunk; 5,000 real-time sessions p95 <= 100 ms, no errors or expiries.');
process.stdout.write(lines.join('\n') + '\n');
JS
cat "$out/summary.md"
