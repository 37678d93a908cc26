/**
 * The load generator's own resource use during a step, so that a saturated client is visible in
 * the report instead of passing for a slow server.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

export interface ClientUsage {
  /** CPU time of this process (user + system) over wall time, in percent of one core. */
  cpuPercent: number;
  /** 99th percentile of the event loop's delay: above a few ms, the client adds latency itself. */
  eventLoopDelayP99Ms: number;
}

export interface ClientMonitor {
  start(): void;
  stop(): ClientUsage;
}

/** Above this CPU share of one core, the report warns that the client may be the bottleneck. */
export const CLIENT_SATURATION_CPU_PERCENT = 85;

export function createClientMonitor(): ClientMonitor {
  let cpuStart = process.cpuUsage();
  let wallStartMs = performance.now();
  const delay = monitorEventLoopDelay({ resolution: 10 });
  return {
    start() {
      cpuStart = process.cpuUsage();
      wallStartMs = performance.now();
      delay.reset();
      delay.enable();
    },
    stop() {
      delay.disable();
      const cpu = process.cpuUsage(cpuStart);
      const wallMs = Math.max(1, performance.now() - wallStartMs);
      const p99Ns = delay.count > 0 ? delay.percentile(99) : 0;
      return {
        cpuPercent: Math.round(((cpu.user + cpu.system) / 1000 / wallMs) * 1000) / 10,
        // The histogram includes the sampling resolution itself; report only the excess.
        eventLoopDelayP99Ms: Math.max(0, Math.round((p99Ns / 1e6 - 10) * 100) / 100),
      };
    },
  };
}
