"""Speaker probabilities to segments, incrementally (NeMo's ``ts_vad_post_processing``, per speaker slot).

NeMo repeats each 80 ms value on its 10 ms grid (``torch.repeat_interleave(x, 8)``) and binarises
there (``vad_utils.binarization``), and so does this module, per slot: speech starts at the first 10 ms
sub-frame with p > onset and ends at the first one with p < offset, and the sub-frame that ends speech
cannot start it again (the next one can). Each segment is padded by ``pad_onset`` before (clipped at 0)
and ``pad_offset`` after, overlapping padded segments are merged; then segments shorter than
``min_duration_on`` are dropped, then gaps shorter than ``min_duration_off`` filled
(``vad_utils.filtering``, speech filtered first).

Where offset <= onset every boundary falls on an 80 ms frame edge. Where offset > onset (the "dihard3"
preset: onset 0.56, offset 1.0), a frame with onset < p < offset starts and ends speech on alternate
sub-frames: a run of such frames gives 10 ms pieces one sub-frame apart (joined by padding, or by
``min_duration_off``), and a run of speech is covered to its last sub-frame.

NOTE: at the very end of a recording an open segment ends at the end of the last frame; NeMo ends it at
the start of the last 10 ms sub-frame (10 ms earlier), and may emit a zero-length segment there, which
is not kept here.

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
#: Sub-frames per frame on which speech is binarised (NeMo's ``unit_10ms_frame_count``: 10 ms each).
SUBFRAMES = 8
#: A margin (seconds) far above float rounding and far below any padding that matters.
_CLEAR_S = 1e-6


@dataclass
class SlotState:
    in_speech: bool = False
    #: The sub-frame (``SUBFRAMES`` a frame) where the open segment started.
    start_sub: int = 0
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
            "slots": [[int(s.in_speech), s.start_sub, [list(c) for c in s.closed]] for s in self.slots],
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


def _close(slot: SlotState, end_sub: int, params: PostProcessingParams, sub_s: float) -> None:
    start = max(0.0, slot.start_sub * sub_s - params.pad_onset)
    end = end_sub * sub_s + params.pad_offset
    if end > start:
        _add(slot.closed, (start, end))
    slot.in_speech = False


def _flip_run(slot: SlotState, first_sub: int, end_sub: int, params: PostProcessingParams, sub_s: float) -> None:
    """Sub-frames [first_sub, end_sub) of frames with onset < p < offset: speech ends on one sub-frame and
    starts on the next, so they alternate (an even count per frame: the run leaves the slot as it found
    it, an open segment then starting on the run's last sub-frame)."""
    if slot.in_speech:
        _close(slot, first_sub, params, sub_s)
        pieces = np.arange(first_sub + 1, end_sub - 1, 2)
        slot.in_speech = True
        slot.start_sub = end_sub - 1
    else:
        pieces = np.arange(first_sub, end_sub, 2)
    if pieces.size == 0:
        return
    if params.pad_onset + params.pad_offset > sub_s + _CLEAR_S:
        # The padding clearly bridges the one sub-frame between pieces (the "dihard3" preset): one segment.
        first, last = int(pieces[0]), int(pieces[-1])
        _add(slot.closed, (max(0.0, first * sub_s - params.pad_onset), (last + 1) * sub_s + params.pad_offset))
        return
    # One 10 ms piece per pair of sub-frames, padded; merged here as _add would merge them one by one
    # (their ends increase), without a Python step per piece.
    starts = np.maximum(0.0, pieces * sub_s - params.pad_onset)
    ends = (pieces + 1) * sub_s + params.pad_offset
    is_first = np.ones(pieces.size, dtype=bool)
    is_first[1:] = starts[1:] > ends[:-1]
    firsts = np.flatnonzero(is_first)
    for a, b in zip(firsts, np.append(firsts[1:] - 1, pieces.size - 1)):
        _add(slot.closed, (float(starts[a]), float(ends[b])))


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
    sub_s = frame_s / SUBFRAMES
    for k, slot in enumerate(state.slots):
        column = probs[:, k] if k < probs.shape[1] else np.zeros(n, dtype=np.float32)
        ends = column < params.offset
        starts = column > params.onset
        flips = ends & starts  # only where offset > onset
        i = 0
        while i < n:  # one iteration per transition or run of flip frames, not per frame
            hits = ends[i:] if slot.in_speech else starts[i:]
            if not hits.any():
                break
            j = i + int(np.argmax(hits))
            sub = (state.frames + j) * SUBFRAMES
            if flips[j]:
                rest = ~flips[j:]
                stop = j + (int(np.argmax(rest)) if rest.any() else n - j)
                _flip_run(slot, sub, (state.frames + stop) * SUBFRAMES, params, sub_s)
                i = stop
                continue
            if slot.in_speech:
                _close(slot, sub, params, sub_s)
            else:
                slot.in_speech = True
                slot.start_sub = sub
            i = j + 1
    state.frames += n
    if is_last:
        for slot in state.slots:
            if slot.in_speech:
                _close(slot, state.frames * SUBFRAMES, params, sub_s)

    final: List[SlotSegment] = []
    provisional: List[SlotSegment] = []
    now = state.frames * frame_s
    for k, slot in enumerate(state.slots):
        if is_last:
            future = float("inf")
        else:
            future = now - params.pad_onset
            if slot.in_speech:
                future = min(future, max(0.0, slot.start_sub * sub_s - params.pad_onset))
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
            start = max(0.0, slot.start_sub * sub_s - params.pad_onset)
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
