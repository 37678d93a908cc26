/**
 * The audio formats the gateway accepts, recognised by content (never by file name), and the
 * ffmpeg demuxer forced for each one.
 */

/** Every decode produces mono audio at this rate. */
export const DECODED_SAMPLE_RATE_HZ = 16000;

export const AUDIO_FORMATS = ['wav', 'flac', 'mp3', 'aac', 'm4a', 'ogg-opus', 'ogg-vorbis', 'ogg-flac', 'webm', 'matroska'] as const;

/**
 * A container and codec family recognised from the first bytes of a file.
 * `mp3` covers every MPEG-1/2 audio layer; `aac` is raw ADTS; `m4a` is any ISO BMFF / QuickTime
 * file (m4a, mp4, mov, 3gp) with an audio track.
 */
export type AudioFormat = (typeof AUDIO_FORMATS)[number];

/**
 * NOTE: the demuxer is forced (`ffmpeg -f <demuxer>`) rather than probed. Probing would let
 * content that merely starts like audio be read as a playlist or a concat script, which can make
 * ffmpeg open other files; forcing the demuxer we sniffed closes that door.
 */
export const FFMPEG_DEMUXER: Readonly<Record<AudioFormat, string>> = {
  wav: 'wav',
  flac: 'flac',
  mp3: 'mp3',
  aac: 'aac',
  m4a: 'mov',
  'ogg-opus': 'ogg',
  'ogg-vorbis': 'ogg',
  'ogg-flac': 'ogg',
  webm: 'matroska',
  matroska: 'matroska',
};
