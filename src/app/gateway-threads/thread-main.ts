/**
 * A gateway thread (gateway.threads): the same fastify gateway as the main thread's, listening on
 * a duplicate of its socket, with the work handed to the main thread (remote-deps.ts) and the
 * stateful routes passed on to it (gateway/routes/forward.ts). Started by the voxmux entry point
 * when its workerData says so (bin/voxmux.mjs, scripts/bundle-entry.ts).
 */
import type { FastifyListenOptions } from 'fastify';
import { parentPort } from 'node:worker_threads';
import { systemClock } from '../../core/clock.js';
import { buildGateway, trackConnections, UploadPool } from '../../gateway/index.js';
import { createLogger } from '../../telemetry/logger.js';
import { createMetrics } from '../../telemetry/metrics.js';
import { closeDraining, createModelCatalog, gatewayLocalsOf, gatewayOptionsOf } from '../build-server.js';
import { releaseIdleMemory } from '../idle-memory.js';
import { createRemoteDeps } from './remote-deps.js';
import type { GatewayThreadData, OwnerMessage, ThreadMessage } from './thread-messages.js';

export { GATEWAY_THREAD_ROLE } from './thread-messages.js';

export async function runGatewayThread(data: GatewayThreadData): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('runGatewayThread: not in a worker thread');
  const post = (message: ThreadMessage) => port.postMessage(message);
  const { config } = data;
  const name = `gateway-${data.index}`;
  const log = createLogger({ level: config.telemetry.logLevel, format: config.telemetry.logFormat, isTTY: false }).child({ thread: name });
  const metrics = createMetrics({ thread: name });
  const clock = systemClock;
  const locals = await gatewayLocalsOf(config, log);
  // Memory for the samples handed to the main thread, back here with each result.
  const transfers = new UploadPool({ maxPooledBytes: config.gateway.uploadPoolBytes, idleMs: config.gateway.uploadPoolIdleMs }, { clock });
  const remote = createRemoteDeps(
    port,
    {
      models: createModelCatalog(config, data.modelsCreatedS),
      voiceModels: locals.voiceModels,
      decoder: locals.decoder,
      voiceActivity: locals.voiceActivity,
      metricsContentType: metrics.registry.contentType,
      clock,
      log,
      metrics,
      releaseIdleMemory: (p) => void releaseIdleMemory(p),
    },
    transfers,
    data.state,
  );
  const app = await buildGateway({ ...gatewayOptionsOf(config), forwardTo: data.ownerUrl }, remote.deps);
  const connections = trackConnections(app.server);
  port.on('message', (message: OwnerMessage) => {
    if (message.type === 'collectMetrics') {
      void metrics.registry.getMetricsAsJSON().then((json) => post({ type: 'metrics', collectId: message.collectId, metrics: json }));
      return;
    }
    if (message.type === 'close') {
      void closeDraining(app, connections, clock).then(
        () => post({ type: 'closed' }),
        (err: unknown) => {
          log.error({ err }, 'gateway thread close failed');
          post({ type: 'closed' });
        },
      );
      return;
    }
    remote.receive(message);
  });
  await app.ready();
  post({ type: 'adopting' });
  // The host is given so that fastify does not bind a second address for 'localhost'; with a
  // descriptor, Node listens on it and ignores host and port.
  // fastify passes its listen options on to Node's server.listen(), whose `fd` its types do not name.
  await app.listen({ fd: data.fd, host: config.gateway.host } as FastifyListenOptions);
  post({ type: 'listening' });
}
