/**
 * Runs a ramp: every planned step through the load driver, with server metrics scraped at each
 * window's edges and GPU samples taken throughout, and pools the reps of each level into a step.
 * The ramp stops by itself after its last step, after a level where no request succeeded (in the
 * window or out of it), or when interrupted.
 */
import type { Clock, TimerHandle } from '../../src/core/clock.js';
import type { ClientMonitor } from './client-monitor.js';
import { summarizeGpu, type GpuSampler } from './gpu-sampler.js';
import { startStep } from './load-driver.js';
import { summarizeServerMetrics, type MetricsScraper, type ServerMetricsSnapshot } from './metrics-scraper.js';
import type { ProgressReporter } from './progress.js';
import { planSteps, type RampPlanOptions, type SloClause } from './ramp-plan.js';
import { aggregateStep, countSuccesses, summarizeRep, type CostOptions, type RepMeasurement, type StepResult } from './report.js';
import type { Workload } from './workload.js';

export interface RampRunOptions {
  plan: RampPlanOptions;
  timeoutMs: number;
  maxRequestsPerStep: number;
  maxOutstanding: number;
  seed: number;
  /** See StepOptions.abandonAfterMs. */
  abandonAfterMs?: number;
  slo?: readonly SloClause[];
  cost: CostOptions;
}

export interface RampRunDeps {
  workload: Workload;
  clock: Clock;
  progress: ProgressReporter;
  clientMonitor: ClientMonitor;
  scraper?: MetricsScraper;
  gpu?: GpuSampler;
  /** Aborting it interrupts the ramp; the steps finished so far are kept. */
  signal?: AbortSignal;
}

export interface RampRunResult {
  steps: StepResult[];
  /** Why the ramp stopped before its last step, if it did (interruption excluded). */
  stoppedEarly?: string;
  isInterrupted: boolean;
}

export async function runRamp(options: RampRunOptions, deps: RampRunDeps): Promise<RampRunResult> {
  const { clock } = deps;
  const { plan } = options;
  const planned = planSteps(plan);
  const steps: StepResult[] = [];
  let stoppedEarly: string | undefined;
  deps.scraper?.start();
  deps.gpu?.start();
  try {
    for (let levelIndex = 0; levelIndex < plan.levels.length; levelIndex += 1) {
      const reps: RepMeasurement[] = [];
      for (const step of planned.filter((p) => p.levelIndex === levelIndex)) {
        if (deps.signal?.aborted === true) break;
        const timers: TimerHandle[] = [];
        let endScrape: Promise<ServerMetricsSnapshot | undefined> | undefined;
        deps.clientMonitor.start();
        const running = startStep(
          {
            mode: plan.mode,
            level: step.level,
            warmupMs: plan.warmupMs,
            durationMs: plan.durationMs,
            timeoutMs: options.timeoutMs,
            maxRequests: options.maxRequestsPerStep,
            maxOutstanding: options.maxOutstanding,
            ...(options.abandonAfterMs === undefined ? {} : { abandonAfterMs: options.abandonAfterMs }),
            // Each step gets its own arrival sequence; the same seed repeats the whole run.
            seed: (options.seed + step.index * 7919) >>> 0,
          },
          { workload: deps.workload, clock, ...(deps.signal === undefined ? {} : { signal: deps.signal }) },
        );
        deps.progress.stepStarted(step, running.progress);
        if (deps.scraper !== undefined) {
          const scraper = deps.scraper;
          timers.push(clock.setTimeout(() => void scraper.scrapeNow(), plan.warmupMs));
          timers.push(
            clock.setTimeout(() => {
              endScrape = scraper.scrapeNow();
            }, plan.warmupMs + plan.durationMs),
          );
        }
        const samples = await running.done;
        for (const timer of timers) timer.cancel();
        const client = deps.clientMonitor.stop();
        const endSnapshot = await endScrape;
        const scrapeEndMs = Math.max(samples.windowEndMs, endSnapshot?.atMs ?? 0);
        const server =
          deps.scraper === undefined
            ? undefined
            : summarizeServerMetrics(deps.scraper.snapshots(), { fromMs: samples.windowStartMs, toMs: scrapeEndMs });
        const gpu =
          deps.gpu === undefined
            ? undefined
            : summarizeGpu(deps.gpu.samples(), { fromMs: samples.windowStartMs, toMs: samples.windowEndMs });
        const measurement = summarizeRep(samples, {
          rep: step.rep,
          client,
          ...(server === undefined ? {} : { server }),
          ...(gpu === undefined ? {} : { gpu }),
        });
        deps.progress.stepFinished(step, measurement.result);
        reps.push(measurement);
      }
      if (reps.length === 0) break;
      const step = aggregateStep(reps, {
        step: levelIndex + 1,
        mode: plan.mode,
        level: plan.levels[levelIndex]!,
        ...(options.slo === undefined ? {} : { slo: options.slo }),
        cost: options.cost,
      });
      steps.push(step);
      if (deps.signal?.aborted === true) break;
      if (countSuccesses(step) === 0) {
        const codes = describeFailures(step);
        stoppedEarly = `every request failed at ${plan.mode === 'closed' ? 'concurrency' : 'rate'} ${step.level}: ${codes}`;
        break;
      }
    }
  } finally {
    await deps.scraper?.stop();
    deps.gpu?.stop();
    deps.progress.close();
  }
  return {
    steps,
    ...(stoppedEarly === undefined ? {} : { stoppedEarly }),
    isInterrupted: deps.signal?.aborted === true,
  };
}

/** `500 internal_error x12, ECONNRESET x1`; the late requests' codes when none finished in the window. */
export function describeFailures(step: StepResult): string {
  const counts: Record<string, number> = { ...step.errorsByCode };
  if (Object.keys(counts).length === 0) {
    for (const rep of step.reps) {
      for (const [code, n] of Object.entries(rep.late.errorsByCode)) counts[code] = (counts[code] ?? 0) + n;
    }
  }
  const entries = Object.entries(counts).sort(([, a], [, b]) => b - a);
  if (entries.length === 0) return 'no request finished within the window';
  return entries.map(([code, n]) => `${code} x${n}`).join(', ');
}
