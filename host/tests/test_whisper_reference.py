"""Whisper engine behaviour checked against OpenAI's reference implementation (openai/whisper, release
20250625: whisper/transcribe.py, decoding.py, timing.py, tokenizer.py). Each test names the reference lines
it follows. Tiny config on the CPU."""
from __future__ import annotations

from collections import deque
from typing import Any, Dict, Iterator, List

import pytest
import torch

from voxmux_host.models.whisper.config import N_FRAMES, TINY
from voxmux_host.models.whisper.decoding import EngineOptions, RequestOptions, WhisperEngine, _Active, _Job, _Window
from voxmux_host.models.whisper.model import WhisperModel, build_model
from voxmux_host.models.whisper.tokenizer import tiny_tokenizer


@pytest.fixture(scope="module")
def model() -> Iterator[WhisperModel]:
    torch.set_num_threads(2)
    yield build_model(TINY, seed=5).double()


def _engine(model: WhisperModel, clock: Any = None, **options: Any) -> WhisperEngine:
    merged: Dict[str, Any] = {"slots": 4, "batch_sizes": (1, 2, 4), "temperature_increment": 0.0,
                              "no_speech_threshold": None, **options}
    extra = {} if clock is None else {"clock": clock}
    return WhisperEngine(model, tiny_tokenizer(), torch.device("cpu"), torch.float64, EngineOptions(**merged), **extra)


def _finished(engine: WhisperEngine, job: _Job, tokens: List[int], temperature: float = 0.0,
              avg_logprob: float = -0.1, no_speech_prob: float = 0.0) -> "deque[_Window]":
    """Ends a window of ``job`` at its seek that decoded ``tokens`` (then end-of-text) as _read_step does."""
    window = _Window(job, job.seek, min(N_FRAMES, job.content_frames - job.seek), temperature)
    active = _Active(window, 224, list(tokens), sum_logprob=avg_logprob * (len(tokens) + 1),
                     no_speech_prob=no_speech_prob)
    waiting: "deque[_Window]" = deque()
    engine._finish(active, waiting)
    return waiting


# ------------------------------------------------------------------------------ previous-text prompt


def test_the_next_windows_prompt_leaves_out_the_unfinished_last_segment(model: WhisperModel) -> None:
    """transcribe.py:351-378 and 499-503: where a window does not end on a single timestamp, its tokens after
    the last timestamp pair are an unfinished segment: seek goes back to that pair and the next window decodes
    that speech again, so only the finished segments' tokens join all_tokens (the next window's prompt)."""
    t = tiny_tokenizer()
    engine = _engine(model)
    job = _Job(0, RequestOptions(language="en"), torch.zeros(1), 2 * N_FRAMES, "en")
    ts = t.timestamp_begin
    finished = [ts, *t.encode(" the cat"), ts + 50]
    unfinished = [ts + 75, *t.encode(" sat")]
    waiting = _finished(engine, job, [*finished, *unfinished])
    assert job.seek == 100  # back to <|1.00|>: " sat" is decoded again by the next window
    assert [(s.start, s.end, s.text) for s in job.segments] == [(0.0, 1.0, " the cat")]
    prompt = engine._prompt(waiting[0])
    # Reference: all_tokens holds the finished segment only; the next prompt is <|startofprev|> + its tokens.
    assert prompt == [t.sot_prev, *finished, t.sot, t.language_ids["en"], t.transcribe]


# ------------------------------------------------------------------------------ no-speech and fallback


def test_a_window_is_skipped_on_its_no_speech_probability_when_there_is_no_logprob_threshold(
        model: WhisperModel) -> None:
    """transcribe.py:298-310: should_skip = no_speech_prob > no_speech_threshold, cancelled only where
    logprob_threshold is set and avg_logprob is above it. With logprob_threshold None (the adapter's
    logprobThreshold: null) a window with no_speech_prob 0.95 > 0.6 is skipped: no segment, seek moves on."""
    t = tiny_tokenizer()
    engine = _engine(model, logprob_threshold=None, no_speech_threshold=0.6)
    job = _Job(0, RequestOptions(language="en"), torch.zeros(1), 2 * N_FRAMES, "en")
    ts = t.timestamp_begin
    _finished(engine, job, [ts, *t.encode(" the cat"), ts + 50], no_speech_prob=0.95)
    assert job.seek == N_FRAMES
    assert [(s.start, s.end, s.text) for s in job.segments] == []


def test_a_silent_window_decoded_hot_keeps_the_previous_text_prompt(model: WhisperModel) -> None:
    """transcribe.py:308-310: a skipped (silent) window `continue`s before prompt_reset_since is updated
    (transcribe.py:504-505), so a silent window decoded at temperature 0.6 does not reset the prompt."""
    t = tiny_tokenizer()
    engine = _engine(model, logprob_threshold=-1.0, no_speech_threshold=0.6)
    job = _Job(0, RequestOptions(language="en"), torch.zeros(1), 2 * N_FRAMES, "en")
    job.all_tokens = t.encode(" the cat")  # an earlier window's text
    ts = t.timestamp_begin
    waiting = _finished(engine, job, [ts, *t.encode(" sat"), ts + 50], temperature=0.6, avg_logprob=-2.0,
                        no_speech_prob=0.9)
    assert job.seek == N_FRAMES and job.segments == []  # silent: skipped
    assert job.prompt_reset_since == 0
    assert engine._prompt(waiting[0])[:1 + len(t.encode(" the cat"))] == [t.sot_prev, *t.encode(" the cat")]


def test_without_previous_text_the_initial_prompt_stays_until_a_window_is_kept(model: WhisperModel) -> None:
    """transcribe.py:308-310 and 503-505: with condition_on_previous_text off, prompt_reset_since moves to the
    end of all_tokens after each window that is kept; a skipped window `continue`s before that, so the next
    window is still prompted with the request's prompt."""
    t = tiny_tokenizer()
    engine = _engine(model, condition_on_previous_text=False, logprob_threshold=None, no_speech_threshold=0.6)
    job = _Job(0, RequestOptions(language="en"), torch.zeros(1), 3 * N_FRAMES, "en")
    job.all_tokens = t.encode(" the cat")  # the request's prompt
    ts = t.timestamp_begin
    waiting = _finished(engine, job, [ts, *t.encode(" sat"), ts + 50], no_speech_prob=0.9)
    assert job.seek == N_FRAMES and job.segments == []  # skipped
    assert engine._prompt(waiting[0]) == [t.sot_prev, *t.encode(" the cat"), t.sot, t.language_ids["en"],
                                          t.transcribe]
    waiting = _finished(engine, job, [ts, *t.encode(" sat"), ts + 50])
    assert [s.text for s in job.segments] == [" sat"]
    assert engine._prompt(waiting[0]) == [t.sot, t.language_ids["en"], t.transcribe]


def test_the_compression_ratio_is_that_of_the_stripped_text(model: WhisperModel) -> None:
    """decoding.py:757 and 784: the result's text is tokenizer.decode(tokens).strip() and its compression
    ratio is of that text. Here the decoded text with its leading space compresses 2.52 times (> 2.4: a
    fallback), the stripped text 2.39 times (no fallback): the reference keeps this window."""
    t = tiny_tokenizer()
    engine = _engine(model, temperature_increment=0.2, compression_ratio_threshold=2.4, logprob_threshold=None)
    text = "lazy while lazy lazy while lazy lazy while lazy lazy while lazy fox"
    job = _Job(0, RequestOptions(language="en", timestamps=False), torch.zeros(1), 500, "en")
    waiting = _finished(engine, job, t.encode(" " + text))
    assert engine.counters.fallbacks == 0 and not waiting
    assert [s.text for s in job.segments] == [" " + text]
