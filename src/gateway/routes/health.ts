/** GET /health/live (the process answers) and GET /health/ready (every model has a ready instance). */
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../gateway-types.js';

export function registerHealthRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  app.get('/health/live', async () => ({ status: 'ok' }));
  app.get('/health/ready', async (_request, reply) => {
    const snapshot = deps.readiness();
    return reply.code(snapshot.isReady ? 200 : 503).send({ status: snapshot.isReady ? 'ready' : 'not_ready', ...snapshot.body });
  });
}
