"""Speaker probabilities to segments, incrementally (NeMo's ``ts_vad_post_processing``, per speaker slot).

Per slot and 80 ms frame: hysteresis binarisation (speech starts at the first frame with p > onset and
ends at the first frame with p < offset), each segment padded by ``pad_onset`` before (clipped at 0) and
``pad_offset`` after, overlapping padded segments merged; then segments shorter than ``min_duration_on``
dropped, then gaps shorter than ``min_duration_off`` filled. NeMo repeats each 80 ms value on a 10 ms grid
before binarising, which puts every boundary on a multiple of 80 ms, as here; at the very end of a
recording an open segment ends at the end of the last frame.

Streaming: a segment becomes **final** once no later frame can change it: no future segment can overlap
it (its end is before the earliest start a future segment can have) and no later segment can join it by
gap filling (the gap to the earliest possible next start is at least ``min_duration_off``). Everything
after the final segments is **provisional**: it is what the offline rules give for the frames seen so far,
with open segments ending at the last frame.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from .config import PostProcessingParams

#: (start seconds, end seconds)
Interval = Tuple[float, float]
#: (start seconds, end seconds, slot)
SlotSegment = Tuple[float, float, int]


@dataclass
class SlotState:
    in_speech: bool = False
    start_frame: int = 0
    #: Padded, overlap-merged segments not yet final, in time order.
    closed: List[Interval] = field(default_factory=list)


@dataclass
class PostState:
    n_slots: int
    frames: int = 0
    slots: List[SlotState] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.slots:
            self.slots = [SlotState() for _ in range(self.n_slots)]

    def to_json(self) -> Dict[str, Any]:
        return {
            "frames": self.frames,
            "slots": [[int(s.in_speech), s.start_frame, [list(c) for c in s.closed]] for s in self.slots],
        }

    @staticmethod
    def from_json(raw: Dict[str, Any], n_slots: int) -> "PostState":
        slots = [SlotState(bool(on), int(start), [(float(a), float(b)) for a, b in closed])
                 for on, start, closed in raw["slots"]]
        if len(slots) != n_slots:
            raise ValueError(f"Expected {n_slots} post-processing slots: got {len(slots)}")
        return PostState(n_slots=n_slots, frames=int(raw["frames"]), slots=slots)


def _add(closed: List[Interval], segment: Interval) -> None:
    if closed and segment[0] <= closed[-1][1]:
        closed[-1] = (closed[-1][0], max(closed[-1][1], segment[1]))
    else:
        closed.append(segment)


def _close(slot: SlotState, end_frame: int, params: PostProcessingParams, frame_s: float) -> None:
    start = max(0.0, slot.start_frame * frame_s - params.pad_onset)
    end = end_frame * frame_s + params.pad_offset
    if end > start:
        _add(slot.closed, (start, end))
    slot.in_speech = False


def filter_segments(segments: Sequence[Interval], params: PostProcessingParams) -> List[Interval]:
    """The offline rules on time-ordered, non-overlapping segments: drop short speech, fill short gaps."""
    kept = [s for s in segments if s[1] - s[0] >= params.min_duration_on]
    out: List[Interval] = []
    for s in kept:
        if out and s[0] - out[-1][1] < params.min_duration_off:
            out[-1] = (out[-1][0], max(out[-1][1], s[1]))
        else:
            out.append(s)
    return out


def advance(
    state: PostState,
    probs: npt.NDArray[np.float32],
    params: PostProcessingParams,
    frame_s: float,
    is_last: bool,
) -> Tuple[List[SlotSegment], List[SlotSegment]]:
    """Take the next frames' probabilities [n, slots]; return (segments final from now on, provisional
    segments), each sorted by start. ``state`` is updated in place."""
    n = probs.shape[0]
    for k, slot in enumerate(state.slots):
        column = probs[:, k] if k < probs.shape[1] else np.zeros(n, dtype=np.float32)
        ends = column < params.offset
        starts = column > params.onset
        i = 0
        while i < n:  # one iteration per transition, not per frame
            hits = ends[i:] if slot.in_speech else starts[i:]
            if not hits.any():
                break
            frame = state.frames + i + int(np.argmax(hits))
            if slot.in_speech:
                _close(slot, frame, params, frame_s)
            else:
                slot.in_speech = True
            slot.start_frame = frame
            i = frame - state.frames + 1
    state.frames += n
    if is_last:
        for slot in state.slots:
            if slot.in_speech:
                _close(slot, state.frames, params, frame_s)

    final: List[SlotSegment] = []
    provisional: List[SlotSegment] = []
    now = state.frames * frame_s
    for k, slot in enumerate(state.slots):
        if is_last:
            future = float("inf")
        else:
            future = now - params.pad_onset
            if slot.in_speech:
                future = min(future, max(0.0, slot.start_frame * frame_s - params.pad_onset))
        settled = [c for c in slot.closed if c[1] < future]
        unsettled = slot.closed[len(settled):]
        boundary = min([future] + [c[0] for c in unsettled])
        groups = filter_segments(settled, params)
        keep: List[Interval] = []
        for g in groups:
            if boundary - g[1] >= params.min_duration_off:
                final.append((g[0], g[1], k))
            else:
                keep.append(g)
        slot.closed = keep + unsettled
        tentative = list(slot.closed)
        if slot.in_speech:
            start = max(0.0, slot.start_frame * frame_s - params.pad_onset)
            end = now + params.pad_offset
            if tentative and start <= tentative[-1][1]:
                tentative[-1] = (tentative[-1][0], max(end, tentative[-1][1]))
            elif end > start:
                tentative.append((start, end))
        provisional.extend((a, b, k) for a, b in filter_segments(tentative, params))
    final.sort(key=lambda s: (s[0], s[2]))
    provisional.sort(key=lambda s: (s[0], s[2]))
    return final, provisional


def offline_segments(probs: npt.NDArray[np.float32], params: PostProcessingParams,
                     frame_s: float) -> List[SlotSegment]:
    """The whole recording at once (reference for tests and whole-file use)."""
    state = PostState(n_slots=probs.shape[1])
    final, provisional = advance(state, probs, params, frame_s, is_last=True)
    assert not provisional
    return final
