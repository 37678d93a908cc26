/**
 * G.711 mu-law and A-law (ITU-T G.711), the telephony formats of realtime sessions: one byte a
 * sample at 8 kHz. Encoders take 16-bit PCM; decoders return it.
 */

const MU_LAW_BIAS = 0x84;
const MU_LAW_CLIP = 32635;

export function encodeMuLaw(samples: Int16Array): Uint8Array {
  const out = new Uint8Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    let s = samples[i]!;
    const sign = s < 0 ? 0x80 : 0;
    if (s < 0) s = -s;
    if (s > MU_LAW_CLIP) s = MU_LAW_CLIP;
    s += MU_LAW_BIAS;
    let exponent = 7;
    for (let mask = 0x4000; (s & mask) === 0 && exponent > 0; mask >>= 1) exponent--;
    const mantissa = (s >> (exponent + 3)) & 0x0f;
    out[i] = ~(sign | (exponent << 4) | mantissa) & 0xff;
  }
  return out;
}

export function decodeMuLaw(bytes: Uint8Array): Int16Array {
  const out = new Int16Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const u = ~bytes[i]! & 0xff;
    const exponent = (u >> 4) & 0x07;
    const magnitude = ((((u & 0x0f) << 3) + MU_LAW_BIAS) << exponent) - MU_LAW_BIAS;
    out[i] = (u & 0x80) !== 0 ? -magnitude : magnitude;
  }
  return out;
}

export function encodeALaw(samples: Int16Array): Uint8Array {
  const out = new Uint8Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    let s = samples[i]! >> 3;
    const sign = s >= 0 ? 0x80 : 0;
    if (s < 0) s = -s - 1;
    let code: number;
    if (s < 32) {
      code = s >> 1;
    } else {
      let exponent = 1;
      while (s >= 64 << (exponent - 1) && exponent < 7) exponent++;
      code = (exponent << 4) | ((s >> exponent) & 0x0f);
    }
    out[i] = (sign | code) ^ 0x55;
  }
  return out;
}

export function decodeALaw(bytes: Uint8Array): Int16Array {
  const out = new Int16Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const a = bytes[i]! ^ 0x55;
    const exponent = (a >> 4) & 0x07;
    const mantissa = a & 0x0f;
    let magnitude = exponent === 0 ? (mantissa << 4) + 8 : ((mantissa << 4) + 0x108) << (exponent - 1);
    if (magnitude > 32767) magnitude = 32767;
    out[i] = (a & 0x80) !== 0 ? magnitude : -magnitude;
  }
  return out;
}
