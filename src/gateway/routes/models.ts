/**
 * GET /v1/models and GET /v1/models/:model in OpenAI's list shape; POST /v1/models/:model/wake and
 * /sleep start and stop a model's instances ahead of use.
 */
import type { FastifyInstance } from 'fastify';
import { errors } from '../../core/error-catalog.js';
import type { GatewayDeps, ModelEntry, ModelLifecycleState } from '../gateway-types.js';

interface LifecycleCall {
  Params: { model: string };
  Querystring: { wait?: string };
}

export function registerModelRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const stateOf = (id: string): ModelLifecycleState => {
    const name = deps.models.resolve(id);
    return name === undefined || deps.lifecycle === undefined ? 'ready' : deps.lifecycle.state(name);
  };
  /**
   * OpenAI's model object, with voxmux's own facts under `voxmux`: `task` (transcription, speech or diarization),
   * `languages` (null: not declared by the adapter), `translation` (it also answers
   * POST /v1/audio/translations) and `state` (stopped, starting, ready, stopping).
   */
  const toModel = (m: ModelEntry) => ({
    id: m.id,
    object: 'model',
    created: m.created,
    owned_by: m.ownedBy,
    voxmux: { task: m.task ?? 'transcription', languages: m.languages ?? null, translation: m.translates === true, state: stateOf(m.id) },
  });
  const resolveCall = (params: LifecycleCall['Params'], query: LifecycleCall['Querystring']) => {
    const name = deps.models.resolve(params.model);
    if (name === undefined || deps.lifecycle === undefined) throw errors.modelNotFound({ model: params.model });
    const wait = query.wait;
    if (wait !== undefined && wait !== 'true' && wait !== 'false') {
      throw errors.invalidParameter({ param: 'wait', expected: 'true or false', got: wait });
    }
    return { name, lifecycle: deps.lifecycle, isWaiting: wait === 'true' };
  };

  app.get('/v1/models', async () => ({ object: 'list', data: deps.models.list().map(toModel) }));
  app.get<{ Params: { model: string } }>('/v1/models/:model', async (request) => {
    const entry = deps.models.list().find((m) => m.id === request.params.model);
    if (entry === undefined) throw errors.modelNotFound({ model: request.params.model });
    return toModel(entry);
  });
  // Idempotent: waking a starting or ready model changes nothing. Without ?wait=true the call
  // answers at once (202 while the model starts); with it, once the wake ends, bounded by the
  // model's wakeTimeoutMs: 200 ready, or the wake's 503. The state answered is the lifecycle
  // owner's after the call (ModelLifecycleControl), not one read before it.
  app.post<LifecycleCall>('/v1/models/:model/wake', async (request, reply) => {
    const { name, lifecycle, isWaiting } = resolveCall(request.params, request.query);
    const state = await lifecycle.wake(name, { isWaiting });
    return reply.code(state === 'ready' ? 200 : 202).send({ id: request.params.model, object: 'model.state', state });
  });
  app.post<LifecycleCall>('/v1/models/:model/sleep', async (request, reply) => {
    const { name, lifecycle, isWaiting } = resolveCall(request.params, request.query);
    const state = await lifecycle.sleep(name, { isWaiting });
    return reply.code(state === 'stopped' ? 200 : 202).send({ id: request.params.model, object: 'model.state', state });
  });
}
