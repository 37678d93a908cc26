/**
 * GET /v1/audio/voices: the voices the speech models serve, with the engine that speaks each, its
 * language and native sample rate, the OpenAI voice names that map to it, and which instances hold
 * its weights now. voxmux's own endpoint (OpenAI has none), in OpenAI's list shape and snake_case,
 * shared by the gateway (which produces it) and clients such as the bench (which read it).
 */
import { Type, type Static } from '@sinclair/typebox';

/** Where an instance holds a voice: on the device, or a copy in host memory. */
export const VoiceResidencySchema = Type.Object(
  {
    instance_id: Type.String(),
    residency: Type.Union([Type.Literal('device'), Type.Literal('host')]),
    bytes: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);

export const VoiceSchema = Type.Object(
  {
    /** The engine-native voice id: what `voice` in POST /v1/audio/speech takes, besides the aliases. */
    id: Type.String(),
    object: Type.Literal('voice'),
    /** The model (its canonical name) that serves the voice. */
    model: Type.String(),
    /** The model's adapter. */
    engine: Type.String(),
    /** BCP 47, e.g. `en-US`. */
    language: Type.String(),
    /** The engine's native rate, in Hz. */
    sample_rate: Type.Integer({ minimum: 1 }),
    gender: Type.Union([Type.String(), Type.Null()]),
    description: Type.String(),
    /** OpenAI voice names (alloy, ash, ...) that the model maps to this voice; absent where the model has no alias table. */
    aliases: Type.Optional(Type.Array(Type.String())),
    /** The instances holding the voice's weights now; empty for a voice that is loaded on demand. */
    residency: Type.Array(VoiceResidencySchema),
  },
  { additionalProperties: false },
);

export const VoiceListSchema = Type.Object(
  { object: Type.Literal('list'), data: Type.Array(VoiceSchema) },
  { additionalProperties: false },
);

export type VoiceResidency = Static<typeof VoiceResidencySchema>;
export type Voice = Static<typeof VoiceSchema>;
export type VoiceList = Static<typeof VoiceListSchema>;
