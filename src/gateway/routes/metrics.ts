/** GET /metrics in the Prometheus text format. */
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../gateway-types.js';

export function registerMetricsRoute(app: FastifyInstance, deps: GatewayDeps): void {
  app.get('/metrics', async (_request, reply) => reply.type(deps.metricsContentType).send(await deps.metricsText()));
}
