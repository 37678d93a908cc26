"""Sortformer post-processing on hand-made probability arrays: hysteresis thresholds, padding, minimum
durations on and off, and the streaming split into final and provisional segments (the final ones never
change, and together they equal the whole-recording result)."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import numpy.typing as npt
import pytest

from voxmux_host.models.sortformer.config import POST_PROCESSING, PostProcessingParams
from voxmux_host.models.sortformer.postprocess import PostState, SlotSegment, advance, offline_segments

FRAME = 0.08


def column(values: List[float], slots: int = 1, slot: int = 0) -> npt.NDArray[np.float32]:
    probs = np.zeros((len(values), slots), dtype=np.float32)
    probs[:, slot] = values
    return probs


def rounded(segments: List[SlotSegment]) -> List[SlotSegment]:
    return [(round(a, 6), round(b, 6), k) for a, b, k in segments]


def test_speech_runs_from_the_first_frame_above_onset_to_the_first_below_offset() -> None:
    probs = column([0.1, 0.2, 0.9, 0.8, 0.7, 0.1, 0.1, 0.6, 0.1])
    assert rounded(offline_segments(probs, PostProcessingParams(), FRAME)) == [(0.16, 0.40, 0), (0.56, 0.64, 0)]


def test_hysteresis_keeps_speech_between_offset_and_onset() -> None:
    params = PostProcessingParams(onset=0.7, offset=0.3)
    probs = column([0.5, 0.8, 0.5, 0.4, 0.65, 0.2, 0.65])
    assert rounded(offline_segments(probs, params, FRAME)) == [(0.08, 0.40, 0)]


def test_padding_extends_and_clips_at_zero_and_merges_overlaps() -> None:
    params = PostProcessingParams(pad_onset=0.1, pad_offset=0.05)
    probs = column([0.9, 0.1, 0.1, 0.9, 0.1, 0.1, 0.1, 0.1, 0.9, 0.1])
    # [0, 0.08] -> [0, 0.13]; [0.24, 0.32] -> [0.14, 0.37]; [0.64, 0.72] -> [0.54, 0.77]
    assert rounded(offline_segments(probs, params, FRAME)) == [(0.0, 0.13, 0), (0.14, 0.37, 0), (0.54, 0.77, 0)]
    merged = PostProcessingParams(pad_onset=0.1, pad_offset=0.1)
    assert rounded(offline_segments(probs, merged, FRAME)) == [(0.0, 0.42, 0), (0.54, 0.82, 0)]


def test_short_speech_is_dropped_before_short_gaps_are_filled() -> None:
    probs = column([0.9, 0.9, 0.9, 0.1, 0.9, 0.1, 0.1, 0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1, 0.9, 0.9, 0.9])
    params = PostProcessingParams(min_duration_on=0.1, min_duration_off=0.3)
    # speech [0, .24], [.32, .40] (too short, dropped), [.56, .80], [1.12, 1.36] (end of recording)
    # the gap .24 -> .56 (0.32) stays, the gap .80 -> 1.12 (0.32) stays
    assert rounded(offline_segments(probs, params, FRAME)) == [(0.0, 0.24, 0), (0.56, 0.8, 0), (1.12, 1.36, 0)]
    fill = PostProcessingParams(min_duration_on=0.1, min_duration_off=0.33)
    assert rounded(offline_segments(probs, fill, FRAME)) == [(0.0, 1.36, 0)]


def test_slots_are_independent_and_may_overlap() -> None:
    probs = np.zeros((6, 2), dtype=np.float32)
    probs[1:4, 0] = 0.9
    probs[2:6, 1] = 0.9
    assert rounded(offline_segments(probs, PostProcessingParams(), FRAME)) == [(0.08, 0.32, 0), (0.16, 0.48, 1)]


def test_an_open_segment_is_provisional_until_it_closes() -> None:
    state = PostState(n_slots=1)
    params = PostProcessingParams()
    final, provisional = advance(state, column([0.1, 0.9, 0.9]), params, FRAME, False)
    assert final == [] and rounded(provisional) == [(0.08, 0.24, 0)]
    final, provisional = advance(state, column([0.9, 0.1, 0.1]), params, FRAME, False)
    assert rounded(final) == [(0.08, 0.32, 0)] and provisional == []


def test_a_closed_segment_waits_while_a_later_one_could_join_it() -> None:
    state = PostState(n_slots=1)
    params = PostProcessingParams(min_duration_off=0.3)
    final, provisional = advance(state, column([0.9, 0.9, 0.1, 0.1]), params, FRAME, False)
    assert final == [] and rounded(provisional) == [(0.0, 0.16, 0)]
    final, provisional = advance(state, column([0.1, 0.9]), params, FRAME, False)
    assert final == [] and rounded(provisional) == [(0.0, 0.48, 0)]  # the gap of 0.24 is filled
    final, provisional = advance(state, column([0.1, 0.1, 0.1, 0.1, 0.1]), params, FRAME, False)
    assert rounded(final) == [(0.0, 0.48, 0)] and provisional == []


@pytest.mark.parametrize("name", sorted(POST_PROCESSING))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streaming_final_segments_equal_the_whole_recording(name: str, seed: int) -> None:
    params = POST_PROCESSING[name]
    rng = np.random.default_rng(seed)
    # slowly varying activity with flicker, 4 slots
    base = np.repeat(rng.random((40, 4)), 5, axis=0)
    probs = np.clip(base + 0.25 * rng.standard_normal(base.shape), 0.0, 1.0).astype(np.float32)
    expected = offline_segments(probs, params, FRAME)
    state = PostState(n_slots=4)
    finals: List[SlotSegment] = []
    cuts = [0, 7, 8, 30, 77, 120, 121, 199, 200]
    for a, b in zip(cuts, cuts[1:]):
        final, provisional = advance(state, probs[a:b], params, FRAME, b == probs.shape[0])
        for segment in final:
            assert segment in expected  # final means final
        assert not finals or not final or all(f[0] >= 0 for f in final)
        finals.extend(final)
    assert sorted(finals, key=lambda s: (s[0], s[2])) == expected
    for k in range(4):
        mine = [s for s in expected if s[2] == k]
        assert all(a[1] <= b[0] for a, b in zip(mine, mine[1:]))  # a speaker's segments never overlap


def test_state_round_trips_through_json() -> None:
    state = PostState(n_slots=2)
    advance(state, np.full((5, 2), 0.9, dtype=np.float32), PostProcessingParams(min_duration_off=1.0), FRAME, False)
    copy = PostState.from_json(state.to_json(), 2)
    assert copy == state
    with pytest.raises(ValueError, match="slots"):
        PostState.from_json(state.to_json(), 3)


# NeMo's ts_vad_post_processing binarises the 80 ms values repeated on a 10 ms grid
# (torch.repeat_interleave(x, 8), then vad_utils.binarization over 10 ms frames). Where offset > onset
# (the "dihard3" preset: onset 0.56, offset 1.0), a frame above onset starts speech on one 10 ms
# sub-frame and the next sub-frame (below offset) ends it, then the one after starts it again: every
# boundary lands on the 10 ms grid and a run of active 80 ms frames is covered to its last sub-frame.
# Binarising on the 80 ms grid instead closes the segment one whole frame after it starts and never
# restarts on the closing frame, so runs lose up to 70 ms at their end (or gain 10 ms).
@pytest.mark.parametrize("values, nemo", [
    ([0, 0, 0.9, 0.9, 0, 0, 0, 0], [(0.097, 0.312, 0)]),
    ([0, 0, 0.9, 0.9, 0.9, 0, 0, 0], [(0.097, 0.392, 0)]),
    ([0, 0, 0.9, 0, 0, 0, 0, 0], [(0.097, 0.232, 0)]),
    ([0, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7] + [0] * 11, [(0.017, 0.552, 0)]),
])
def test_dihard3_preset_matches_nemo_binarization_on_the_10ms_grid(values: List[float],
                                                                   nemo: List[SlotSegment]) -> None:
    params = POST_PROCESSING["dihard3"]
    assert rounded(offline_segments(column(values), params, FRAME)) == nemo


def nemo_segments(values: List[float], params: PostProcessingParams) -> List[Tuple[float, float]]:
    """NeMo's ts_vad_post_processing for one slot, step by step on the 10 ms grid (vad_utils.binarization,
    then filtering with speech filtered first), in plain Python."""
    sub = [v for v in values for _ in range(8)]
    segments: List[Tuple[float, float]] = []
    speech, start = False, 0.0
    for i, v in enumerate(sub):
        if speech:
            if v < params.offset:
                if i * 0.01 + params.pad_offset > max(0.0, start - params.pad_onset):
                    segments.append((max(0.0, start - params.pad_onset), i * 0.01 + params.pad_offset))
                start, speech = i * 0.01, False
        elif v > params.onset:
            start, speech = i * 0.01, True
    assert not speech, "the reference is used on recordings that end in silence"
    merged: List[Tuple[float, float]] = []
    for a, b in segments:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    kept = [s for s in merged if s[1] - s[0] >= params.min_duration_on]
    out: List[Tuple[float, float]] = []
    for a, b in kept:
        if out and a - out[-1][1] < params.min_duration_off:
            out[-1] = (out[-1][0], max(b, out[-1][1]))
        else:
            out.append((a, b))
    return out


@pytest.mark.parametrize("params", [
    *POST_PROCESSING.values(),
    PostProcessingParams(onset=0.3, offset=0.7),
    PostProcessingParams(onset=0.3, offset=0.7, min_duration_off=0.05),
    PostProcessingParams(onset=0.3, offset=0.7, pad_onset=0.004, pad_offset=0.004, min_duration_on=0.015),
])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_segments_equal_nemo_binarization_on_the_10ms_grid(params: PostProcessingParams, seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = np.repeat(rng.random(60), 3)
    values = np.concatenate((np.clip(base + 0.2 * rng.standard_normal(base.shape), 0.0, 1.0), np.zeros(8)))
    values = values.astype(np.float32)
    nemo = [(round(a, 6), round(b, 6), 0) for a, b in nemo_segments([float(v) for v in values], params)]
    assert rounded(offline_segments(column(list(values)), params, FRAME)) == nemo
    state = PostState(n_slots=1)
    finals: List[SlotSegment] = []
    for a, b in zip([0, 5, 6, 40, 111, 150], [5, 6, 40, 111, 150, values.shape[0]]):
        final, _ = advance(state, column(list(values[a:b])), params, FRAME, b == values.shape[0])
        finals.extend(final)
    assert rounded(finals) == nemo
