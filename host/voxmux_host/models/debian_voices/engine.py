"""What the adapter asks of each synthesis engine (flite, Festival, eSpeak NG)."""
from __future__ import annotations

import array
import sys
import threading
from dataclasses import dataclass
from typing import Optional, Protocol, Sequence

from .catalogue import Voice


@dataclass(frozen=True)
class Audio:
    """One sentence's audio: mono signed 16-bit little-endian PCM at ``sample_rate``."""

    sample_rate: int
    pcm: bytes

    @property
    def seconds(self) -> float:
        return len(self.pcm) / 2 / self.sample_rate


def little_endian(pcm: bytes) -> bytes:
    """16-bit samples in the machine's byte order, as the C libraries write them, in little-endian order."""
    if sys.byteorder == 'little':
        return pcm
    samples = array.array('h', pcm)
    samples.byteswap()
    return samples.tobytes()


class Engine(Protocol):
    """One engine serving some of the catalogue's voices. Every call runs on the host's main thread."""

    def load(self, voices: Sequence[Voice]) -> None:
        """Check that every one of ``voices`` can be served; ``InstanceError('load_failed')`` naming
        each library, file or program that is missing otherwise."""
        ...

    def warmup(self) -> None: ...

    def synthesize(self, voice: Voice, text: str, speed: float, cancelled: threading.Event) -> Optional[Audio]:
        """``text`` spoken by ``voice`` at ``speed`` (1 = normal, 2 = twice as fast); None when ``cancelled``
        was set while it ran (engines that cannot stop mid-sentence finish it instead)."""
        ...

    def close(self) -> None: ...
