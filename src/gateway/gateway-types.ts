/** Options and collaborators of the gateway, wired in app/build-server.ts. */
import type { Clock } from '../core/clock.js';
import type { TranscriptionRequest, TranscriptResult, SubmitOptions } from '../scheduler/index.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { AudioDecoder } from './audio/index.js';

export interface GatewayOptions {
  maxBodyBytes: number;
  requestTimeoutMs: number;
  /** Longest deadline a call may ask for with the voxmux-deadline-ms header, in milliseconds. @default 600000 */
  maxRequestTimeoutMs?: number;
  /** Memory kept for reuse by uploaded files (see upload-pool.ts); 0 turns the pool off. */
  uploadPoolBytes: number;
  apiKeys: readonly string[];
}

export interface ModelEntry {
  id: string;
  created: number;
  ownedBy: string;
}

export interface ModelCatalog {
  list(): readonly ModelEntry[];
  /** Canonical model name for a name or alias; undefined when unknown. */
  resolve(name: string): string | undefined;
}

export interface ReadinessSnapshot {
  isReady: boolean;
  body: Record<string, unknown>;
}

export interface GatewayDeps {
  transcribe(model: string, request: TranscriptionRequest, options: SubmitOptions): Promise<TranscriptResult>;
  models: ModelCatalog;
  readiness(): ReadinessSnapshot;
  metricsText(): Promise<string>;
  metricsContentType: string;
  decoder: AudioDecoder;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
}
