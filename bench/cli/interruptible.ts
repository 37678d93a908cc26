/**
 * A bench command's main work, made stoppable: the work gets a signal that aborts on Ctrl-C
 * (SIGINT) or on the caller's own signal, and the process stays alive until the work is done.
 */

export interface InterruptOptions {
  /** The caller's signal (tests, embedding programs). */
  signal?: AbortSignal;
  /** Installs a SIGINT handler for the duration of the work. @default true */
  shouldHandleSignals?: boolean;
  /** Called on SIGINT, before the work's signal aborts: tell the user what happens next. */
  onInterrupt: () => void;
}

export async function runInterruptibly<T>(options: InterruptOptions, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onSignal = (): void => {
    options.onInterrupt();
    controller.abort();
  };
  const onExternalAbort = (): void => controller.abort();
  if (options.signal?.aborted === true) controller.abort();
  options.signal?.addEventListener('abort', onExternalAbort, { once: true });
  const shouldHandleSignals = options.shouldHandleSignals ?? true;
  if (shouldHandleSignals) process.once('SIGINT', onSignal);
  // NOTE: the system clock's timers are unref'd, so work waiting only on them (an open loop
  // between arrivals) would let Node exit mid-run. This handle keeps the process alive until the
  // work is over.
  const keepAlive = setInterval(() => undefined, 1 << 30);
  try {
    return await work(controller.signal);
  } finally {
    clearInterval(keepAlive);
    if (shouldHandleSignals) process.removeListener('SIGINT', onSignal);
    options.signal?.removeEventListener('abort', onExternalAbort);
  }
}
