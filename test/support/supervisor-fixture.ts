/** Builds a real supervisor over real Python model hosts, with short timeouts for tests. */
import { fileURLToPath } from 'node:url';
import { systemClock } from '../../src/core/clock.js';
import { readProcessEnvironment } from '../../src/config/env.js';
import { createSupervisor, spawnInstance, type SupervisedModel, type SupervisorOptions } from '../../src/supervisor/index.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { silentLogger } from './test-logger.js';
import type { Logger } from '../../src/telemetry/logger.js';

export const HOST_PATH = fileURLToPath(new URL('../../host', import.meta.url));
export const FIXTURE_INSTANCES = fileURLToPath(new URL('../fixtures/instances', import.meta.url));

export function testModel(overrides: Partial<SupervisedModel> = {}): SupervisedModel {
  return {
    adapter: 'test',
    instances: 1,
    instancesPerGpu: 0,
    gpus: [],
    options: {},
    command: [],
    exclusiveWarmup: false,
    mpsActiveThreadPercentages: [],
    ...overrides,
  };
}

export function supervisorOptions(models: Record<string, SupervisedModel>, overrides: Partial<SupervisorOptions> = {}): SupervisorOptions {
  return {
    pythonPath: '/usr/bin/python3',
    hostPath: HOST_PATH,
    loadLockPath: '',
    probeIntervalMs: 5000,
    probeTimeoutMs: 2000,
    nodeGpus: [],
    handshakeTimeoutMs: 10_000,
    loadTimeoutMs: 30_000,
    warmupTimeoutMs: 30_000,
    heartbeatIntervalMs: 100,
    heartbeatMissLimit: 10,
    batchTimeoutMs: 10_000,
    closeTimeoutMs: 5_000,
    restartInitialBackoffMs: 50,
    restartMaxBackoffMs: 400,
    crashLoopWindowMs: 10_000,
    crashLoopMaxFailures: 3,
    models,
    ...overrides,
  };
}

export function buildTestSupervisor(
  models: Record<string, SupervisedModel>,
  overrides: Partial<SupervisorOptions> = {},
  log: Logger = silentLogger(),
  baseEnv: Readonly<Record<string, string>> = readProcessEnvironment(),
) {
  const metrics = createMetrics();
  const supervisor = createSupervisor(supervisorOptions(models, overrides), {
    spawn: spawnInstance,
    clock: systemClock,
    log,
    metrics,
    baseEnv,
  });
  return { supervisor, metrics };
}
