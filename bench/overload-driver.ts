/**
 * The overload scenario of issue 16: an open-loop load of transcription calls at a fixed rate
 * (arrivals do not wait for answers, as real callers beyond capacity do not), and what it shows:
 * how many calls were admitted and answered in time, how soon the first 429 came, and whether the
 * Retry-After the server sent matches how long its queue really took to drain.
 *
 * Used by the acceptance test (test/e2e/overload-admission.test.ts) and by bench/overload.ts.
 */

export interface OverloadLoad {
  /** The server's base URL (http://host:port). */
  url: string;
  /** Calls started per second. */
  ratePerS: number;
  durationMs: number;
  /** A fresh multipart body for each call. */
  body: () => FormData;
  headers?: Record<string, string>;
}

/** One call; times in milliseconds from the load's start. */
export interface CallRecord {
  sentMs: number;
  doneMs: number;
  /** HTTP status, or 0 when the connection failed. */
  status: number;
  code: string | undefined;
  /** The Retry-After header in seconds, when present. */
  retryAfterS: number | undefined;
}

/** Runs the load and resolves once every call has been answered. */
export async function driveOverload(load: OverloadLoad, nowMs: () => number = () => performance.now()): Promise<CallRecord[]> {
  const startMs = nowMs();
  const count = Math.floor((load.durationMs / 1000) * load.ratePerS);
  const calls: Promise<CallRecord>[] = [];
  for (let i = 0; i < count; i++) {
    const dueMs = startMs + (i * 1000) / load.ratePerS;
    const waitMs = dueMs - nowMs();
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    calls.push(call(load, startMs, nowMs));
  }
  return Promise.all(calls);
}

async function call(load: OverloadLoad, startMs: number, nowMs: () => number): Promise<CallRecord> {
  const sentMs = nowMs() - startMs;
  try {
    const res = await fetch(`${load.url}/v1/audio/transcriptions`, { method: 'POST', body: load.body(), headers: load.headers });
    const text = await res.text();
    let code: string | undefined;
    if (res.status !== 200) {
      try {
        code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
      } catch {
        code = undefined;
      }
    }
    const retryAfter = res.headers.get('retry-after');
    return {
      sentMs,
      doneMs: nowMs() - startMs,
      status: res.status,
      code,
      retryAfterS: retryAfter === null ? undefined : Number(retryAfter),
    };
  } catch {
    return { sentMs, doneMs: nowMs() - startMs, status: 0, code: undefined, retryAfterS: undefined };
  }
}

export interface OverloadSummary {
  calls: number;
  /** Calls by HTTP status (0: the connection failed). */
  byStatus: Record<string, number>;
  /** Calls not refused with 429 (answered 200, 504 or another error). */
  admitted: number;
  /** Admitted calls that ended in 504. */
  admittedDeadlineExceeded: number;
  /** Latency of the admitted calls, in milliseconds. */
  admittedP50Ms: number;
  admittedP95Ms: number;
  admittedMaxMs: number;
  /** When the first 429 answer arrived, from the load's start, in milliseconds; undefined: none. */
  first429Ms: number | undefined;
  /** The Retry-After of the last 429, in seconds. */
  lastRetryAfterS: number | undefined;
  /** From the last 429's answer until the last admitted call was answered, in milliseconds. */
  observedDrainMs: number | undefined;
  /** Admitted calls per second over the load. */
  admittedPerS: number;
}

/** The figures of a run (pure). */
export function summarizeOverload(records: readonly CallRecord[], durationMs: number): OverloadSummary {
  const byStatus: Record<string, number> = {};
  for (const r of records) byStatus[String(r.status)] = (byStatus[String(r.status)] ?? 0) + 1;
  const refused = records.filter((r) => r.status === 429);
  const admitted = records.filter((r) => r.status !== 429);
  const latencies = admitted.map((r) => r.doneMs - r.sentMs).sort((a, b) => a - b);
  const lastRefused = refused.reduce<CallRecord | undefined>(
    (last, r) => (last === undefined || r.doneMs > last.doneMs ? r : last),
    undefined,
  );
  const lastAdmittedDoneMs = admitted.reduce((max, r) => Math.max(max, r.doneMs), -Infinity);
  return {
    calls: records.length,
    byStatus,
    admitted: admitted.length,
    admittedDeadlineExceeded: admitted.filter((r) => r.status === 504).length,
    admittedP50Ms: quantile(latencies, 0.5),
    admittedP95Ms: quantile(latencies, 0.95),
    admittedMaxMs: latencies.at(-1) ?? NaN,
    first429Ms: refused.length === 0 ? undefined : Math.min(...refused.map((r) => r.doneMs)),
    lastRetryAfterS: lastRefused?.retryAfterS,
    observedDrainMs: lastRefused === undefined || admitted.length === 0 ? undefined : Math.max(0, lastAdmittedDoneMs - lastRefused.doneMs),
    admittedPerS: admitted.length / (durationMs / 1000),
  };
}

/** Nearest-rank quantile of sorted values; NaN for none. */
function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
