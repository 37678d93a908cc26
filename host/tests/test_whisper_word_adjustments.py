"""Whisper word timestamps after the alignment, checked against OpenAI's reference (openai/whisper, release
20250625: whisper/timing.py add_word_timestamps, whisper/utils.py get_end, whisper/transcribe.py): long
words cut at sentence ends and after pauses, segments moved to their words' bounds. Hand-made word lists
whose expected times follow the reference's rules by hand; engine tests on the tiny config (CPU) with the
alignment's path given, among them transcribe()'s move of seek to the last word's end and its clearing of
segments without duration or text after the word timestamps (their expected segments and words checked by
running OpenAI's add_word_timestamps, get_end and clearing loop on the same words)."""
from __future__ import annotations

from collections import deque
from typing import Dict, Iterator, List, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import pytest
import torch

from voxmux_host.models.whisper import alignment
from voxmux_host.models.whisper.alignment import WordTiming, split_words
from voxmux_host.models.whisper.config import N_FRAMES, TINY
from voxmux_host.models.whisper.decoding import (DecodeBatch, DecodedSegment, EngineOptions, RequestOptions,
                                                 WhisperEngine, _Active, _Job, _Window)
from voxmux_host.models.whisper.model import WhisperModel, build_model
from voxmux_host.models.whisper.tokenizer import tiny_tokenizer
from voxmux_host.models.whisper.word_adjustments import (add_word_timestamps, adjust_segment, duration_limits,
                                                         speech_end, truncate_at_sentence_ends)

EOT = 100  # text tokens below it, timestamps above it, in the hand-made segments


def _segment(start: float, end: float, tokens: Sequence[int]) -> DecodedSegment:
    return DecodedSegment(start, end, "", list(tokens), 0.0, 0.0, 0.0, 0.0, 0)


def _times(words: Sequence[WordTiming]) -> List[Tuple[str, float, float]]:
    return [(w.text, w.start, w.end) for w in words]


def _same(got: Sequence[Tuple[str, float, float]], expected: Sequence[Tuple[str, float, float]]) -> bool:
    """The same texts, and times equal but for rounding errors."""
    numbers = [x for _, start, end in expected for x in (start, end)]
    return ([text for text, _, _ in got] == [text for text, _, _ in expected]
            and [x for _, start, end in got for x in (start, end)] == pytest.approx(numbers))


# ------------------------------------------------------------------------------ the durations


def test_the_median_word_duration_leaves_out_zero_durations_and_is_at_most_0_7_s() -> None:
    """timing.py add_word_timestamps: the median of the words' nonzero durations, at most 0.7 s (0 without
    any); the longest a word may be is twice that."""
    words = [WordTiming(" a", 0.0, 0.0), WordTiming(" b", 0.0, 0.2), WordTiming(" c", 0.2, 0.6),
             WordTiming(" d", 0.6, 1.2)]
    assert duration_limits(words) == pytest.approx((0.4, 0.8))
    long = [WordTiming(" a", 0.0, 1.0), WordTiming(" b", 1.0, 3.0), WordTiming(" c", 3.0, 6.0)]
    assert duration_limits(long) == (0.7, 1.4)
    assert duration_limits([WordTiming(" a", 1.0, 1.0)]) == (0.0, 0.0)
    assert duration_limits([]) == (0.0, 0.0)


def test_long_words_at_sentence_ends_are_cut_before_punctuation_is_merged() -> None:
    """timing.py add_word_timestamps, "truncate long words at sentence boundaries": from the second word on,
    a word longer than the maximum that is a sentence-end mark (.。!！?？) ends the maximum after its start;
    one after such a mark starts the maximum before its end. The first word is never cut; a comma is no
    sentence end."""
    words = [WordTiming("?", 0.0, 3.0), WordTiming(" Hi", 3.0, 3.3), WordTiming(".", 3.3, 5.0),
             WordTiming(" Yes", 5.0, 7.0), WordTiming(",", 7.0, 9.0), WordTiming(" no", 9.0, 11.0),
             WordTiming("！", 11.0, 11.5), WordTiming(" ok", 11.5, 11.9)]
    truncate_at_sentence_ends(words, 1.0)
    assert _same(_times(words), [
        ("?", 0.0, 3.0), (" Hi", 3.0, 3.3), (".", 3.3, 4.3), (" Yes", 6.0, 7.0), (",", 7.0, 9.0),
        (" no", 9.0, 11.0), ("！", 11.0, 11.5), (" ok", 11.5, 11.9)])


# ------------------------------------------------------------------------------ one segment's words


def test_the_first_word_after_a_pause_is_cut_to_the_maximum() -> None:
    """timing.py add_word_timestamps, "the first and second word after a pause": the first word ends more
    than 4 median durations after the last speech and is longer than the maximum: it starts the maximum
    before its end; the segment then starts and ends with its words."""
    segment = _segment(1.0, 6.0, [])
    words = [WordTiming(" a", 2.0, 5.0), WordTiming(" b", 5.0, 5.3)]
    last = adjust_segment(segment, words, 0.5, 1.0, 0.0)
    assert _same(_times(words), [(" a", 4.0, 5.0), (" b", 5.0, 5.3)])
    assert (segment.start, segment.end, last) == pytest.approx((4.0, 5.3, 5.3))


def test_a_long_second_word_after_a_pause_moves_the_boundary_between_the_first_two() -> None:
    """timing.py add_word_timestamps: after a pause, the first two words spanning more than twice the
    maximum and the second longer than the maximum: they meet at max(second's end / 2, second's end - the
    maximum), and the first starts the maximum before that."""
    segment = _segment(3.0, 7.0, [])
    words = [WordTiming(" a", 3.0, 3.4), WordTiming(" b", 3.4, 6.0), WordTiming(" c", 6.0, 6.2)]
    last = adjust_segment(segment, words, 0.5, 1.0, 1.0)
    assert _same(_times(words), [(" a", 4.0, 5.0), (" b", 5.0, 6.0), (" c", 6.0, 6.2)])
    assert (segment.start, segment.end, last) == pytest.approx((4.0, 6.2, 6.2))


def test_a_first_word_starting_well_before_the_segment_starts_with_the_segment() -> None:
    """timing.py add_word_timestamps, "prefer the segment-level start timestamp if the first word is too
    long": no pause, and the first word starts more than 0.5 s before the segment (which starts before the
    word ends): the word starts at min(its end - the median, the segment's start); the segment keeps its
    start."""
    segment = _segment(3.8, 4.3, [])
    words = [WordTiming(" a", 2.5, 4.0), WordTiming(" b", 4.0, 4.3)]
    last = adjust_segment(segment, words, 0.5, 1.0, 2.2)
    assert _same(_times(words), [(" a", 3.5, 4.0), (" b", 4.0, 4.3)])
    assert (segment.start, segment.end, last) == pytest.approx((3.8, 4.3, 4.3))


def test_a_last_word_ending_well_after_the_segment_ends_with_the_segment() -> None:
    """timing.py add_word_timestamps, "prefer the segment-level end timestamp if the last word is too long":
    the last word ends more than 0.5 s after the segment (which ends after the word starts): it ends at
    max(its start + the median, the segment's end); the segment keeps its end, the last speech is there."""
    segment = _segment(1.0, 1.6, [])
    words = [WordTiming(" a", 1.0, 1.4), WordTiming(" b", 1.4, 4.0)]
    last = adjust_segment(segment, words, 0.5, 1.0, 0.9)
    assert _same(_times(words), [(" a", 1.0, 1.4), (" b", 1.4, 1.9)])
    assert (segment.start, segment.end, last) == pytest.approx((1.0, 1.6, 1.6))
    segment = _segment(1.0, 2.0, [])
    words = [WordTiming(" a", 1.0, 1.4), WordTiming(" b", 1.4, 4.0)]
    adjust_segment(segment, words, 0.5, 1.0, 0.9)
    assert _same(_times(words), [(" a", 1.0, 1.4), (" b", 1.4, 2.0)])


def test_a_segment_without_words_keeps_its_bounds_and_the_last_speech() -> None:
    segment = _segment(1.0, 2.0, [])
    assert adjust_segment(segment, [], 0.5, 1.0, 0.7) == 0.7
    assert (segment.start, segment.end) == (1.0, 2.0)


# ------------------------------------------------------------------------------ a window's segments


def test_words_go_to_segments_by_their_tokens_after_punctuation_is_merged() -> None:
    """timing.py add_word_timestamps: each segment takes words until it has counted its text tokens, the
    words' tokens after merge_punctuations: an opening mark at a segment's end joins the next word, which
    the segment takes; a closing mark merged into the word before it is passed over. Times are the window's
    offset plus the word's, rounded to 10 ms; each segment's last speech is the next one's."""
    words = [WordTiming(" Hi", 0.104, 0.40, [1, 2]), WordTiming(" (", 0.40, 0.60, [3]),
             WordTiming(" yes", 0.60, 0.80, [4]), WordTiming(")", 0.80, 0.90, [5]),
             WordTiming(" no", 0.90, 1.20, [6])]
    segments = [_segment(10.0, 10.6, [201, 1, 2, 3, 230]), _segment(10.6, 11.4, [230, 4, 5, 6, 270])]
    per_segment = add_word_timestamps(segments, words, 10.0, 0.0, EOT)
    assert [_times(s) for s in per_segment] == [
        [(" Hi", 10.1, 10.4), (" ( yes)", 10.6, 10.8)], [(" no", 10.9, 11.2)]]
    assert [w.tokens for w in per_segment[0]] == [[1, 2], [3, 4, 5]]
    assert [(s.start, s.end) for s in segments] == [(10.1, 10.8), (10.9, 11.2)]


def test_a_window_without_segments_or_words_is_left_alone() -> None:
    assert add_word_timestamps([], [WordTiming(" a", 0.0, 1.0, [1])], 0.0, 0.0, EOT) == []
    segment = _segment(1.0, 2.0, [201, 230])
    assert add_word_timestamps([segment], [], 0.0, 0.0, EOT) == [[]]
    assert (segment.start, segment.end) == (1.0, 2.0)


def test_the_last_speech_is_the_last_words_end_else_the_last_segments_end() -> None:
    """utils.py get_end, as transcribe() keeps last_speech_timestamp after each window."""
    first, second = _segment(0.0, 1.0, []), _segment(1.0, 2.5, [])
    assert speech_end([first, second], [[WordTiming(" a", 0.0, 0.9)], []], 0.3) == 0.9
    assert speech_end([first, second], [[], []], 0.3) == 2.5
    assert speech_end([], [], 0.3) == 0.3


# ------------------------------------------------------------------------------ the engine


@pytest.fixture(scope="module")
def model() -> Iterator[WhisperModel]:
    torch.set_num_threads(2)
    yield build_model(TINY, seed=5).double()


def _fix_path(monkeypatch: pytest.MonkeyPatch, texts: Sequence[str], starts: Dict[str, int], end_of_text: int) -> None:
    """The alignment's warping path given: each word of ``texts`` (the window's segments' texts, as
    split_words splits them) starts at its column in ``starts`` (50 a second), end-of-text's row at
    ``end_of_text``; each row holds until the next row starts (rows that start together take one column
    each: a word of no duration). The path fails where the alignment has another number of rows."""
    t = tiny_tokenizer()
    text_tokens = [token for text in texts for token in t.encode(text)]
    first_columns: List[int] = []
    for word in split_words(t, text_tokens, "en"):
        first_columns += [starts[t.decode(word)]] * len(word)
    first_columns.append(end_of_text)

    def path(cost: npt.NDArray[np.float64]) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        assert cost.shape[0] == len(first_columns)
        rows: List[int] = []
        cols: List[int] = []
        bounds = first_columns + [cost.shape[1]]
        for row, column in enumerate(first_columns):
            for col in range(column, max(column + 1, bounds[row + 1])):
                rows.append(row)
                cols.append(col)
        return np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)

    monkeypatch.setattr(alignment, "dtw", path)


def _word_engine(model: WhisperModel) -> WhisperEngine:
    return WhisperEngine(model, tiny_tokenizer(), torch.device("cpu"), torch.float64,
                         EngineOptions(slots=1, batch_sizes=(1,), temperature_increment=0.0,
                                       no_speech_threshold=None))


def _word_window(model: WhisperModel, content_frames: int, seek: int = 0) -> _Window:
    """The window at ``seek`` of a job of ``content_frames`` frames of silence that asks for word
    timestamps, encoded."""
    mel = torch.zeros(80, content_frames + N_FRAMES, dtype=torch.float64)
    job = _Job(0, RequestOptions(language="en", word_timestamps=True), mel, content_frames, "en", seek=seek)
    window = _Window(job, seek, min(N_FRAMES, content_frames - seek), 0.0)
    with torch.no_grad():
        window.features = model.encoder(mel[None, :, seek:seek + N_FRAMES])[0]
    return window


def test_a_window_s_words_and_segments_get_the_adjustments(model: WhisperModel,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """transcribe.py: a window's segments and their words after add_word_timestamps, the alignment's path
    given: <|0.00|> Hi there.<|2.00|><|2.00|> Yes sir<|4.00|><|5.00|> Go home now<|10.00|>, the words
    aligned at Hi 0.2-0.5, there 0.5-0.9, . 0.9-1.0, Yes 1.0-3.0, sir 3.0-5.0, Go 5.0-8.0, home 8.0-9.5,
    now 9.5-9.9. Nonzero durations' median 0.95 -> 0.7, the maximum 1.4. Yes follows a sentence end and is
    longer: it starts at 3.0 - 1.4 = 1.6, and its segment there. sir ends 1.0 s after its segment: it ends
    at max(3.0 + 0.7, 4.0). Go ends 4.0 s after the last speech (4.0 > 4 x 0.7) and is longer than 1.4,
    home too: they meet at max(9.5 / 2, 9.5 - 1.4) = 8.1 and Go starts at 8.1 - 1.4 = 6.7. Each segment
    starts at its first word's start and ends at its last word's end, except the one whose last word was
    cut to it. The window ends on a single timestamp: seek moves a whole window (transcribe.py:369-371),
    not to the last word's end (413)."""
    t = tiny_tokenizer()
    texts = [" Hi there.", " Yes sir", " Go home now"]
    _fix_path(monkeypatch, texts, {" Hi": 10, " there": 25, ".": 45, " Yes": 50, " sir": 150, " Go": 250,
                                   " home": 400, " now": 475}, 495)
    engine = _word_engine(model)
    window = _word_window(model, N_FRAMES)
    job = window.job
    ts = t.timestamp_begin
    tokens = [ts, *t.encode(texts[0]), ts + 100, ts + 100, *t.encode(texts[1]), ts + 200, ts + 250,
              *t.encode(texts[2]), ts + 500]
    engine._finish(_Active(window, 224, tokens), deque())
    assert [s.text for s in job.segments] == texts
    assert _same(job.words, [("Hi", 0.2, 0.5), ("there.", 0.5, 0.9), ("Yes", 1.6, 3.0),
                             ("sir", 3.0, 4.0), ("Go", 6.7, 8.1), ("home", 8.1, 9.5),
                             ("now", 9.5, 9.9)])
    assert [x for s in job.segments for x in (s.start, s.end)] == pytest.approx([0.2, 0.9, 1.6, 4.0, 6.7, 9.9])
    assert job.last_speech_timestamp == pytest.approx(9.9)
    assert job.seek == N_FRAMES and job.finished


def test_a_window_not_ending_on_a_single_timestamp_moves_seek_to_its_last_word_s_end(
        model: WhisperModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """transcribe.py:413-416: with word_timestamps, where the window did not end on a single timestamp,
    seek = round(get_end(current_segments) * FRAMES_PER_SECOND) when that is past the window's start.
    <|0.00|> Hi there.<|2.00|><|2.00|> Yes sir<|4.00|><|5.00|> Go home: the tokens after the last pair are
    unfinished (seek back to <|4.00|>, 400 frames, transcribe.py:372-377); the words are aligned at Hi
    0.2-0.5, there 0.5-0.9, . 0.9-1.0, Yes 1.0-3.0, sir 3.0-3.5. Median 0.4, maximum 0.8: Yes follows a
    sentence end and starts at 3.0 - 0.8 = 2.2; sir's segment ends at sir's end, 3.5, which is get_end:
    seek goes to 350 frames, and the next window starts there."""
    t = tiny_tokenizer()
    texts = [" Hi there.", " Yes sir"]
    _fix_path(monkeypatch, texts, {" Hi": 10, " there": 25, ".": 45, " Yes": 50, " sir": 150}, 175)
    engine = _word_engine(model)
    window = _word_window(model, 2 * N_FRAMES)
    job = window.job
    ts = t.timestamp_begin
    tokens = [ts, *t.encode(texts[0]), ts + 100, ts + 100, *t.encode(texts[1]), ts + 200, ts + 250,
              *t.encode(" Go home")]
    waiting: "deque[_Window]" = deque()
    engine._finish(_Active(window, 224, tokens), waiting)
    assert [(s.text, s.start, s.end) for s in job.segments] == [(" Hi there.", 0.2, 0.9), (" Yes sir", 2.2, 3.5)]
    assert _same(job.words, [("Hi", 0.2, 0.5), ("there.", 0.5, 0.9), ("Yes", 2.2, 3.0), ("sir", 3.0, 3.5)])
    assert job.seek == 350 and [w.seek for w in waiting] == [350]


def test_seek_stays_at_the_timestamps_where_the_last_word_ends_at_the_window_s_start(
        model: WhisperModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """transcribe.py:415: seek moves to the last word's end only where that is after time_offset (the
    window's start), so a window always moves on. A window at 3.5 s whose words all lie at its first frame
    (ending at 3.5 s): seek goes back to the last timestamp pair, <|1.00|>, as without word timestamps."""
    t = tiny_tokenizer()
    texts = [" Hi", " there"]
    _fix_path(monkeypatch, texts, {" Hi": 0, " there": 0}, 0)
    engine = _word_engine(model)
    window = _word_window(model, 2 * N_FRAMES, seek=350)
    job = window.job
    ts = t.timestamp_begin
    tokens = [ts, *t.encode(texts[0]), ts + 50, ts + 50, *t.encode(texts[1]), ts + 100, ts + 100,
              *t.encode(" Go")]
    engine._finish(_Active(window, 224, tokens), deque())
    assert job.last_speech_timestamp == pytest.approx(3.5)  # get_end: the last word's end
    assert job.seek == 350 + 200


def test_a_segment_whose_words_give_it_no_duration_is_cleared(model: WhisperModel,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """transcribe.py:484-489 and 491-501: after the word adjustments, a segment whose start equals its end
    gets no text, tokens or words, so its text is in no result and its tokens in no later prompt (all_tokens
    takes the segments' tokens). <|0.00|> Hi there.<|2.00|><|2.00|> Yes<|3.00|><|3.00|> Go home<|5.00|>,
    Yes and Go aligned at 3.0 (Yes of no duration), home 4.0-4.8: Yes's segment starts and ends at 3.0 and
    is cleared. Its end was the last speech the next segment's pause is measured from (timing.py:386),
    before it was cleared; the next window's prompt is the other two segments' tokens."""
    t = tiny_tokenizer()
    texts = [" Hi there.", " Yes", " Go home"]
    _fix_path(monkeypatch, texts, {" Hi": 10, " there": 25, ".": 45, " Yes": 150, " Go": 150, " home": 200}, 240)
    engine = _word_engine(model)
    window = _word_window(model, 2 * N_FRAMES)
    job = window.job
    ts = t.timestamp_begin
    first, second, third = ([ts, *t.encode(texts[0]), ts + 100], [ts + 100, *t.encode(texts[1]), ts + 150],
                            [ts + 150, *t.encode(texts[2]), ts + 250])
    waiting: "deque[_Window]" = deque()
    engine._finish(_Active(window, 224, [*first, *second, *third]), waiting)
    assert [(s.text, s.start, s.end) for s in job.segments] == [(" Hi there.", 0.2, 0.9), (" Go home", 3.0, 4.8)]
    assert _same(job.words, [("Hi", 0.2, 0.5), ("there.", 0.5, 0.9), ("Go", 3.0, 4.0), ("home", 4.0, 4.8)])
    assert job.all_tokens == [*first, *third]
    assert engine._prompt(waiting[0]) == [t.sot_prev, *first, *third, t.sot, t.language_ids["en"], t.transcribe]
    assert job.seek == N_FRAMES  # a single timestamp at the end
    assert engine.results(DecodeBatch([job]))[0].text == "Hi there. Go home"


def test_a_blank_segment_is_aligned_with_the_others_then_cleared(model: WhisperModel,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """transcribe.py:401-411 and 484-489: a segment of blank text goes to add_word_timestamps with the others
    (the alignment has a row for its space) and only then is cleared, with its words, as one of no duration
    is. <|0.00|> Hi<|1.00|><|1.00|> <|2.00|><|2.00|> Go<|4.00|>, aligned at Hi 0.2-0.6, the space 0.6-1.2,
    Go 1.2-1.8. merge_punctuations (timing.py:245-276) merges the space, whose stripped text "" is in every
    string, into the next word as an opening mark: the blank segment counts its token off "  Go" and takes
    that word (moving to 1.2-1.8), so Go's own segment has no words and keeps its timestamps; the blank
    segment is then cleared with the word. OpenAI's code run on the same words gives the same segments and
    words."""
    t = tiny_tokenizer()
    texts = [" Hi", " ", " Go"]
    _fix_path(monkeypatch, texts, {" Hi": 10, " ": 30, " Go": 60}, 90)
    engine = _word_engine(model)
    window = _word_window(model, 2 * N_FRAMES)
    job = window.job
    ts = t.timestamp_begin
    first, second, third = ([ts, *t.encode(texts[0]), ts + 50], [ts + 50, *t.encode(texts[1]), ts + 100],
                            [ts + 100, *t.encode(texts[2]), ts + 200])
    engine._finish(_Active(window, 224, [*first, *second, *third]), deque())
    assert [(s.text, s.start, s.end) for s in job.segments] == [(" Hi", 0.2, 0.6), (" Go", 2.0, 4.0)]
    assert _same(job.words, [("Hi", 0.2, 0.6)])
    assert job.all_tokens == [*first, *third]
    assert job.last_speech_timestamp == pytest.approx(1.8)  # the cleared segment's word, before it was cleared
