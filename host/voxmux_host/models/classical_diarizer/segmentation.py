"""Speaker change detection: each speech region is cut where the speaker statistics of the second
before a point and the second after it differ most (a KL2 peak above a threshold, at least a window
apart), then pieces longer than MAX_PIECE_FRAMES are cut evenly, so that a missed change costs at
most one piece."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
from numpy.typing import NDArray

from .activity import Region
from .statistics import Gaussian, kl2

#: Frames on each side of a candidate change point (1 s).
WINDOW_FRAMES = 100
#: Candidate change points every this many frames (0.1 s).
STEP_FRAMES = 10
#: Pieces are cut evenly to at most this long (2 s).
MAX_PIECE_FRAMES = 200


def change_points(features: NDArray[np.float64], region: Region, threshold: float) -> List[int]:
    """Frames inside ``region`` where the speaker changes."""
    start, end = region
    candidates = list(range(start + WINDOW_FRAMES, end - WINDOW_FRAMES + 1, STEP_FRAMES))
    if not candidates:
        return []
    scores = np.array([kl2(Gaussian.of(features[t - WINDOW_FRAMES:t]), Gaussian.of(features[t:t + WINDOW_FRAMES]))
                       for t in candidates])
    chosen: List[int] = []
    # Greedy peak picking, highest first; ties break on the earlier frame, so the result is deterministic.
    for index in sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i])):
        if scores[index] < threshold:
            break
        if all(abs(candidates[index] - c) >= WINDOW_FRAMES for c in chosen):
            chosen.append(candidates[index])
    return sorted(chosen)


def pieces(features: NDArray[np.float64], regions: Sequence[Region], threshold: float) -> List[Region]:
    """The speech regions cut at speaker changes and to at most MAX_PIECE_FRAMES, in time order."""
    out: List[Region] = []
    for region in regions:
        cuts = [region[0], *change_points(features, region, threshold), region[1]]
        for a, b in zip(cuts, cuts[1:]):
            parts = -(-(b - a) // MAX_PIECE_FRAMES)
            bounds = [a + (b - a) * i // parts for i in range(parts + 1)]
            out += [(x, y) for x, y in zip(bounds, bounds[1:]) if y > x]
    return out
