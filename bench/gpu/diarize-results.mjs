// Keeps OUT/results.json and OUT/summary.md of bench/gpu/run-diarize.sh up to date, one phase at a
// time, so that a run stopped by its time limit keeps what it measured.
// Usage:
//   node bench/gpu/diarize-results.mjs init RESULTS.json KEY=VALUE ...         the run's provenance
//   node bench/gpu/diarize-results.mjs set RESULTS.json KEY=VALUE ...          more top-level facts
//   node bench/gpu/diarize-results.mjs phase RESULTS.json NAME BENCH_RESULTS.json [KEY=VALUE ...]
//   node bench/gpu/diarize-results.mjs skip RESULTS.json NAME REASON
// A phase's BENCH_RESULTS.json is what `voxmux bench diarize` or `bench transcribe` wrote; its totals
// (not its per-chunk rows) go under phases[NAME] with the KEY=VALUE facts (numbers when they parse).
// summary.md is rewritten from results.json after every call.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export const SCHEMA = 'voxmux.bench.diarize-gpu/v1';
/** Targets of issue #17's benchmark. */
export const TARGETS = { idleP50Ms: 20, realtimeP95Ms: 100, asrCapacityDropPercent: 15 };

const toValue = (text) => (text !== '' && Number.isFinite(Number(text)) ? Number(text) : text);
function pairs(args) {
  const out = {};
  for (const arg of args) {
    const at = arg.indexOf('=');
    if (at <= 0) throw new Error(`Expected KEY=VALUE: got '${arg}'`);
    out[arg.slice(0, at)] = toValue(arg.slice(at + 1));
  }
  return out;
}

/** What a phase keeps of a bench results file: totals or steps and capacity, never per-chunk rows. */
export function phaseOf(bench) {
  if (bench.schema?.startsWith('voxmux.bench.diarize')) {
    return { kind: 'diarize-load', label: bench.label, options: bench.options, totals: bench.totals };
  }
  const steps = (bench.steps ?? []).map((s) => ({
    concurrency: s.concurrency,
    requestsPerSecond: s.requestsPerSecond,
    ok: s.ok,
    errorRate: s.errorRate,
    p50Ms: s.latencyMs?.p50,
    p95Ms: s.latencyMs?.p95,
    p99Ms: s.latencyMs?.p99,
    meetsSlo: s.meetsSlo,
    clientCpuPercentMax: s.clientCpuPercentMax,
  }));
  // Capacity: the most requests/s of a level within the SLO (p95 <= 1 s); a 'peak' basis met none.
  const c = bench.capacity;
  const capacity = c?.basis === 'slo' ? { requestsPerSecond: c.requestsPerSecond, concurrency: c.level } : undefined;
  return { kind: 'transcribe-ramp', label: bench.label, steps, capacity };
}

const fmt = (v, digits = 1) => (typeof v === 'number' ? v.toFixed(digits) : 'n/a');

/** Compares the ASR capacities alone and under diarization load, when both were measured. */
export function asrComparison(phases) {
  const cap = (name) => phases[name]?.capacity?.requestsPerSecond;
  const alone = [cap('b1-asr-alone'), cap('b3-asr-alone-again')].filter((v) => typeof v === 'number');
  const loaded = cap('b2-asr-with-diarization');
  if (alone.length === 0 || typeof loaded !== 'number') return undefined;
  const aloneRps = Math.max(...alone);
  const dropPercent = aloneRps > 0 ? (100 * (aloneRps - loaded)) / aloneRps : undefined;
  // Against the better of the runs alone (the stricter comparison); both are listed.
  return {
    aloneRunsRps: alone,
    aloneRps,
    withDiarizationRps: loaded,
    dropPercent: dropPercent === undefined ? undefined : Math.round(dropPercent * 10) / 10,
    meetsTarget: dropPercent !== undefined && dropPercent <= TARGETS.asrCapacityDropPercent,
  };
}

export function summaryMarkdown(results) {
  const lines = [`# Diarization GPU benchmark (issue #17)`, ''];
  for (const key of ['date', 'machine', 'gpu', 'commit', 'command', 'config', 'diarizationInstances', 'mpsPercent', 'status'])
    if (results[key] !== undefined) lines.push(`- ${key}: ${results[key]}`);
  lines.push('', '| phase | what | result |', '| --- | --- | --- |');
  for (const [name, p] of Object.entries(results.phases ?? {})) {
    if (p.skipped !== undefined) {
      lines.push(`| ${name} | skipped | ${p.skipped} |`);
    } else if (p.kind === 'diarize-load') {
      const t = p.totals ?? {};
      const l = t.latencyMs ?? {};
      const cpu = p.clientCpuPercent === undefined ? '' : `, bench client CPU ${fmt(p.clientCpuPercent)} %`;
      const gw = p.serverCpuPercent === undefined ? '' : `, server (gateway) CPU ${fmt(p.serverCpuPercent)} %`;
      // Runs written before the bench recorded its pacing have no sentLate.
      const late = t.sentLate === undefined ? '' : `, sent late ${t.sentLate} (at most ${fmt(t.maxLateMs)} ms)`;
      lines.push(
        `| ${name} | ${t.sessions} session(s), ${p.options?.pacing} | chunks ${t.chunks} (ok ${t.ok}), p50 ${fmt(l.p50)} ms, p95 ${fmt(l.p95)} ms, ` +
          `p99 ${fmt(l.p99)} ms, ${fmt(t.chunksPerSecond, 1)} chunks/s, RTF ${t.realTimeFactor}, errors ${JSON.stringify(t.errors)}, ` +
          `expiries ${t.expiries}, sessions failed ${t.sessionsFailed}${late}${cpu}${gw} |`,
      );
    } else {
      const steps = (p.steps ?? []).map((s) => `c${s.concurrency}: ${fmt(s.requestsPerSecond)} req/s p95 ${s.p95Ms} ms`).join('; ');
      const cap =
        p.capacity === undefined
          ? 'no level within p95 <= 1 s'
          : `capacity ${fmt(p.capacity.requestsPerSecond)} req/s at c${p.capacity.concurrency}`;
      lines.push(`| ${name} | ASR ramp | ${cap}; ${steps} |`);
    }
  }
  const c = results.asrComparison;
  if (c !== undefined)
    lines.push(
      '',
      `ASR capacity at p95 <= 1 s: alone ${fmt(c.aloneRps)} req/s (best of ${c.aloneRunsRps.map((v) => fmt(v)).join(', ')}), with diarization load ${fmt(c.withDiarizationRps)} req/s: ` +
        `drop ${fmt(c.dropPercent)} % (target <= ${TARGETS.asrCapacityDropPercent} %: ${c.meetsTarget ? 'met' : 'not met'})`,
    );
  lines.push(
    '',
    `Targets: idle p50 <= ${TARGETS.idleP50Ms} ms per 15 s chunk; real-time p95 <= ${TARGETS.realtimeP95Ms} ms with no errors or expiries; ASR capacity drop <= ${TARGETS.asrCapacityDropPercent} %.`,
  );
  return `${lines.join('\n')}\n`;
}

function load(path) {
  return existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : { schema: SCHEMA, phases: {} };
}
function save(path, results) {
  const comparison = asrComparison(results.phases ?? {});
  if (comparison !== undefined) results.asrComparison = comparison;
  writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(dirname(path), 'summary.md'), summaryMarkdown(results));
}

function main(argv) {
  const [verb, path, ...rest] = argv;
  if (path === undefined) throw new Error('usage: diarize-results.mjs init|set|phase|skip RESULTS.json ...');
  if (verb === 'init') return save(path, { schema: SCHEMA, ...pairs(rest), phases: {} });
  const results = load(path);
  if (verb === 'set') {
    Object.assign(results, pairs(rest));
  } else if (verb === 'phase') {
    const [name, benchPath, ...facts] = rest;
    if (name === undefined || benchPath === undefined) throw new Error('usage: phase RESULTS.json NAME BENCH_RESULTS.json [KEY=VALUE ...]');
    if (!existsSync(benchPath)) {
      results.phases[name] = { skipped: `no results (${benchPath})`, ...pairs(facts) };
    } else {
      results.phases[name] = { ...phaseOf(JSON.parse(readFileSync(benchPath, 'utf8'))), ...pairs(facts) };
    }
  } else if (verb === 'skip') {
    const [name, ...reason] = rest;
    results.phases[name] = { skipped: reason.join(' ') };
  } else {
    throw new Error(`Unknown verb '${verb}'`);
  }
  save(path, results);
}

if (process.argv[1]?.endsWith('diarize-results.mjs')) {
  try {
    main(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`diarize-results: ${err.message}\n`);
    process.exit(2);
  }
}
