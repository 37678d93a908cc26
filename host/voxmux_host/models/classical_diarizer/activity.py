"""Voice activity: the regions where someone speaks, in frames of 10 ms.

The gateway's Silero VAD regions (the item's ``speech`` option) are used when given; otherwise an
energy detector finds them: a frame is speech when its energy is well above the recording's noise
floor (its 10th percentile) and within a fixed range of its loud frames (its 99th percentile), then
short gaps are bridged and short blips dropped.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray

from .features import FRAME_RATE_HZ

Region = Tuple[int, int]  # [start, end) in frames

#: A frame this far above the noise floor (dB) may be speech...
ABOVE_FLOOR_DB = 12.0
#: ...and must be within this much of the loud frames (dB).
BELOW_PEAK_DB = 40.0
#: Never speech below this level (dB full scale): digital silence and faint hiss.
ABSOLUTE_FLOOR_DB = -60.0
#: Gaps shorter than this (frames) inside speech are bridged: pauses between words.
BRIDGE_FRAMES = 15
#: Regions shorter than this (frames) are dropped: clicks and breaths.
MIN_REGION_FRAMES = 20


def energy_regions(energy_db: NDArray[np.float64]) -> List[Region]:
    """Speech regions of a signal from its frame energies (features.log_energy)."""
    if energy_db.size == 0:
        return []
    floor = float(np.percentile(energy_db, 10))
    peak = float(np.percentile(energy_db, 99))
    threshold = max(floor + ABOVE_FLOOR_DB, peak - BELOW_PEAK_DB, ABSOLUTE_FLOOR_DB)
    return smooth(runs(energy_db > threshold))


def runs(mask: NDArray[np.bool_]) -> List[Region]:
    """The [start, end) runs of True in ``mask``."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return [(int(a), int(b)) for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))]


def smooth(regions: Sequence[Region]) -> List[Region]:
    """Bridge gaps shorter than BRIDGE_FRAMES, then drop regions shorter than MIN_REGION_FRAMES."""
    merged: List[Region] = []
    for start, end in regions:
        if merged and start - merged[-1][1] < BRIDGE_FRAMES:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return [(a, b) for a, b in merged if b - a >= MIN_REGION_FRAMES]


def given_regions(speech: Sequence[Sequence[float]], frames: int) -> List[Region]:
    """The ``speech`` option's [[startS, endS], ...] (already validated) as sorted, merged frame regions
    within [0, frames)."""
    spans = sorted((max(0, int(round(a * FRAME_RATE_HZ))), min(frames, int(round(b * FRAME_RATE_HZ))))
                   for a, b in speech)
    merged: List[Region] = []
    for start, end in spans:
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
