/**
 * Audio input for the gateway: recognise an upload by content, decode it to 16 kHz mono 16-bit PCM,
 * enforce the duration limit. WAV is parsed in process; other formats go through ffmpeg.
 */
export { AUDIO_FORMATS, DECODED_SAMPLE_RATE_HZ, type AudioFormat } from './audio-format.js';
export {
  createAudioDecoder,
  type AudioDecoder,
  type AudioDecoderDeps,
  type AudioDecoderOptions,
  type DecodedAudio,
} from './audio-decoder.js';
export { sniffAudioFormat } from './sniff-audio-format.js';
