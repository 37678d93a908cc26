"""The decoder's windows over one sentence's latent frames (Piper ``infer_onnx_streaming``): chunks of
``chunk`` frames, each decoded with up to ``padding`` frames of its neighbours on each side, whose audio is
cut off again; a sentence of at most chunk + 2 * padding frames is one window. Every window is at most
chunk + 2 * padding frames long, so all of them fit one fixed shape (masked, generator.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

CHUNK_FRAMES = 45
PADDING_FRAMES = 10


@dataclass(frozen=True)
class Window:
    #: Latent frames decoded: [start, end).
    start: int
    end: int
    #: Frames of the window's audio kept: [keep_start, keep_end), relative to ``start``.
    keep_start: int
    keep_end: int

    @property
    def frames(self) -> int:
        return self.end - self.start


def plan_windows(frames: int, chunk: int = CHUNK_FRAMES, padding: int = PADDING_FRAMES) -> List[Window]:
    if frames <= chunk + 2 * padding:
        return [Window(0, frames, 0, frames)]
    windows: List[Window] = []
    for lo in range(0, frames, chunk):
        hi = min(lo + chunk, frames)
        start = max(0, lo - padding)
        end = min(frames, hi + padding)
        windows.append(Window(start, end, lo - start, hi - start))
    return windows


def window_frames(chunk: int = CHUNK_FRAMES, padding: int = PADDING_FRAMES) -> int:
    """The fixed window shape: the longest window :func:`plan_windows` makes."""
    return chunk + 2 * padding
