/** GET /v1/models and GET /v1/models/:model in OpenAI's list shape. */
import type { FastifyInstance } from 'fastify';
import { errors } from '../../core/error-catalog.js';
import type { GatewayDeps, ModelEntry } from '../gateway-types.js';

/**
 * OpenAI's model object, with voxmux's own facts under `voxmux`: `task` (transcription or speech),
 * `languages` (null: not declared by the adapter) and `translation` (it also answers
 * POST /v1/audio/translations).
 */
const toModel = (m: ModelEntry) => ({
  id: m.id,
  object: 'model',
  created: m.created,
  owned_by: m.ownedBy,
  voxmux: { task: m.task ?? 'transcription', languages: m.languages ?? null, translation: m.translates === true },
});

export function registerModelRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  app.get('/v1/models', async () => ({ object: 'list', data: deps.models.list().map(toModel) }));
  app.get<{ Params: { model: string } }>('/v1/models/:model', async (request) => {
    const entry = deps.models.list().find((m) => m.id === request.params.model);
    if (entry === undefined) throw errors.modelNotFound({ model: request.params.model });
    return toModel(entry);
  });
}
