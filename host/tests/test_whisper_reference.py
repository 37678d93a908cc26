"""Whisper engine behaviour checked against OpenAI's reference implementation (openai/whisper, release
20250625: whisper/transcribe.py, decoding.py, timing.py, tokenizer.py). Each test names the reference lines
it follows. Tiny config on the CPU."""
from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np
import pytest
import torch

from voxmux_host.models.whisper.alignment import (WordTiming, dtw, find_alignment, median_filter, merge_punctuations,
                                                  split_words)
from voxmux_host.models.whisper.config import N_FRAMES, TINY
from voxmux_host.models.whisper.decoding import (EngineOptions, RequestOptions, WhisperEngine, _Active, _Job,
                                                 _Window)
from voxmux_host.models.whisper.features import log_mel_spectrogram
from voxmux_host.models.whisper.model import WhisperModel, build_model
from voxmux_host.models.whisper.tokenizer import (LANGUAGES, WhisperTokenizer, bytes_to_unicode, special_tokens,
                                                  synthetic_tokenizer, tiny_tokenizer)


@pytest.fixture(scope="module")
def model() -> Iterator[WhisperModel]:
    torch.set_num_threads(2)
    yield build_model(TINY, seed=5).double()


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


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


# ------------------------------------------------------------------------------ logit rules


@pytest.mark.parametrize("symbol", ["(", "[", '"', "#"])
def test_non_speech_symbols_are_suppressed(model: WhisperModel, symbol: str) -> None:
    """decoding.py:106 (suppress_tokens "-1" by default), 617-623 (-1: tokenizer.non_speech_tokens) and
    tokenizer.py:242-272: symbols such as ( [ " # that are one token are never sampled. Here the model's
    logits favour the symbol in the middle of a text; the reference would pick the next best token."""
    t = tiny_tokenizer()
    engine = _engine(model, slots=1, batch_sizes=(1,))
    [symbol_id] = t.encode(symbol)
    the = t.encode(" the")[0]
    st = engine.state
    st.timestamps[0], st.sampled[0], st.budget[0], st.last[0], st.penult[0] = False, 3, 100, the, the
    logits = torch.zeros(1, TINY.n_vocab, dtype=torch.float64)
    logits[0, symbol_id] = 20.0
    logits[0, the] = 10.0
    token, _ = engine._select(logits, 1)
    assert int(token) == the, f"sampled {t.decode([int(token)])!r}"


def test_a_window_after_a_long_prompt_samples_up_to_the_text_context(model: WhisperModel) -> None:
    """decoding.py:526-538 (_get_initial_tokens: <|startofprev|> and the prompt's last n_ctx // 2 - 1 = 223
    tokens before the start-of-transcript sequence) and 665-686 (_main_loop: sample_len = 224 steps, stopping
    after the one whose token makes the sequence longer than n_ctx = 448): after 227 prompt tokens, up to 449
    - 227 = 222 tokens are sampled, the last one from position 447."""
    t = tiny_tokenizer()
    engine = _engine(model, slots=1, batch_sizes=(1,))
    prompt = " ".join(["the cat sat on the mat"] * 60)
    assert len(t.encode(" " + prompt)) > 223
    engine.submit([torch.zeros(16000)], [RequestOptions(language="en", prompt=prompt)])
    engine.tick()
    active = engine._slots[0]
    assert active is not None and len(engine._prompt(active.window)) == 227
    assert active.budget == 222


# ------------------------------------------------------------------------------ English-only models


def _english_only_tokenizer() -> WhisperTokenizer:
    """OpenAI's "gpt2" encoding layout for the .en models: 50256 base tokens, <|endoftext|> 50256, 99
    languages (tokenizer.py:331-357): 51864 tokens."""
    byte_encoder = bytes_to_unicode()
    vocab = {byte_encoder[b]: b for b in range(256)}
    for i in range(256, 50256):
        vocab[f"w{i}"] = i
    return WhisperTokenizer.from_vocab(vocab, [], special_tokens(50256, LANGUAGES[:99]))


def test_an_english_only_model_is_prompted_with_startoftranscript_alone() -> None:
    """tokenizer.py:382-389 (get_tokenizer: an English-only model's tokenizer has language and task None)
    and 152-159 (so sot_sequence is just <|startoftranscript|>): the .en checkpoints (n_vocab 51864) were
    trained without <|en|><|transcribe|> after <|startoftranscript|>."""
    t = _english_only_tokenizer()
    model = build_model(dataclasses.replace(TINY, n_vocab=51864), seed=1)
    assert not model.is_multilingual
    engine = WhisperEngine(model, t, torch.device("cpu"), torch.float32, EngineOptions(slots=1, batch_sizes=(1,)))
    batch = engine.submit([torch.zeros(16000), torch.zeros(16000)],
                          [RequestOptions(), RequestOptions(timestamps=False)])
    with_ts, without_ts = batch.jobs
    assert engine._prompt(_Window(with_ts, 0, 100, 0.0)) == [t.sot]
    assert engine._prompt(_Window(without_ts, 0, 100, 0.0)) == [t.sot, t.no_timestamps]


def test_an_english_only_models_no_speech_probability_is_read_at_startoftranscript() -> None:
    """decoding.py:672-676: the no-speech probability is the softmax of the first forward pass's logits at
    <|startoftranscript|>, which for an English-only model is the whole initial sequence."""
    t = _english_only_tokenizer()
    model = build_model(dataclasses.replace(TINY, n_vocab=51864), seed=1).double()
    engine = WhisperEngine(model, t, torch.device("cpu"), torch.float64,
                           EngineOptions(slots=1, batch_sizes=(1,), no_speech_threshold=None))
    audio = torch.randn(16000, generator=torch.Generator().manual_seed(2)) * 0.1
    engine.submit([audio], [RequestOptions()])
    engine.tick()
    active = engine._slots[0]
    assert active is not None and engine._prompt(active.window) == [t.sot]
    mel = log_mel_spectrogram(audio, 80)[:, :100]
    with torch.no_grad():
        xa = model.encoder(torch.nn.functional.pad(mel, (0, N_FRAMES - 100))[None].double())
        logits = model.decoder.forward_full(torch.tensor([[t.sot]]), xa)[0, 0]
    assert active.no_speech_prob == pytest.approx(float(logits.softmax(dim=-1)[t.no_speech]), rel=1e-9)


def test_the_synthetic_tokenizer_of_an_english_only_vocabulary_has_openais_layout() -> None:
    """tokenizer.py:331-357 and model.py:303-308 (num_languages = n_vocab - 51765 - multilingual): a
    51864-token vocabulary (the .en models) has 99 languages and <|endoftext|> at 50256, its timestamps
    from 50363."""
    t = synthetic_tokenizer(51864)
    assert (len(t.languages), t.eot, t.sot, t.no_timestamps, t.timestamp_begin) == (99, 50256, 50257, 50362, 50363)


# ------------------------------------------------------------------------------ word timestamps


def _openai_find_alignment(model: WhisperModel, t: WhisperTokenizer, sot_sequence: List[int],
                           text_tokens: List[int], xa: torch.Tensor, num_frames: int) -> List[Tuple[str, float, float]]:
    """timing.py:162-237 (find_alignment) with the heads of the decoder's second half (model.py's default
    alignment heads) and medfilt_width 7: the QKs cut to num_frames // 2 *before* their softmax
    (timing.py:208-209), the rows from len(sot_sequence) (the <|notimestamps|> row, which predicts the first
    text token) to the one before <|endoftext|> (timing.py:215), words split with <|endoftext|> as the last
    (timing.py:218), so the last word ends where the end-of-text row starts (timing.py:231)."""
    tokens = torch.tensor([*sot_sequence, t.no_timestamps, *text_tokens, t.eot])
    decoder = model.decoder
    length = tokens.shape[0]
    x = (decoder.token_embedding(tokens[None]) + decoder.positional_embedding[:length]).to(xa.dtype)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    qks = []
    with torch.no_grad():
        for index, block in enumerate(decoder.blocks):
            x = x + block.attn(block.attn_ln(x), mask=causal)
            cross = block.cross_attn
            h = block.cross_attn_ln(x)
            q, k, v = cross.heads(cross.query(h)), cross.heads(cross.key(xa[None])), cross.heads(cross.value(xa[None]))
            qk = (q @ k.transpose(-1, -2)).float() * (q.shape[-1] ** -0.5)
            if index >= len(decoder.blocks) // 2:
                qks.append(qk[0])
            x = x + cross.merge(qk.softmax(dim=-1).to(v.dtype) @ v)
            x = x + block.mlp(block.mlp_ln(x))
    weights = torch.cat(qks)[:, :, : num_frames // 2].softmax(dim=-1)
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    weights = median_filter((weights - mean) / std, 7)
    matrix = weights.mean(dim=0)[len(sot_sequence):-1]
    text_indices, time_indices = dtw(-matrix.double().numpy())
    words: List[List[int]] = []
    for token in text_tokens:
        if not words or t.decode([token]).startswith(" "):
            words.append([token])
        else:
            words[-1].append(token)
    words.append([t.eot])
    boundaries = np.pad(np.cumsum([len(w) for w in words[:-1]]), (1, 0))
    jumps = np.pad(np.diff(text_indices), (1, 0), constant_values=1).astype(bool)
    jump_times = time_indices[jumps] / 50
    return [(t.decode(w).strip(), round(float(s), 3), round(float(e), 3))
            for w, s, e in zip(words[:-1], jump_times[boundaries[:-1]], jump_times[boundaries[1:]])]


def test_word_times_follow_openais_find_alignment(model: WhisperModel) -> None:
    t = tiny_tokenizer()
    generator = torch.Generator().manual_seed(3)
    audio = torch.randn(4 * 16000, generator=generator) * 0.1
    frames = 400
    mel = torch.nn.functional.pad(log_mel_spectrogram(audio, 80)[:, :frames], (0, N_FRAMES - frames))
    with torch.no_grad():
        xa = model.encoder(mel[None].double())[0]
    prefix = t.sot_sequence("en", "transcribe")
    text = t.encode(" the quick brown fox jumps over the lazy dog")
    expected = _openai_find_alignment(model, t, prefix, text, xa, frames)
    got = find_alignment(model, t, prefix, text, xa, frames, "en")
    assert [(w.text.strip(), round(w.start, 3), round(w.end, 3)) for w in got] == expected
    assert [token for w in got for token in w.tokens] == text


def test_words_are_split_at_punctuation_and_punctuation_is_merged_as_transcribe_does() -> None:
    """tokenizer.py:285-315 (split_tokens_on_spaces: a piece that is punctuation starts a word) and
    timing.py:240-273 with transcribe()'s defaults (merge_punctuations: a closing mark joins the word before
    it, which keeps its times; an opening mark after a space joins the word after it; their tokens go with
    them)."""
    t = tiny_tokenizer()
    tokens = t.encode(" hello, the cat.")
    words = split_words(t, tokens, "en")
    assert [t.decode(w) for w in words] == [" hello", ",", " the", " cat", "."]
    timed = [WordTiming(" hello", 0.0, 0.4, [1]), WordTiming(",", 0.4, 0.5, [2]), WordTiming(" -", 0.5, 0.6, [3]),
             WordTiming(" the", 0.6, 0.8, [4]), WordTiming(" cat", 0.8, 1.0, [5]), WordTiming(".", 1.0, 1.1, [6])]
    merge_punctuations(timed)
    assert [(w.text, w.start, w.end, w.tokens) for w in timed] == [
        (" hello,", 0.0, 0.4, [1, 2]), ("", 0.4, 0.5, []), ("", 0.5, 0.6, []), (" - the", 0.6, 0.8, [3, 4]),
        (" cat.", 0.8, 1.0, [5, 6]), ("", 1.0, 1.1, [])]


def test_dtw_breaks_ties_and_rounds_sums_as_openais_dtw_cpu() -> None:
    """timing.py:75-103 (dtw_cpu): float32 sums; the diagonal or up only where strictly cheapest, else
    left. Both matrices below tie there ([[1, 1e-9], [2e-9, 0]] only in float32)."""
    for cost in (np.zeros((2, 2)), np.array([[1.0, 1e-9], [2e-9, 0.0]])):
        rows, cols = dtw(cost)
        assert (rows.tolist(), cols.tolist()) == ([0, 1, 1], [0, 0, 1])


# ------------------------------------------------------------------------------ joins


def test_a_join_waits_no_longer_than_join_max_wait_for_the_oldest_window(model: WhisperModel) -> None:
    """EngineOptions.join_max_wait_s: waiting windows join "unless the oldest of them has waited this long".
    A window that ends puts its request's next window at the *front* of the queue (_finish: appendleft),
    stamped now: the wait measured is that of the oldest window, wherever it is in the queue."""
    t = tiny_tokenizer()
    clock = _Clock()
    engine = _engine(model, clock=clock, join_min_windows=4, join_max_wait_s=1.0)
    other = _Job(1, RequestOptions(language="en"), torch.zeros(1), 500, "en")
    engine._waiting.append(engine._window(other, 0.0))  # waits from t = 0
    clock.now = 9.9
    job = _Job(0, RequestOptions(language="en"), torch.zeros(1), 2 * N_FRAMES, "en")
    ts = t.timestamp_begin
    window = _Window(job, 0, N_FRAMES, 0.0)
    engine._finish(_Active(window, 224, [ts, *t.encode(" the cat"), ts + 50, ts + 50]), engine._waiting)
    assert len(engine._waiting) == 2  # the request's next window, then the one waiting since t = 0
    engine._slots[0] = _Active(_Window(job, 0, N_FRAMES, 0.0), 224)  # one slot still decodes
    clock.now = 10.0
    assert engine._may_join(3, 1), "the oldest window has waited 10 s, join_max_wait_s is 1 s"


# ------------------------------------------------------------------------------ language detection


def test_the_language_is_detected_on_the_first_30_s_of_the_padded_spectrogram() -> None:
    """transcribe.py:139-155: the language is detected on pad_or_trim(mel, N_FRAMES), the first 3000 frames of
    the spectrogram of the audio followed by 30 s of zeros (the padding's log-mel, at the floor 8 below the
    maximum), as test_whisper_decoding's test_language_is_detected_from_the_first_step computes it, not on
    the clip's decode window, whose frames past a short clip's end are 0.0 (_mels). A model whose <|de|>
    token row points between the two <|startoftranscript|> states tells them apart: the reference input
    gives de (logit +3.2, every other language 0), the decode window en."""
    t = tiny_tokenizer()
    model = build_model(TINY, seed=5).double()
    audio = torch.randn(3 * 16000, generator=torch.Generator().manual_seed(9)) * 0.1
    mel = log_mel_spectrogram(audio, 80)
    frames = mel.shape[-1] - N_FRAMES  # 300

    def state_at_sot(window: torch.Tensor) -> torch.Tensor:
        decoder = model.decoder
        with torch.no_grad():
            xa = model.encoder(window[None].double())
            x = (decoder.token_embedding(torch.tensor([[t.sot]])) + decoder.positional_embedding[:1]).double()
            for block in decoder.blocks:
                x = block(x, xa, mask=None)
            state: torch.Tensor = decoder.ln(x)[0, 0]
            return state

    reference = state_at_sot(mel[:, :N_FRAMES])
    engine_input = state_at_sot(torch.nn.functional.pad(mel[:, :frames], (0, N_FRAMES - frames)))
    row = reference - float(reference @ engine_input) / float(engine_input @ engine_input) * engine_input
    row = row - 0.5 * float(row @ reference) / float(engine_input @ reference) * engine_input
    with torch.no_grad():
        for code in t.languages:
            model.decoder.token_embedding.weight[t.language_ids[code]] = 0.0
        model.decoder.token_embedding.weight[t.language_ids["de"]] = 100.0 * row
    ids = torch.tensor([t.language_ids[c] for c in t.languages])
    with torch.no_grad():
        xa = model.encoder(mel[None, :, :N_FRAMES].double())
        logits = model.decoder.forward_full(torch.tensor([[t.sot]]), xa)[0, 0]
    expected = t.languages[int(logits[ids].argmax())]
    assert expected == "de"
    engine = WhisperEngine(model, t, torch.device("cpu"), torch.float64,
                           EngineOptions(slots=1, batch_sizes=(1,), max_tokens_per_audio_second=2.0,
                                         temperature_increment=0.0, no_speech_threshold=None))
    assert engine.transcribe([audio], [RequestOptions()])[0].language == expected
    assert engine.counters.encoder_windows == 2  # the decode window and the detection input, in one call
    assert engine.counters.encoder_calls == 1
    # detect_on_window: the decode window alone, which this model reads as en.
    on_window = WhisperEngine(model, t, torch.device("cpu"), torch.float64,
                              EngineOptions(slots=1, batch_sizes=(1,), max_tokens_per_audio_second=2.0,
                                            temperature_increment=0.0, no_speech_threshold=None,
                                            detect_on_window=True))
    assert on_window.transcribe([audio], [RequestOptions()])[0].language == "en"
    assert on_window.counters.encoder_windows == 1
    # Given the language, both read the same one window.
    given = engine.transcribe([audio], [RequestOptions(language="en")])[0]
    assert engine.counters.encoder_windows == 3
    assert on_window.transcribe([audio], [RequestOptions(language="en")])[0] == given


def test_words_of_languages_without_spaces_are_split_at_each_character(model: WhisperModel) -> None:
    """tokenizer.py:277-283 (split_to_word_tokens): for zh, ja, th, lo, my and yue the words are split
    wherever the tokens decode to whole code points (split_tokens_on_unicode), not at spaces: the word
    timestamps of 你好世界 are four words, not one."""
    t = tiny_tokenizer()
    engine = _engine(model, slots=1, batch_sizes=(1,))
    mel = torch.zeros(80, 2 * N_FRAMES, dtype=torch.float64)
    job = _Job(0, RequestOptions(language="zh", word_timestamps=True), mel, 400, "zh")
    window = _Window(job, 0, 400, 0.0)
    with torch.no_grad():
        window.features = model.encoder(mel[None, :, :N_FRAMES])[0]
    ts = t.timestamp_begin
    engine._finish(_Active(window, 224, [ts, *t.encode("你好世界"), ts + 100]), deque())
    assert [s.text for s in job.segments] == ["你好世界"]
    assert [w for w, _, _ in job.words] == ["你", "好", "世", "界"]
