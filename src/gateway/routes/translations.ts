/**
 * POST /v1/audio/translations: speech in any language the model knows → English text, in OpenAI's shape
 * (fields file, model, prompt, response_format, temperature; no diarized_json). It runs the transcription route's path
 * with task translate; a model that does not translate answers model_task_mismatch.
 */
import type { FastifyInstance } from 'fastify';
import { RESPONSE_FORMATS } from '../../api/transcription.js';
import type { GatewayDeps, GatewayOptions } from '../gateway-types.js';
import type { UploadPool } from '../upload-pool.js';
import { registerSpeechToTextRoute, type SpeechToTextEndpoint } from './transcriptions.js';

const TRANSLATIONS: SpeechToTextEndpoint = {
  path: '/v1/audio/translations',
  task: 'translate',
  knownFields: new Set(['model', 'prompt', 'response_format', 'temperature']),
  responseFormats: RESPONSE_FORMATS,
};

export function registerTranslationRoute(app: FastifyInstance, options: GatewayOptions, deps: GatewayDeps, uploads: UploadPool): void {
  registerSpeechToTextRoute(app, options, deps, TRANSLATIONS, uploads);
}
