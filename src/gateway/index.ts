/** Public surface of the gateway. */
export { buildGateway } from './gateway.js';
export { UploadPool } from './upload-pool.js';
export { DiarizationSessionService } from './diarization/session-service.js';
export type { DiarizationSessions, SessionChunk } from './diarization/session-service.js';
export { trackConnections, type ConnectionTracker } from './connections.js';
export { createModelLifecycleControl } from './model-lifecycle-control.js';
export type {
  GatewayDeps,
  GatewayOptions,
  DiarizationModelSettings,
  ModelCatalog,
  ModelEntry,
  ModelLifecycleControl,
  ModelLifecycleOwner,
  ModelLifecycleState,
  ModelWakeEnd,
  ModelTask,
  ReadinessSnapshot,
  SpeechModelSettings,
  VoiceDirectory,
  VoiceModel,
} from './gateway-types.js';
export { HTTP_STATUS, OPENAI_TYPE, WS_CLOSE_CODE, toHttpError } from './error-mapping.js';
export { createAudioDecoder } from './audio/index.js';
export type { AudioDecoder, DecodedAudio } from './audio/index.js';
export { createEnergyDetector } from './pieces/voice-activity.js';
export type { VoiceActivityDetector } from './pieces/voice-activity.js';
export { createSileroDetector } from './pieces/silero-vad.js';
