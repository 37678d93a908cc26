"""One step of a diarization session: the next chunk in, the finalized and provisional speaker
segments and the new state out. A pure function of the state, the chunk and its options, so a
session resumed from its state on another instance continues exactly as it would have.

A whole file (one item, ``is_last``) is clustered offline over all its pieces. A session of several
chunks is diarized online: each chunk is appended to the unfinished speech kept from the previous one
(the tail), cut into pieces (voice activity, then speaker changes), and every piece that can no longer
grow is assigned a speaker for good (finalized); the pieces of the speech still running at the
chunk's end are guessed (provisional) and kept, with their audio, for the next chunk.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray

from .activity import BRIDGE_FRAMES, Region, energy_regions, given_regions
from .clustering import MAX_EXEMPLARS, Exemplars, Limits, Thresholds, cluster_offline, cluster_session, guess_session
from .features import (CEPSTRA, FRAME_RATE_HZ, FRAME_SAMPLES, HOP_SAMPLES, SAMPLE_RATE_HZ, cepstra, frame_count,
                       log_energy, pre_emphasized)
from .segmentation import pieces
from .state import SessionState
from .statistics import Gaussian

#: Speech still running at a chunk's end is kept whole for the next chunk up to this long (8 s)...
MAX_TAIL_FRAMES = 800
#: ...past which only its last pieces within this much of the end (4 s) stay open.
KEEP_OPEN_FRAMES = 400
#: Frames quieter than this far below a region's loudest are left out of its statistics (dB): pauses
#: between words carry no speaker information.
QUIET_DB = 30.0
#: MFCCs are computed in blocks of this many samples (60 s), to bound the memory of a long file.
BLOCK_SAMPLES = 60 * SAMPLE_RATE_HZ


@dataclass(frozen=True)
class Settings:
    change_threshold: float
    thresholds: Thresholds


@dataclass(frozen=True)
class ChunkOptions:
    min_speakers: int
    max_speakers: int
    chunk_offset_s: float
    speech: Optional[Tuple[Tuple[float, float], ...]]


@dataclass(frozen=True)
class Segment:
    start_frame: int  # frames from the session start
    end_frame: int
    speaker: int

    def to_output(self) -> Dict[str, object]:
        return {'start': round(self.start_frame / FRAME_RATE_HZ, 3), 'end': round(self.end_frame / FRAME_RATE_HZ, 3),
                'speaker': self.speaker}


@dataclass(frozen=True)
class StepResult:
    finalized: Tuple[Segment, ...]
    provisional: Tuple[Segment, ...]
    speakers: int
    state: SessionState


def features_of(audio: NDArray[np.float64]) -> NDArray[np.float64]:
    """mfcc(audio), windowed a block at a time."""
    emphasized = pre_emphasized(audio)
    blocks = [cepstra(emphasized[at:at + BLOCK_SAMPLES + FRAME_SAMPLES])
              [:frame_count(min(BLOCK_SAMPLES, audio.size - at))] for at in range(0, audio.size, BLOCK_SAMPLES)]
    return np.concatenate(blocks) if blocks else np.zeros((0, CEPSTRA))


def statistics(features: NDArray[np.float64], energy: NDArray[np.float64], piece: Region) -> Gaussian:
    """The speaker statistics of a piece, from its frames within QUIET_DB of its loudest."""
    a, b = piece
    loud = energy[a:b] >= float(np.max(energy[a:b])) - QUIET_DB
    return Gaussian.of(features[a:b][loud])


def merged(segments: Sequence[Segment]) -> Tuple[Segment, ...]:
    """Touching segments of one speaker joined (pieces cut at a change the clustering did not confirm)."""
    out: List[Segment] = []
    for segment in segments:
        last = out[-1] if out else None
        if last is not None and last.speaker == segment.speaker and segment.start_frame <= last.end_frame:
            out[-1] = Segment(last.start_frame, max(last.end_frame, segment.end_frame), last.speaker)
        else:
            out.append(segment)
    return tuple(out)


def _chunk_regions(audio: NDArray[np.float64], options: ChunkOptions) -> List[Region]:
    frames = frame_count(audio.size)
    if options.speech is not None:
        return given_regions(options.speech, frames)
    return energy_regions(log_energy(audio))


def _joined(tail: Sequence[Region], tail_frames: int, chunk: Sequence[Region]) -> List[Region]:
    """The tail's regions then the chunk's (shifted), a region that runs across the boundary made one."""
    regions = list(tail)
    for a, b in chunk:
        a, b = a + tail_frames, b + tail_frames
        if regions and a - regions[-1][1] < BRIDGE_FRAMES:
            regions[-1] = (regions[-1][0], b)
        else:
            regions.append((a, b))
    return regions


def diarize_file(audio: NDArray[np.int16], options: ChunkOptions, settings: Settings) -> StepResult:
    """A whole recording (a one-item session): offline clustering over all its pieces."""
    signal = audio.astype(np.float64) / 32768.0
    features, energy = features_of(signal), log_energy(signal)
    regions = _chunk_regions(signal, options)
    found = pieces(features, regions, settings.change_threshold)
    models = [statistics(features, energy, p) for p in found]
    labels = cluster_offline(models, Limits(options.min_speakers, options.max_speakers), settings.thresholds)
    offset = int(round(options.chunk_offset_s * FRAME_RATE_HZ))
    segments = merged([Segment(a + offset, b + offset, s) for (a, b), s in zip(found, labels)])
    speakers: List[Exemplars] = []
    for model, label in zip(models, labels):
        while len(speakers) <= label:
            speakers.append(())
        speakers[label] = (*speakers[label], model)[-MAX_EXEMPLARS:]
    end_s = options.chunk_offset_s + audio.size / SAMPLE_RATE_HZ
    return StepResult(segments, (), max(labels) + 1 if labels else 0,
                      SessionState(1, tuple(speakers), end_s, np.zeros(0, dtype=np.int16), ()))


def diarize_chunk(state: SessionState, audio: NDArray[np.int16], is_last: bool, options: ChunkOptions,
                  settings: Settings) -> StepResult:
    """The next chunk of an online session. A chunk that starts later than the state's audio ended
    (``chunkOffsetS`` past it: the audio of failed items lies between) does not continue the speech kept
    from before: that speech ended with its audio, so its pieces are finalized first, and the chunk is
    placed at its offset."""
    end_s = state.tail_start_s + state.tail_audio.size / SAMPLE_RATE_HZ
    if state.tail_audio.size and round(options.chunk_offset_s * SAMPLE_RATE_HZ) > round(end_s * SAMPLE_RATE_HZ):
        closed = _diarize_buffer(state, np.zeros(0, dtype=np.int16), True,
                                 replace(options, chunk_offset_s=end_s, speech=()), settings)
        rest = _diarize_buffer(closed.state, audio, is_last, options, settings)
        return StepResult(closed.finalized + rest.finalized, rest.provisional, rest.speakers,
                          replace(rest.state, next_seq=state.next_seq + 1))
    return _diarize_buffer(state, audio, is_last, options, settings)


def _diarize_buffer(state: SessionState, audio: NDArray[np.int16], is_last: bool, options: ChunkOptions,
                    settings: Settings) -> StepResult:
    """The chunk appended to the speech kept from the previous one (the tail), diarized."""
    chunk_signal = audio.astype(np.float64) / 32768.0
    # The tail starts on a frame of the session; the chunk's frames are placed on the buffer's to the
    # nearest frame (a chunk whose length is not whole frames shifts the next one by under 10 ms).
    tail_frames = int(round(state.tail_audio.size / HOP_SAMPLES))
    buffer_audio = np.concatenate([state.tail_audio, audio])
    signal = buffer_audio.astype(np.float64) / 32768.0
    buffer_start_s = state.tail_start_s if state.tail_audio.size else options.chunk_offset_s
    total_frames = frame_count(buffer_audio.size)
    # Clipped to the buffer: a chunk placed a frame late (see above) may reach a frame past it.
    regions = [(a, min(b, total_frames))
               for a, b in _joined(state.tail_regions, tail_frames, _chunk_regions(chunk_signal, options))
               if min(b, total_frames) > a]
    features, energy = features_of(signal), log_energy(signal)
    found = pieces(features, regions, settings.change_threshold)
    open_from = len(found)
    if not is_last and regions and regions[-1][1] > total_frames - BRIDGE_FRAMES:
        last_region = regions[-1]
        open_from = next(i for i, p in enumerate(found) if p[0] >= last_region[0])
        if last_region[1] - last_region[0] > MAX_TAIL_FRAMES:
            open_from = next(i for i in range(open_from, len(found)) if found[i][1] > total_frames - KEEP_OPEN_FRAMES)
    limits = Limits(options.min_speakers, options.max_speakers)
    speakers = list(state.speakers)
    offset = int(round(buffer_start_s * FRAME_RATE_HZ))
    closed = found[:open_from]
    closed_models = [statistics(features, energy, p) for p in closed]
    labels = cluster_session(speakers, closed_models, limits, settings.thresholds)
    finalized = [Segment(a + offset, b + offset, label) for (a, b), label in zip(closed, labels)]
    provisional = [Segment(a + offset, b + offset, guess_session(statistics(features, energy, (a, b)), speakers,
                                                                limits, settings.thresholds))
                   for a, b in found[open_from:]]
    if open_from < len(found):
        tail_start = found[open_from][0]
        tail_audio = buffer_audio[tail_start * HOP_SAMPLES:]
        tail_regions = tuple((max(a, tail_start) - tail_start, b - tail_start) for a, b in regions if b > tail_start)
        tail_start_s = buffer_start_s + tail_start / FRAME_RATE_HZ
    else:
        tail_audio, tail_regions = np.zeros(0, dtype=np.int16), ()
        tail_start_s = options.chunk_offset_s + audio.size / SAMPLE_RATE_HZ
    seen = max([len(speakers)] + [s.speaker + 1 for s in provisional])
    return StepResult(merged(finalized), merged(provisional), seen,
                      SessionState(state.next_seq + 1, tuple(speakers), tail_start_s, tail_audio.copy(), tail_regions))
