/**
 * A rate from cumulative readings (bytes downloaded, requests completed) over the last `windowMs`
 * or so: the oldest reading kept is the newest one at least `windowMs` old. Used by the progress
 * lines of `voxmux models pull` and of the bench.
 */
export class RateWindow {
  readonly #windowMs: number;
  #readings: Array<{ atMs: number; total: number }> = [];

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  /** Adds a reading; the rate per second since the window's oldest one, or undefined before time has passed. */
  add(atMs: number, total: number): number | undefined {
    this.#readings.push({ atMs, total });
    while (this.#readings.length > 2 && atMs - this.#readings[1]!.atMs >= this.#windowMs) this.#readings.shift();
    const first = this.#readings[0]!;
    const spanMs = atMs - first.atMs;
    return spanMs > 0 ? ((total - first.total) * 1000) / spanMs : undefined;
  }

  reset(): void {
    this.#readings = [];
  }
}
