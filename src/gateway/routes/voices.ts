/**
 * GET /v1/audio/voices[?model=]: every voice of the speech models (or of one model, by name or
 * alias), in OpenAI's list shape (src/api/voices.ts): its engine, language, native sample rate, the
 * OpenAI names that map to it (fixed, or laid onto the catalogue: speech/voice-aliases.ts), and the
 * instances holding it now.
 */
import type { FastifyInstance } from 'fastify';
import type { Voice, VoiceList, VoiceResidency } from '../../api/voices.js';
import { errors } from '../../core/error-catalog.js';
import type { GatewayDeps, VoiceDirectory, VoiceModel } from '../gateway-types.js';
import { voiceAliasesOf } from '../speech/voice-aliases.js';

export function registerVoicesRoute(app: FastifyInstance, deps: GatewayDeps): void {
  app.get<{ Querystring: { model?: string } }>('/v1/audio/voices', async (request): Promise<VoiceList> => {
    const directory = deps.voices;
    const asked = request.query.model;
    let models = directory.models();
    if (asked !== undefined) {
      const name = deps.models.resolve(asked);
      if (name === undefined) throw errors.modelNotFound({ model: asked });
      models = models.filter((m) => m.model === name);
    }
    return { object: 'list', data: models.flatMap((m) => listVoices(directory, m)) };
  });
}

/** The model's voices in catalogue order, each with the instances that hold it now. */
function listVoices(directory: VoiceDirectory, model: VoiceModel): Voice[] {
  const holders = new Map<string, VoiceResidency[]>();
  for (const instance of directory.residency(model.model)) {
    for (const resource of instance.resources) {
      const list = holders.get(resource.name) ?? [];
      list.push({ instance_id: instance.instanceId, residency: resource.residency, bytes: resource.bytes });
      holders.set(resource.name, list);
    }
  }
  const catalog = directory.catalog(model.model);
  const hasAliases = model.voiceAliases !== undefined || (model.catalogVoiceAliases ?? []).length > 0;
  const aliases = hasAliases ? Object.entries(voiceAliasesOf(model, catalog)) : undefined;
  return catalog
    .filter((entry) => entry.kind === 'voice')
    .map((entry) => ({
      id: entry.name,
      object: 'voice' as const,
      model: model.model,
      engine: model.engine,
      language: entry.language,
      sample_rate: entry.sampleRate,
      gender: entry.gender,
      description: entry.description,
      ...(aliases === undefined ? {} : { aliases: aliases.filter(([, voice]) => voice === entry.name).map(([alias]) => alias) }),
      residency: holders.get(entry.name) ?? [],
    }));
}
