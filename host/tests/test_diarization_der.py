"""The DER scorer of the diarization tests, on hand-made cases with known answers."""
from __future__ import annotations

import pytest

from diarization_support import Turn, read_rttm, score_der


def test_a_perfect_hypothesis_scores_zero_whatever_its_speaker_names() -> None:
    reference = [Turn(0, 5, 'A'), Turn(6, 10, 'B')]
    hypothesis = [Turn(0, 5, '1'), Turn(6, 10, '0')]
    score = score_der(reference, hypothesis)
    assert score.der == 0.0
    # Collars of 0.25 s at 0, 5, 6 and 10, each with half of it inside a turn.
    assert score.scored_s == pytest.approx((5 - 0.5) + (4 - 0.5))


def test_an_empty_hypothesis_misses_everything() -> None:
    score = score_der([Turn(0, 10, 'A')], [])
    assert score.der == pytest.approx(1.0)
    assert score.missed_s == pytest.approx(10 - 0.25 - 0.25)
    assert (score.false_alarm_s, score.confusion_s) == (0.0, 0.0)


def test_speech_where_there_is_none_is_false_alarm() -> None:
    score = score_der([Turn(0, 4, 'A')], [Turn(0, 4, 'x'), Turn(6, 8, 'x')])
    assert score.false_alarm_s == pytest.approx(2.0)
    assert score.der == pytest.approx(2.0 / 3.5)


def test_one_speaker_said_to_be_two_counts_the_smaller_part_as_confusion() -> None:
    # A speaks 0-10; the hypothesis gives 0-7 to x and 7-10 to y: x maps to A, y's 3 s are confusion.
    score = score_der([Turn(0, 10, 'A')], [Turn(0, 7, 'x'), Turn(7, 10, 'y')])
    assert score.confusion_s == pytest.approx(3.0 - 0.25)
    assert score.missed_s == 0.0 and score.false_alarm_s == 0.0


def test_two_speakers_said_to_be_one_confuse_the_shorter() -> None:
    score = score_der([Turn(0, 6, 'A'), Turn(6, 10, 'B')], [Turn(0, 10, 'x')])
    assert score.confusion_s == pytest.approx(4 - 0.25 - 0.25)
    assert score.der == pytest.approx(3.5 / (10 - 0.25 - 0.5 - 0.25))


def test_overlapped_speech_is_scored_per_speaker() -> None:
    # A 0-10 and B 4-8 overlap; the hypothesis has A alone: B's 4 s (less its collars) are missed.
    reference = [Turn(0, 10, 'A'), Turn(4, 8, 'B')]
    score = score_der(reference, [Turn(0, 10, 'x')])
    assert score.missed_s == pytest.approx(4 - 0.25 - 0.25)
    # A loses 0.25 s at 0 and 10 and 0.5 s at 4 and 8 (B's boundaries); B loses 0.25 s at each end.
    assert score.scored_s == pytest.approx((10 - 0.25 - 0.25 - 1.0) + (4 - 0.5))
    assert score.confusion_s == 0.0
    both = score_der(reference, [Turn(0, 10, 'x'), Turn(4, 8, 'y')])
    assert both.der == 0.0


def test_boundaries_within_the_collar_are_not_scored() -> None:
    assert score_der([Turn(1, 5, 'A'), Turn(5, 9, 'B')], [Turn(1.2, 5.2, 'x'), Turn(5.2, 8.8, 'y')]).der == 0.0
    assert score_der([Turn(1, 5, 'A')], [Turn(1.4, 5, 'x')], collar_s=0.25).missed_s == pytest.approx(0.15)
    assert score_der([Turn(1, 5, 'A')], [Turn(1.4, 5, 'x')], collar_s=0.0).missed_s == pytest.approx(0.4)


def test_rttm_speaker_lines_are_read_by_recording() -> None:
    text = ('SPEAKER dev00 1 1.440 11.872 <NA> <NA> MEE009 <NA> <NA>\n'
            'SPEAKER dev01 1 4.304 2.448 <NA> <NA> MEE012 <NA> <NA>\n'
            'NOT-A-TURN dev01 1 0 1 <NA> <NA> x <NA> <NA>\n')
    turns = read_rttm(text)
    assert turns['dev00'] == [Turn(1.44, pytest.approx(13.312), 'MEE009')]  # type: ignore[arg-type]
    assert [t.speaker for t in turns['dev01']] == ['MEE012']
