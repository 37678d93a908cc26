"""A session's state as bytes: deterministic (the same session gives the same bytes on any instance)
and small: for each speaker the statistics of its latest pieces (clustering.MAX_EXEMPLARS of 19 x 2 + 1
numbers), and the unfinished speech at the end of the last chunk (at most 8 s of 16-bit audio): under
600 KiB with the most speakers (adapter.MAX_SPEAKERS).

Layout: ``MAGIC``, a little-endian uint32 length, that many bytes of JSON (sorted keys, compact; Python
writes each float as its shortest round-trip decimal, so floats come back bit for bit), then the tail
audio as little-endian int16.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np
from numpy.typing import NDArray

from ...errors import InstanceError
from .activity import Region
from .statistics import Gaussian

MAGIC = b'VXCD1'
_LENGTH = struct.Struct('<I')


@dataclass(frozen=True)
class SessionState:
    next_seq: int
    speakers: Tuple[Tuple[Gaussian, ...], ...]  # index = speaker id: the statistics of its latest pieces
    #: The speech not yet finalized at the end of the previous chunk: where it starts (seconds from the
    #: session start), its audio, and its speech regions (frames from the tail's start).
    tail_start_s: float
    tail_audio: NDArray[np.int16]
    tail_regions: Tuple[Region, ...]


EMPTY = SessionState(0, (), 0.0, np.zeros(0, dtype=np.int16), ())


def encode(state: SessionState) -> bytes:
    head = {
        'nextSeq': state.next_seq,
        'speakers': [[[g.count, [float(v) for v in g.total], [float(v) for v in g.squares]] for g in speaker]
                     for speaker in state.speakers],
        'tailStartS': state.tail_start_s,
        'tailRegions': [list(r) for r in state.tail_regions],
    }
    text = json.dumps(head, sort_keys=True, separators=(',', ':')).encode('utf-8')
    return MAGIC + _LENGTH.pack(len(text)) + text + state.tail_audio.astype('<i2').tobytes()


def decode(data: bytes) -> SessionState:
    """InstanceError('model_failed') for bytes that are not this engine's state."""
    try:
        if data[:len(MAGIC)] != MAGIC:
            raise ValueError('wrong magic')
        at = len(MAGIC)
        (length,) = _LENGTH.unpack_from(data, at)
        head = json.loads(data[at + _LENGTH.size:at + _LENGTH.size + length].decode('utf-8'))
        audio_bytes = data[at + _LENGTH.size + length:]
        if len(audio_bytes) % 2:
            raise ValueError('odd audio length')
        speakers: List[Tuple[Gaussian, ...]] = [
            tuple(Gaussian(float(c), np.array(t, dtype=np.float64), np.array(q, dtype=np.float64))
                  for c, t, q in speaker)
            for speaker in head['speakers']]
        return SessionState(int(head['nextSeq']), tuple(speakers), float(head['tailStartS']),
                            np.frombuffer(audio_bytes, dtype='<i2').astype(np.int16),
                            tuple((int(a), int(b)) for a, b in head['tailRegions']))
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError) as err:
        raise InstanceError('model_failed', f'Expected a classical-diarizer session state: got {len(data)} '
                                                     f'bytes that are not one ({err})') from err
