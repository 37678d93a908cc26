/**
 * The live progress display: on a terminal, one line rewritten in place (step, elapsed, current
 * rate); elsewhere (CI logs, pipes), plain lines at the end of each step and every
 * `plainIntervalMs` during long steps.
 */
import type { Clock, TimerHandle } from '../../src/core/clock.js';
import { RateWindow } from '../../src/core/rate-window.js';
import type { StepProgress } from './load-driver.js';
import type { LoadMode, PlannedStep } from './ramp-plan.js';
import type { RepResult } from './report.js';
import { formatNumber } from './text-table.js';

export interface TextSink {
  write(text: string): unknown;
}

export interface ProgressOptions {
  isTTY: boolean;
  mode: LoadMode;
  totalSteps: number;
  reps: number;
  /** Step length including warmup. */
  stepMs: number;
  /** Refresh period of the terminal line. @default 250 */
  ttyIntervalMs?: number;
  /** Period of the plain lines during a step. @default 10000 */
  plainIntervalMs?: number;
}

export interface ProgressReporter {
  stepStarted(step: PlannedStep, read: () => StepProgress): void;
  stepFinished(step: PlannedStep, rep: RepResult): void;
  /** Prints a line without garbling the live line. */
  message(line: string): void;
  close(): void;
}

export function createProgressReporter(options: ProgressOptions, deps: { out: TextSink; clock: Clock }): ProgressReporter {
  const { out, clock } = deps;
  const ttyIntervalMs = options.ttyIntervalMs ?? 250;
  const plainIntervalMs = options.plainIntervalMs ?? 10_000;
  const rate = new RateWindow(1000);
  let timer: TimerHandle | undefined;
  let hasLiveLine = false;
  let current: { step: PlannedStep; read: () => StepProgress } | undefined;

  const levelText = (step: PlannedStep): string => (options.mode === 'closed' ? `concurrency ${step.level}` : `rate ${step.level}/s`);
  const stepText = (step: PlannedStep): string =>
    `step ${step.index + 1}/${options.totalSteps} ${levelText(step)}${options.reps > 1 ? ` rep ${step.rep}/${options.reps}` : ''}`;

  const clearLine = (): void => {
    if (hasLiveLine) {
      out.write('\r\x1b[2K');
      hasLiveLine = false;
    }
  };

  const render = (): void => {
    if (current === undefined) return;
    const progress = current.read();
    const perSecond = rate.add(clock.nowMs(), progress.completed);
    const text = `${stepText(current.step)} | ${formatNumber(progress.elapsedMs / 1000, 1)}/${formatNumber(options.stepMs / 1000, 1)} s | ${formatNumber(perSecond, 1)} req/s | ok ${progress.ok} err ${progress.errors} | in flight ${progress.inFlight}${progress.droppedArrivals > 0 ? ` | dropped ${progress.droppedArrivals}` : ''}`;
    if (options.isTTY) {
      out.write(`\r\x1b[2K${text}`);
      hasLiveLine = true;
    } else {
      out.write(`${text}\n`);
    }
  };

  const schedule = (): void => {
    timer = clock.setTimeout(
      () => {
        render();
        schedule();
      },
      options.isTTY ? ttyIntervalMs : plainIntervalMs,
    );
  };

  const stop = (): void => {
    timer?.cancel();
    timer = undefined;
  };

  return {
    stepStarted(step, read) {
      stop();
      rate.reset();
      current = { step, read };
      if (options.isTTY) render();
      schedule();
    },
    stepFinished(step, rep) {
      stop();
      current = undefined;
      clearLine();
      const errors = rep.errors === 0 ? '0 errors' : `${rep.errors} errors (${Object.keys(rep.errorsByCode).join(', ')})`;
      // Played answers (speech) are judged by their first byte and their stalls.
      const playback =
        rep.playback === undefined
          ? ''
          : `, first byte p95 ${formatNumber(rep.ttfbMs?.p95, 0)} ms, ${rep.playback.callsWithStall} of ${rep.playback.calls} calls stalled`;
      out.write(
        `${stepText(step)}: ${formatNumber(rep.requestsPerSecond, 2)} req/s, p50 ${formatNumber(rep.latencyMs?.p50, 0)} ms, p95 ${formatNumber(rep.latencyMs?.p95, 0)} ms${playback}, ${errors}${rep.droppedArrivals > 0 ? `, ${rep.droppedArrivals} arrivals dropped` : ''}\n`,
      );
    },
    message(line) {
      clearLine();
      out.write(`${line}\n`);
    },
    close() {
      stop();
      current = undefined;
      clearLine();
    },
  };
}
