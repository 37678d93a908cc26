"""The classical-diarizer's parts: features in blocks, the KL2 matrix, the energy detector, change
detection and the state's bytes."""
from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from voxmux_host.errors import InstanceError
from voxmux_host.models.classical_diarizer.activity import energy_regions, given_regions, smooth
from voxmux_host.models.classical_diarizer.clustering import Limits, Thresholds, cluster_session, guess_session
from voxmux_host.models.classical_diarizer.diarizer import BLOCK_SAMPLES, features_of
from voxmux_host.models.classical_diarizer.features import (ENERGY_BLOCK_FRAMES, HOP_SAMPLES, frame_count, log_energy,
                                                            mfcc)
from voxmux_host.models.classical_diarizer.segmentation import change_points
from voxmux_host.models.classical_diarizer.state import SessionState, decode, encode
from voxmux_host.models.classical_diarizer.statistics import Gaussian, kl2, kl2_matrix


def _noise(seconds: float, seed: int = 0, level: float = 0.1) -> NDArray[np.float64]:
    return np.random.default_rng(seed).normal(0.0, level, int(seconds * 16000))


def test_features_and_energies_in_blocks_equal_those_of_the_whole_signal() -> None:
    audio = _noise(BLOCK_SAMPLES / 16000 + 1.013)
    whole = mfcc(audio)
    assert whole.shape == (frame_count(audio.size), 20)
    assert np.allclose(features_of(audio), whole)
    energy = log_energy(audio)
    assert energy.size == whole.shape[0] and energy.size > ENERGY_BLOCK_FRAMES
    start = (ENERGY_BLOCK_FRAMES - 1) * HOP_SAMPLES
    assert energy[ENERGY_BLOCK_FRAMES - 1] == pytest.approx(10 * np.log10(np.mean(audio[start:start + 400] ** 2)))


def test_the_kl2_matrix_equals_the_pairwise_divergences() -> None:
    rng = np.random.default_rng(1)
    models = [Gaussian.of(rng.normal(rng.normal(0, 3, 20), rng.uniform(0.5, 3, 20), (int(rng.integers(20, 200)), 20)))
              for _ in range(12)]
    expected = np.array([[kl2(a, b) if a is not b else 0.0 for b in models] for a in models])
    assert np.allclose(kl2_matrix(models), expected)
    assert kl2(models[0], models[0]) == 0.0


def test_the_energy_detector_finds_speech_between_silences_and_bridges_short_gaps() -> None:
    silence, loud = np.zeros(16000), _noise(1.0)
    audio = np.concatenate([silence, loud, np.zeros(1600), loud, silence])  # a 0.1 s gap inside
    [(start, end)] = energy_regions(log_energy(audio))
    assert abs(start - 100) <= 3 and abs(end - 310) <= 3
    assert energy_regions(log_energy(np.zeros(16000))) == []
    assert smooth([(0, 10), (100, 150)]) == [(100, 150)]


def test_given_regions_are_sorted_merged_and_clipped() -> None:
    assert given_regions([[2.0, 3.0], [0.5, 1.0], [0.9, 1.5], [4.0, 9.0], [1.7, 1.7]], 500) == [
        (50, 150), (200, 300), (400, 500)]


def test_a_change_of_voice_is_found_where_it_happens() -> None:
    rng = np.random.default_rng(2)
    first = rng.normal(0, 1, (300, 20))
    second = rng.normal(2, 1, (300, 20))
    features = np.concatenate([first, second])
    assert change_points(features, (0, 600), 0.5) == [300]
    assert change_points(first, (0, 300), 0.5) == []


def test_the_state_round_trips_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    speaker = (Gaussian.of(rng.normal(0, 1, (70, 20))), Gaussian.of(rng.normal(0, 1, (90, 20)) / 3))
    state = SessionState(4, (speaker, speaker[:1]), 44.97, (rng.normal(0, 3000, 1234)).astype(np.int16),
                         ((0, 40), (55, 77)))
    data = encode(state)
    again = decode(data)
    assert encode(again) == data
    assert again.next_seq == 4 and again.tail_start_s == 44.97 and again.tail_regions == ((0, 40), (55, 77))
    assert np.array_equal(again.tail_audio, state.tail_audio)
    assert all(np.array_equal(a.total, b.total) for a, b in zip(again.speakers[0], speaker))
    with pytest.raises(InstanceError) as caught:
        decode(data[:-1])
    assert caught.value.code == 'model_failed'


def test_the_largest_state_stays_under_1_mib() -> None:
    from voxmux_host.models.classical_diarizer.adapter import MAX_SPEAKERS
    from voxmux_host.models.classical_diarizer.clustering import MAX_EXEMPLARS
    from voxmux_host.models.classical_diarizer.diarizer import KEEP_OPEN_FRAMES, MAX_TAIL_FRAMES
    from voxmux_host.models.classical_diarizer.segmentation import MAX_PIECE_FRAMES
    from voxmux_host.protocol import MAX_STATE_BYTES

    rng = np.random.default_rng(4)
    speakers = tuple(tuple(Gaussian.of(rng.normal(0, 7, (int(rng.integers(50, 200)), 20)) * np.pi)
                           for _ in range(MAX_EXEMPLARS)) for _ in range(MAX_SPEAKERS))
    tail_frames = max(MAX_TAIL_FRAMES, KEEP_OPEN_FRAMES + MAX_PIECE_FRAMES)
    tail = rng.integers(-32768, 32767, tail_frames * HOP_SAMPLES).astype(np.int16)
    regions = tuple((i, i + 1) for i in range(0, tail_frames, 2))
    assert len(encode(SessionState(10 ** 6, speakers, 12345.678, tail, regions))) < MAX_STATE_BYTES


def _voice(center: float, pieces: int, seed: int) -> list[Gaussian]:
    """Pieces of one synthetic voice: 1.5 s each of MFCC-like frames around ``center``."""
    rng = np.random.default_rng(seed)
    return [Gaussian.of(rng.normal(center, 1.0, (150, 20))) for _ in range(pieces)]


_LIMITS = Limits(min_speakers=1, max_speakers=4)
_THRESHOLDS = Thresholds(cluster=0.4, merge=1.5, min_frames=50, min_speaker_frames=300, min_new_speaker_frames=200)


def test_a_session_keeps_its_speakers_ids_and_opens_one_for_a_new_voice() -> None:
    a, b = _voice(0.0, 6, 1), _voice(3.0, 6, 2)
    speakers: list[tuple[Gaussian, ...]] = [tuple(a[:3])]
    labels = cluster_session(speakers, [a[3], b[0], b[1], a[4]], _LIMITS, _THRESHOLDS)
    assert labels == [0, 1, 1, 0]
    assert [len(s) for s in speakers] == [5, 2]
    assert guess_session(b[2], speakers, _LIMITS, _THRESHOLDS) == 1 and [len(s) for s in speakers] == [5, 2]


def test_a_voice_taken_for_another_earlier_is_split_off_once_heard_enough() -> None:
    a, b = _voice(0.0, 6, 3), _voice(3.0, 6, 4)
    # An earlier chunk heard too little of b to tell it apart: its piece was kept as speaker 0's.
    speakers: list[tuple[Gaussian, ...]] = [(a[0], b[0], a[1])]
    labels = cluster_session(speakers, [b[1], b[2], a[2]], _LIMITS, _THRESHOLDS)
    assert labels == [1, 1, 0]
    assert speakers[0] == (a[0], a[1], a[2]) and speakers[1] == (b[0], b[1], b[2])


def test_no_more_ids_than_max_speakers_are_handed_out() -> None:
    voices = [_voice(3.0 * k, 3, 10 + k) for k in range(3)]
    speakers: list[tuple[Gaussian, ...]] = []
    labels = cluster_session(speakers, [p for v in voices for p in v], Limits(1, 2), _THRESHOLDS)
    assert len(speakers) == 2 and set(labels) == {0, 1}
