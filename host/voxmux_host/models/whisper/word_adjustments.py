"""A window's word timestamps after the alignment, as OpenAI's ``timing.add_word_timestamps`` makes them from
``find_alignment``'s words (alignment.py): the median of the words' nonzero durations, at most 0.7 s, and
twice that as the longest a word may be; long words at sentence ends cut to that length (before punctuation
is merged); then, segment by segment, the words counted off by their tokens, their times offset by the
window's start and rounded to 10 ms; the first word after a pause (and the second, where the two are long)
cut to that length; the segment moved to its words' start and end, unless its first word starts more than
0.5 s before the segment (the word then starts near the segment's start) or its last word ends more than
0.5 s after it (the word then ends near the segment's end). A segment's end is the last speech that the
next segment's pause is measured from; :func:`speech_end` (OpenAI's ``get_end``) carries it to the next
window, and :func:`get_end` is where a window that did not end on a single timestamp moves the next one
(decoding.py)."""
from __future__ import annotations

from typing import List, Optional, Protocol, Sequence, Tuple

import numpy as np

from .alignment import WordTiming, merge_punctuations

#: OpenAI's ``sentence_end_marks``: words that are (part of) this string end a sentence.
SENTENCE_END_MARKS = ".。!！?？"
#: The longest a median word duration counts for, in seconds.
MAX_MEDIAN_DURATION = 0.7


class TimedSegment(Protocol):
    """A decoded segment: its bounds in seconds from the audio's start, and its tokens (timestamps
    included)."""

    start: float
    end: float
    tokens: List[int]


def duration_limits(alignment: Sequence[WordTiming]) -> Tuple[float, float]:
    """The median of the words' nonzero durations, at most 0.7 s (0 without any), and twice that: the
    longest a word may be (``add_word_timestamps``)."""
    durations = np.array([w.end - w.start for w in alignment])
    durations = durations[durations.nonzero()]
    median = float(np.median(durations)) if len(durations) > 0 else 0.0
    median = min(MAX_MEDIAN_DURATION, median)
    return median, median * 2


def truncate_at_sentence_ends(alignment: List[WordTiming], max_duration: float) -> None:
    """``add_word_timestamps``'s cut of long words at sentence boundaries, in place: from the second word on,
    a word longer than ``max_duration`` that is a sentence-end mark ends ``max_duration`` after its start;
    one right after such a mark starts ``max_duration`` before its end."""
    for i in range(1, len(alignment)):
        word = alignment[i]
        if word.end - word.start > max_duration:
            if word.text in SENTENCE_END_MARKS:
                word.end = word.start + max_duration
            elif alignment[i - 1].text in SENTENCE_END_MARKS:
                word.start = word.end - max_duration


def adjust_segment(segment: TimedSegment, words: List[WordTiming], median_duration: float, max_duration: float,
                   last_speech: float) -> float:
    """``add_word_timestamps``'s adjustments of one segment and its words (times from the audio's start), in
    place; returns the last speech for the next segment: the segment's end, or ``last_speech`` where the
    segment has no words.

    After a pause (the first word ends more than 4 median durations after ``last_speech``) where the first
    word is longer than ``max_duration`` or the first two span more than twice that, the first word starts
    ``max_duration`` before its end; a second word longer than ``max_duration`` first moves their common
    boundary to max(its end / 2, its end - ``max_duration``). Then the segment starts at its first word's
    start, unless that is more than 0.5 s before the segment's start and the segment starts before the word
    ends: the word then starts at max(0, min(its end - the median, the segment's start)). Likewise the
    segment ends at its last word's end, unless that is more than 0.5 s after the segment's end and the
    segment ends after the word starts: the word then ends at max(its start + the median, the segment's
    end)."""
    if not words:
        return last_speech
    first = words[0]
    if first.end - last_speech > median_duration * 4 and (
            first.end - first.start > max_duration
            or (len(words) > 1 and words[1].end - first.start > max_duration * 2)):
        if len(words) > 1 and words[1].end - words[1].start > max_duration:
            boundary = max(words[1].end / 2, words[1].end - max_duration)
            first.end = words[1].start = boundary
        first.start = max(0, first.end - max_duration)
    if segment.start < first.end and segment.start - 0.5 > first.start:
        first.start = max(0, min(first.end - median_duration, segment.start))
    else:
        segment.start = first.start
    last = words[-1]
    if segment.end > last.start and segment.end + 0.5 < last.end:
        last.end = max(last.start + median_duration, segment.end)
    else:
        segment.end = last.end
    return segment.end


def add_word_timestamps(segments: Sequence[TimedSegment], alignment: List[WordTiming], time_offset: float,
                        last_speech: float, eot: int) -> List[List[WordTiming]]:
    """OpenAI's ``add_word_timestamps`` for a window's segments (from its ``time_offset``, seconds) and the
    words :func:`~.alignment.find_alignment` gave for their text tokens (those below ``eot``), with
    transcribe()'s punctuation and ``last_speech`` (``last_speech_timestamp``): each segment's words, their
    times from the audio's start, words merged away left out; the segments' bounds are moved in place.
    ``alignment`` is changed too (cut, merged)."""
    if not segments:
        return []
    median_duration, max_duration = duration_limits(alignment)
    truncate_at_sentence_ends(alignment, max_duration)
    merge_punctuations(alignment)
    per_segment: List[List[WordTiming]] = []
    index = 0
    for segment in segments:
        text_tokens = sum(1 for token in segment.tokens if token < eot)
        counted = 0
        words: List[WordTiming] = []
        while index < len(alignment) and counted < text_tokens:
            timing = alignment[index]
            if timing.text:
                words.append(WordTiming(timing.text, round(time_offset + timing.start, 2),
                                        round(time_offset + timing.end, 2), list(timing.tokens)))
            counted += len(timing.tokens)
            index += 1
        last_speech = adjust_segment(segment, words, median_duration, max_duration, last_speech)
        per_segment.append(words)
    return per_segment


def get_end(segments: Sequence[TimedSegment], words: Sequence[Sequence[WordTiming]]) -> Optional[float]:
    """OpenAI's ``utils.get_end`` of a window's segments and their words (``words[i]`` the words of
    ``segments[i]``): the end of the last word, else of the last segment; None without segments."""
    return next((w.end for s in reversed(words) for w in reversed(s)), segments[-1].end if segments else None)


def speech_end(segments: Sequence[TimedSegment], words: Sequence[Sequence[WordTiming]],
               previous: float) -> float:
    """The last speech after a window (:func:`get_end`, as transcribe() keeps ``last_speech_timestamp``):
    the end of the window's last word, else of its last segment; ``previous`` where it has no segments."""
    end = get_end(segments, words)
    return previous if end is None else end
