"""Whisper decoding on the CPU (tiny config): batched equals one by one, the cached decode equals a greedy
decode by full recompute, timestamps to segments, budgets, language detection, fallback, and the adapter
(options, per-request failures, both checkpoint layouts giving the same transcripts)."""
from __future__ import annotations

import contextlib
import math
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import pytest
import torch

from voxmux_host import attention_kernels
from voxmux_host.errors import InstanceError
from voxmux_host.model_api import BatchInput, ItemFailure, LoadContext, Transcript
from voxmux_host.models.whisper.adapter import WhisperAdapter
from voxmux_host.models.whisper.checkpoints import save_hf_directory, save_openai_checkpoint
from voxmux_host.models.whisper.config import N_FRAMES, TINY
from voxmux_host.models.whisper.decoding import (PREFILL_LENGTHS, EngineOptions, RequestOptions, WhisperEngine, _Job,
                                                 _Window, compression_ratio)
from voxmux_host.models.whisper import decoding
from voxmux_host.models.whisper.features import log_mel_spectrogram
from voxmux_host.models.whisper.model import COMPILED_MIN_WINDOWS, WhisperModel, build_model
from voxmux_host.models.whisper.service import DecodeService
from voxmux_host.models.whisper.tokenizer import special_tokens, tiny_tokenizer, tiny_vocabulary, write_tokenizer_files

NO_FALLBACK = dict(temperature_increment=0.0, no_speech_threshold=None)


@pytest.fixture(scope="module")
def model() -> Iterator[WhisperModel]:
    torch.set_num_threads(2)
    yield build_model(TINY, seed=5).double()


def _engine(model: WhisperModel, **options: Any) -> WhisperEngine:
    merged: Dict[str, Any] = {"slots": 4, "batch_sizes": (1, 2, 4), "max_tokens_per_audio_second": 2.0,
                              **NO_FALLBACK, **options}
    return WhisperEngine(model, tiny_tokenizer(), torch.device("cpu"), torch.float64, EngineOptions(**merged))


def _audio(seconds: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(int(seconds * 16000), generator=generator) * 0.1


def _summary(results: List[Any]) -> List[Any]:
    return [(r.text, r.language, r.tokens, [(s.start, s.end, s.text) for s in r.segments]) for r in results]


def test_batched_equals_one_by_one(model: WhisperModel) -> None:
    audios = [_audio(s, i) for i, s in enumerate((4.0, 33.0, 2.0))]
    requests = [RequestOptions(language="en", prompt="the cat"), RequestOptions(language="de"),
                RequestOptions(timestamps=False)]
    engine = _engine(model, slots=2, batch_sizes=(1, 2))
    batched = engine.transcribe(audios, requests)
    assert engine.counters.windows == 4  # the 33 s clip takes two windows
    assert engine.counters.encoder_calls == 3  # two joined together, then one each as slots free
    alone = [_engine(model, slots=1, batch_sizes=(1,)).transcribe([a], [r])[0] for a, r in zip(audios, requests)]
    assert _summary(batched) == _summary(alone)
    assert [r.duration_s for r in batched] == [4.0, 33.0, 2.0]
    for result in batched:
        assert all(0 <= s.start <= s.end <= result.duration_s for s in result.segments)


def _reference_greedy(model: WhisperModel, audio: torch.Tensor, prompt: List[int], budget: int) -> List[int]:
    """Greedy decoding without timestamps by full recompute: every step runs the decoder over the whole
    sequence (no cache), with Whisper's suppression of special tokens, of non-speech symbols and of blank at
    the start."""
    t = tiny_tokenizer()
    mel = log_mel_spectrogram(audio, 80)[:, :N_FRAMES]
    xa = model.encoder(mel[None].double())
    tokens = list(prompt)
    out: List[int] = []
    while True:
        logits = model.decoder.forward_full(torch.tensor([tokens]), xa)[0, -1]
        forbid = torch.zeros_like(logits, dtype=torch.bool)
        forbid[t.eot + 1:] = True  # specials and timestamps
        forbid[t.non_speech_tokens()] = True
        if not out:
            forbid[[*t.space_tokens(), t.eot]] = True
        token = int(logits.masked_fill(forbid, float("-inf")).argmax())
        if len(out) >= budget:
            token = t.eot
        if token == t.eot:
            return out
        out.append(token)
        tokens.append(token)


def test_cached_decode_equals_a_full_recompute(model: WhisperModel) -> None:
    t = tiny_tokenizer()
    audio = _audio(6.0, 11)
    engine = _engine(model, max_tokens_per_audio_second=3.0)
    with torch.no_grad():
        result = engine.transcribe([audio], [RequestOptions(language="es", timestamps=False)])[0]
        expected = _reference_greedy(model, audio, [t.sot, t.language_ids["es"], t.transcribe, t.no_timestamps], 18)
    assert result.tokens == len(expected) == 18
    assert result.text == t.decode(expected).strip()


def test_timestamp_tokens_become_segments(model: WhisperModel) -> None:
    t = tiny_tokenizer()
    engine = _engine(model)
    job = _Job(0, RequestOptions(), torch.zeros(1), 4000, "en", seek=1000)
    window = _Window(job, 1000, N_FRAMES, 0.0)
    ts = t.timestamp_begin
    words = t.encode(" the cat")
    more = t.encode(" sat")
    # <|0.00|> the cat <|1.00|><|1.50|> sat <|2.00|> : two segments, the window ends on a single timestamp
    tokens = [ts, *words, ts + 50, ts + 75, *more, ts + 100]
    segments, advance, single = engine._segments(tokens, window, forced=False)
    assert [(s.start, s.end, s.text) for s in segments] == [(10.0, 11.0, " the cat"), (11.5, 12.0, " sat")]
    assert [(s.seek, s.tokens) for s in segments] == [(1000, [ts, *words, ts + 50]), (1000, [ts + 75, *more, ts + 100])]
    assert advance == N_FRAMES and single  # single timestamp ending: the whole window was read
    # ending on a pair: seek moves to the last timestamp (in mel frames: 2 per timestamp step)
    segments, advance, single = engine._segments([ts, *words, ts + 50, ts + 75, *more, ts + 100, ts + 100],
                                                 window, False)
    assert len(segments) == 2 and advance == 200 and not single
    # no pair: one segment up to the last timestamp
    segments, advance, single = engine._segments([ts, *words, ts + 40], window, False)
    assert [(s.start, s.end) for s in segments] == [(10.0, 10.8)] and advance == N_FRAMES and single
    # ended by the budget after a pair: the rest is a segment to the window's end
    segments, advance, single = engine._segments([ts, *words, ts + 50, ts + 75, *more], window, True)
    assert [(s.start, s.end, s.text) for s in segments] == [(10.0, 11.0, " the cat"), (11.0, 40.0, " sat")]
    assert advance == N_FRAMES and not single
    # a blank segment is kept here: _finish clears it after the word timestamps (transcribe.py:484-489)
    segments, _, _ = engine._segments([ts, *t.encode(" "), ts + 50, ts + 50, *more, ts + 100], window, False)
    assert [(s.start, s.end, s.text) for s in segments] == [(10.0, 11.0, " "), (11.0, 12.0, " sat")]


def test_decoded_windows_keep_the_timestamp_rules_and_the_budget(model: WhisperModel) -> None:
    t = tiny_tokenizer()
    engine = _engine(model, max_tokens_per_audio_second=1.5)
    result = engine.transcribe([_audio(33.0, 3)], [RequestOptions(language="en")])[0]
    assert engine.counters.windows == 2
    assert result.tokens <= math.ceil(1.5 * 30) + math.ceil(1.5 * 3)  # end-of-text forced at the budget
    assert result.segments
    for segment in result.segments:
        stamps = [tok for tok in segment.tokens if tok >= t.timestamp_begin]
        assert stamps == sorted(stamps)  # timestamps never go back
    first = result.segments[0].tokens[0]
    assert t.timestamp_begin <= first <= t.timestamp_begin + 50  # starts with a timestamp within 1 s


def test_language_is_detected_from_the_first_step(model: WhisperModel) -> None:
    t = tiny_tokenizer()
    audio = _audio(3.0, 9)
    engine = _engine(model)
    result = engine.transcribe([audio], [RequestOptions()])[0]
    with torch.no_grad():
        xa = model.encoder(log_mel_spectrogram(audio, 80)[None, :, :N_FRAMES].double())
        logits = model.decoder.forward_full(torch.tensor([[t.sot]]), xa)[0, 0]
    ids = torch.tensor([t.language_ids[c] for c in t.languages])
    assert result.language == t.languages[int(logits[ids].argmax())]


def test_prompt_and_previous_text_condition_the_window(model: WhisperModel) -> None:
    t = tiny_tokenizer()
    engine = _engine(model)
    job = _Job(0, RequestOptions(prompt="the cat"), torch.zeros(1), 100, "en")
    job.all_tokens = t.encode(" the cat")
    prompt = engine._prompt(_Window(job, 0, 100, 0.0))
    assert prompt == [t.sot_prev, *t.encode(" the cat"), t.sot, t.language_ids["en"], t.transcribe]
    translate = _Job(0, RequestOptions(task="translate", timestamps=False), torch.zeros(1), 100, "de")
    assert engine._prompt(_Window(translate, 0, 100, 0.0)) == [t.sot, t.language_ids["de"], t.translate,
                                                               t.no_timestamps]


def test_fallback_retries_hotter_until_one(model: WhisperModel) -> None:
    engine = _engine(model, temperature_increment=0.5, logprob_threshold=0.0)  # every window fails the threshold
    results = engine.transcribe([_audio(3.0, 4)], [RequestOptions(language="en")])
    assert engine.counters.fallbacks == 2 and engine.counters.windows == 3  # 0.0, 0.5, 1.0
    assert all(s.temperature == 1.0 for s in results[0].segments)
    assert compression_ratio("") == 0.0 and compression_ratio("ab" * 100) > 2.4


# ------------------------------------------------------------------------------------------------ adapter


def _pcm(seconds: float, seed: int) -> "npt.NDArray[np.int16]":
    pcm: npt.NDArray[np.int16] = (_audio(seconds, seed).numpy() * 32768).astype(np.int16)
    return pcm


def _adapter(options: Dict[str, Any]) -> WhisperAdapter:
    adapter = WhisperAdapter()
    adapter.load(LoadContext("i0", "whisper-tiny", {"device": "cpu", "maxTokensPerAudioSecond": 2,
                                                    "temperatureIncrement": 0, "batchSizes": [1, 2, 4], **options}))
    adapter.warmup()
    return adapter


def test_adapter_transcribes_and_fails_requests_alone() -> None:
    adapter = _adapter({"config": "tiny", "seed": 5})
    requests = [BatchInput("a", _pcm(2.0, 1), language="en"), BatchInput("b", _pcm(1.0, 2), word_timestamps=True),
                BatchInput("c", _pcm(1.0, 3), language="xx"), BatchInput("d", np.zeros(0, dtype=np.int16)),
                BatchInput("e", _pcm(1.5, 4), prompt="the cat"), BatchInput("f", _pcm(1.0, 5), task="translate"),
                BatchInput("g", _pcm(1.0, 6), temperature=1.5), BatchInput("h", _pcm(1.0, 7), temperature=0.5)]
    outputs = adapter.run_batch(requests)
    assert isinstance(outputs[0], Transcript) and outputs[0].duration_s == 2.0 and outputs[0].language == "en"
    assert outputs[0].words is None and outputs[0].segments is not None
    assert isinstance(outputs[1], Transcript) and outputs[1].words is not None
    assert " ".join(w.word for w in outputs[1].words) == " ".join(outputs[1].text.split())
    assert all(0 <= w.start <= w.end <= outputs[1].duration_s for w in outputs[1].words)
    assert isinstance(outputs[2], ItemFailure) and outputs[2].code == "unsupported_option"
    assert "'xx'" in outputs[2].message
    assert isinstance(outputs[3], ItemFailure) and outputs[3].code == "invalid_audio"
    assert isinstance(outputs[4], Transcript)
    assert isinstance(outputs[5], Transcript) and outputs[5].language == "en"  # a translation's text is English
    assert isinstance(outputs[6], ItemFailure) and outputs[6].code == "unsupported_option"
    assert isinstance(outputs[7], Transcript)
    stats = adapter.stats()
    assert stats.clips == 5 and adapter.probe()  # type: ignore[attr-defined]
    adapter.close()


def test_adapter_segments_say_how_they_were_decoded() -> None:
    """verbose_json's segment fields: the window's start in frames, the tokens, the window's temperature and
    scores, as the engine decoded them."""
    adapter = _adapter({"config": "tiny", "seed": 5, "maxTokensPerAudioSecond": 1})
    [output] = adapter.run_batch([BatchInput("a", _pcm(35.0, 8), language="en", temperature=0.0)])
    assert isinstance(output, Transcript) and output.segments
    decodings = [s.decoding for s in output.segments]
    assert all(d is not None for d in decodings)
    seeks = [d.seek for d in decodings if d is not None]
    assert seeks[0] == 0 and seeks == sorted(seeks) and 0 < seeks[-1] < 3500  # both windows
    engine = adapter._engine
    assert engine is not None
    for segment, d in zip(output.segments, decodings):
        assert d is not None and d.tokens and engine.tokenizer.decode(list(d.tokens)) == segment.text
        assert d.temperature == 0.0 and d.avg_logprob <= 0.0 and d.compression_ratio > 0.0
        assert 0.0 <= d.no_speech_prob <= 1.0
    adapter.close()


@pytest.mark.parametrize("detection, piece, windows", [("reference", False, 2), ("window", False, 1),
                                                      ("reference", True, 1)])
def test_adapter_language_detection_option_sets_the_encoder_inputs_of_a_short_clip(detection: str, piece: bool,
                                                                                   windows: int) -> None:
    """A piece of a longer recording is detected on its own window whatever languageDetection says."""
    adapter = _adapter({"config": "tiny", "seed": 5, "languageDetection": detection})
    [output] = adapter.run_batch([BatchInput("a", _pcm(2.0, 1), piece=piece)])
    assert isinstance(output, Transcript)
    engine = adapter._engine
    assert engine is not None and engine.counters.encoder_windows == windows
    counters = {c.name: c.value for c in adapter.stats().engine_counters()}
    assert (counters["encoderWindows"], counters["clips"], counters["audioSeconds"]) == (windows, 1, 2.0)
    adapter.close()


@pytest.mark.parametrize("options, message", [
    ({"config": "huge"}, "Expected config"), ({"nope": 1}, "Unknown whisper option"),
({"batchSizes": []}, "Expected batchSizes"),
    ({"maxTokensPerAudioSecond": 0}, "maxTokensPerAudioSecond"), ({"temperatureIncrement": 2}, "temperatureIncrement"),
    ({"dtype": "int4"}, "Expected dtype"), ({"device": "tpu"}, "Expected device"),
    ({"checkpointPath": "/nonexistent/whisper"}, "does not exist"),
    ({"joinMinWindows": 0}, "Expected joinMinWindows to be a positive integer"),
    ({"joinMaxWaitMs": 2.5}, "Expected joinMaxWaitMs to be a non-negative integer"),
    ({"overlapEncoder": "yes"}, "Expected overlapEncoder to be true or false"),
    ({"matmul": "int8"}, "Expected matmul to be bf16 or fp8: got 'int8'"),
    ({"matmul": "fp8", "device": "cpu"}, "matmul fp8 needs compileEncoder: true"),
    ({"matmul": "fp8", "device": "cpu", "compileEncoder": False}, "matmul fp8 needs a CUDA device: got device 'cpu'"),
    ({"compileEncoder": 1}, "Expected compileEncoder to be true or false"),
    ({"languageDetection": "fast"}, "Expected languageDetection to be reference or window: got 'fast'"),
    ({"compileRules": "yes"}, "Expected compileRules to be true or false"),
    ({"warmShapes": "yes"}, "Expected warmShapes to be true or false"),
    ({"stepCacheSpans": [0]}, "Expected stepCacheSpans to be a list of integers from 1 to 1023"),
    ({"stepCacheSpans": 128}, "Expected stepCacheSpans to be a list of integers from 1 to 1023"),
    ({"stepCacheSpans": [448]}, "Expected stepCacheSpans below the model's 448 text positions: got 448"),
    ({"compileRules": True, "cudaGraphs": False},
     "compileRules needs cudaGraphs: true" if hasattr(torch, "compile") else "compileRules needs torch >= 2.0"),
    ({"compileRules": True},
     "compileRules needs a CUDA device" if hasattr(torch, "compile") else "compileRules needs torch >= 2.0"),
])
def test_adapter_options_fail_the_load(options: Dict[str, Any], message: str) -> None:
    with pytest.raises(InstanceError, match=message) as info:
        WhisperAdapter().load(LoadContext("i0", "w", {"device": "cpu", "config": "tiny", **options}))
    assert info.value.code == "load_failed"


def test_compiled_rules_need_graphs_on_cuda() -> None:
    with pytest.raises(ValueError, match="Expected compile_rules with use_graphs on a CUDA device"):
        _engine(build_model(TINY, seed=5).double(), compile_rules=True)


def test_both_checkpoint_layouts_give_the_same_transcripts(tmp_path: Path) -> None:
    source = build_model(TINY, seed=8)
    save_openai_checkpoint(source, str(tmp_path / "tiny.pt"))
    save_hf_directory(source, str(tmp_path / "hf"))
    vocab, merges, added = tiny_vocabulary()
    write_tokenizer_files(str(tmp_path / "hf"), vocab, merges, added, layout="tokenizer.json")
    requests = [BatchInput("a", _pcm(3.0, 5), language="en"), BatchInput("b", _pcm(2.0, 6))]
    random = _adapter({"config": "tiny", "seed": 8}).run_batch(requests)
    from_pt = _adapter({"checkpointPath": str(tmp_path / "tiny.pt")}).run_batch(requests)
    from_hf = _adapter({"checkpointPath": str(tmp_path / "hf")}).run_batch(requests)
    assert random == from_pt == from_hf
    assert all(isinstance(o, Transcript) for o in random)


def test_a_tokenizer_that_does_not_fit_fails_the_load(tmp_path: Path) -> None:
    save_openai_checkpoint(build_model(TINY, seed=8), str(tmp_path / "tiny.pt"))
    vocab, merges, _ = tiny_vocabulary()
    vocab.update({f"extra{i}": 300 + i for i in range(10)})  # ten more base tokens: 1919 in all
    write_tokenizer_files(str(tmp_path / "tok"), vocab, merges, special_tokens(310))
    options = {"device": "cpu", "checkpointPath": str(tmp_path / "tiny.pt"), "tokenizerPath": str(tmp_path / "tok")}
    with pytest.raises(InstanceError, match="Expected a tokenizer of 1909 tokens") as info:
        WhisperAdapter().load(LoadContext("i0", "w", options))
    assert info.value.code == "load_failed"


class _ReplayStep:
    """Stands in for a CUDA graph of batch size ``b`` over ``span`` cache positions on the CPU: replaying runs
    the eager step on rows 0..b-1, free slots included, as the captured graph does."""

    def __init__(self, engine: WhisperEngine, b: int, span: int = TINY.n_text_ctx) -> None:
        self.engine, self.b, self.span, self.replays = engine, b, span, 0

    def replay(self) -> None:
        self.replays += 1
        self.engine._step(self.b, self.span)


def test_steps_padded_to_a_captured_batch_size_give_the_same_results(model: WhisperModel) -> None:
    audios = [_audio(s, 20 + i) for i, s in enumerate((3.0, 31.0, 1.0))]
    requests = [RequestOptions(language="en"), RequestOptions(language="it"), RequestOptions(language="en")]
    eager = _engine(model, slots=4, batch_sizes=(1, 2, 4))
    padded = _engine(model, slots=4, batch_sizes=(4,))  # every step runs all four rows
    padded.graphs = {(4, TINY.n_text_ctx): _ReplayStep(padded, 4)}  # type: ignore[dict-item]
    expected = eager.transcribe(audios, requests)
    assert _summary(padded.transcribe(audios, requests)) == _summary(expected)
    assert padded.counters.graph_replays == padded.counters.decode_steps and padded.counters.eager_steps == 0


def test_word_timestamps_follow_the_text_in_order(model: WhisperModel) -> None:
    engine = _engine(model, max_tokens_per_audio_second=3.0)
    result = engine.transcribe([_audio(12.0, 7)], [RequestOptions(language="en", word_timestamps=True)])[0]
    # The random weights' words need not begin with a space, and words of two windows join in the text.
    assert result.words and "".join(w for w, _, _ in result.words) == "".join(result.text.split())
    starts = [start for _, start, _ in result.words]
    assert starts == sorted(starts)  # the warping path is monotonic
    assert all(0 <= start <= end <= result.duration_s for _, start, end in result.words)


def test_dtw_and_median_filter() -> None:
    from voxmux_host.models.whisper.alignment import dtw, median_filter

    cost = np.ones((3, 5))
    cost[0, 0] = cost[1, 1] = cost[1, 2] = cost[2, 3] = cost[2, 4] = 0.0
    rows, cols = dtw(cost)
    assert rows.tolist() == [0, 1, 1, 2, 2] and cols.tolist() == [0, 1, 2, 3, 4]
    x = torch.tensor([[1.0, 9.0, 1.0, 1.0, 5.0, 5.0, 5.0]])
    assert median_filter(x, 3).tolist() == [[9.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0]]  # reflect padding at the ends


def test_a_batch_submitted_while_another_decodes_joins_it_and_changes_no_transcript(model: WhisperModel) -> None:
    engine = _engine(model, slots=4, batch_sizes=(1, 2, 4))
    first = engine.submit([_audio(33.0, 11)], [RequestOptions(language="en")])
    engine.tick()
    engine.tick()
    assert not first.done and not engine.is_idle
    short = [_audio(3.0, 12), _audio(2.0, 13)]
    short_requests = [RequestOptions(language="en"), RequestOptions(language="de", prompt="the cat")]
    second = engine.submit(short, short_requests)
    while not second.done:
        engine.tick()
    assert not first.done, "the later, shorter batch ends while the first still decodes"
    while not first.done:
        engine.tick()
    assert engine.is_idle
    audios, requests = [_audio(33.0, 11), *short], [RequestOptions(language="en"), *short_requests]
    alone = [_engine(model, slots=1, batch_sizes=(1,)).transcribe([a], [r])[0] for a, r in zip(audios, requests)]
    assert _summary(engine.results(first) + engine.results(second)) == _summary(alone)


def test_a_join_waits_for_a_group_or_its_oldest_window_and_changes_no_transcript(model: WhisperModel) -> None:
    now = [100.0]
    engine = WhisperEngine(model, tiny_tokenizer(), torch.device("cpu"), torch.float64,
                           EngineOptions(slots=8, batch_sizes=(1, 2, 4, 8), max_tokens_per_audio_second=2.0,
                                         join_min_windows=2, join_max_wait_s=0.5, **NO_FALLBACK),  # type: ignore[arg-type]
                           clock=lambda: now[0])
    first = engine.submit([_audio(33.0, 11)], [RequestOptions(language="en")])
    engine.tick()  # nothing decoded: the window joins at once, alone
    assert engine.counters.encoder_calls == 1
    lone = engine.submit([_audio(3.0, 12)], [RequestOptions(language="en")])
    engine.tick()
    assert engine.counters.encoder_calls == 1, "one window waits for a second while slots decode"
    pair = engine.submit([_audio(2.0, 13)], [RequestOptions(language="de", prompt="the cat")])
    engine.tick()
    assert engine.counters.encoder_calls == 2, "two windows join together"
    assert engine.counters.windows == 3
    late = engine.submit([_audio(1.0, 14)], [RequestOptions(language="en")])
    engine.tick()
    assert engine.counters.windows == 3, "alone again: it waits"
    now[0] += 0.5
    engine.tick()
    assert engine.counters.windows == 4, "its wait is over"
    while not (first.done and lone.done and pair.done and late.done):
        engine.tick()
    audios = [_audio(33.0, 11), _audio(3.0, 12), _audio(2.0, 13), _audio(1.0, 14)]
    requests = [RequestOptions(language="en"), RequestOptions(language="en"), RequestOptions(language="de", prompt="the cat"),
                RequestOptions(language="en")]
    alone = [_engine(model, slots=1, batch_sizes=(1,)).transcribe([a], [r])[0] for a, r in zip(audios, requests)]
    together = [r for b in (first, lone, pair, late) for r in engine.results(b)]
    assert _summary(together) == _summary(alone)


def test_a_group_encoded_beside_the_decode_steps_enters_after_them_and_changes_no_transcript(model: WhisperModel) -> None:
    engine = _engine(model, slots=4, batch_sizes=(1, 2, 4), overlap_encoder=True)
    first = engine.submit([_audio(33.0, 11)], [RequestOptions(language="en")])
    engine.tick()  # nothing decodes: the window is encoded and enters at once
    assert engine.counters.windows == 1 and engine.counters.decode_steps == 1
    second = engine.submit([_audio(3.0, 12), _audio(2.0, 13)], [RequestOptions(language="en"),
                                                                 RequestOptions(language="de", prompt="the cat")])
    engine.tick()  # the pair is encoded beside this step, its slots held
    assert engine.counters.encoder_calls == 2 and engine.counters.windows == 1 and engine.counters.decode_steps == 2
    assert not engine.is_idle
    engine.tick()  # ... and enters before the next one
    assert engine.counters.windows == 3 and engine.counters.decode_steps == 3
    while not (first.done and second.done):
        engine.tick()
    assert engine.is_idle
    audios = [_audio(33.0, 11), _audio(3.0, 12), _audio(2.0, 13)]
    requests = [RequestOptions(language="en"), RequestOptions(language="en"), RequestOptions(language="de", prompt="the cat")]
    alone = [_engine(model, slots=1, batch_sizes=(1,)).transcribe([a], [r])[0] for a, r in zip(audios, requests)]
    assert _summary(engine.results(first) + engine.results(second)) == _summary(alone)
    # A group still being encoded is dropped with the rest when a step fails.
    engine.submit([_audio(33.0, 14)], [RequestOptions(language="en")])
    engine.tick()
    engine.submit([_audio(2.0, 15)], [RequestOptions(language="en")])
    engine.tick()
    assert not engine.is_idle
    engine.abort()
    assert engine.is_idle


@pytest.mark.parametrize("overlap_encoder", [False, True])
def test_steps_launched_before_the_last_is_read_change_no_transcript(model: WhisperModel, overlap_encoder: bool) -> None:
    audios = [_audio(33.0, 11), _audio(3.0, 12), _audio(2.0, 13), _audio(1.0, 14), _audio(5.0, 15)]
    requests = [RequestOptions(language="en"), RequestOptions(language="en"), RequestOptions(language="de", prompt="the cat"),
                RequestOptions(timestamps=False), RequestOptions()]
    plain = _engine(model, slots=2, batch_sizes=(1, 2), overlap_encoder=overlap_encoder)
    ahead = _engine(model, slots=2, batch_sizes=(1, 2), overlap_encoder=overlap_encoder, step_ahead=True)
    expected = plain.transcribe(audios, requests)
    assert _summary(ahead.transcribe(audios, requests)) == _summary(expected)
    assert ahead.counters.windows == plain.counters.windows == 6
    assert ahead.counters.tokens == plain.counters.tokens
    # Each window's end is read one step later: its slot decodes one step more, the last one past every end.
    assert plain.counters.decode_steps < ahead.counters.decode_steps <= plain.counters.decode_steps + 6
    # A batch submitted while the last step's tokens are unread joins the running decode all the same.
    first = ahead.submit([_audio(33.0, 11)], [requests[0]])
    ahead.tick()
    ahead.tick()
    assert ahead._pending is not None
    second = ahead.submit(audios[1:3], requests[1:3])
    while not (first.done and second.done):
        ahead.tick()
    assert _summary(ahead.results(first) + ahead.results(second)) == _summary(expected[:3])
    # A failed step drops the unread one with the rest.
    ahead.submit([_audio(3.0, 16)], [RequestOptions(language="en")])
    ahead.tick()
    ahead.tick()
    assert ahead._pending is not None and not ahead.is_idle
    ahead.abort()
    assert ahead._pending is None and ahead.is_idle


@pytest.mark.skipif(hasattr(torch.nn.Module, "compile"), reason="this torch has Module.compile")
def test_a_compiled_encoder_needs_torch_2_2() -> None:
    with pytest.raises(InstanceError, match=f"compileEncoder needs torch >= 2.2: this is torch {torch.__version__}"):
        _adapter({"config": "tiny", "compileEncoder": True})


def test_a_compiled_encoder_runs_batches_under_its_minimum_eager(model: WhisperModel) -> None:
    """compileEncoder: batches of fewer than COMPILED_MIN_WINDOWS windows run the blocks' eager forward(),
    larger ones call the (compiled) modules. torch.compile is not on this machine's torch: the flag stands
    in for it, and the modules' pre-hooks (which only a module call runs) show which path ran."""
    calls: List[int] = []
    hooks = [block.register_forward_pre_hook(lambda module, args: calls.append(1)) for block in model.encoder.blocks]
    try:
        model.encoder.is_compiled = True
        for b, expected in ((1, 0), (COMPILED_MIN_WINDOWS - 1, 0), (COMPILED_MIN_WINDOWS, TINY.n_audio_layer)):
            calls.clear()
            model.encoder(torch.randn(b, TINY.n_mels, N_FRAMES, dtype=torch.float64))
            assert len(calls) == expected, (b, len(calls))
    finally:
        model.encoder.is_compiled = False
        for hook in hooks:
            hook.remove()


def test_the_encoder_products_can_be_fp8_capable_linears_without_changing_names_or_outputs(model: WhisperModel) -> None:
    linears = model.encoder.linears()
    assert len(linears) == 6 * TINY.n_audio_layer and all(linear.fp8 is None for linear in linears)
    assert "encoder.blocks.0.attn.key.weight" in model.state_dict() and "encoder.blocks.0.mlp.0.bias" in model.state_dict()
    mel = torch.randn(1, TINY.n_mels, N_FRAMES, dtype=torch.float64)
    before = model.encoder(mel)
    block = model.encoder.blocks[0]
    expected = torch.nn.functional.linear(before, block.mlp[0].weight, block.mlp[0].bias)  # type: ignore[index]
    assert torch.equal(block.mlp[0](before), expected)  # type: ignore[index,operator]


def test_the_adapter_decodes_host_batches_together_on_its_own_thread() -> None:
    adapter = _adapter({"config": "tiny", "seed": 5})
    first = [BatchInput("a", _pcm(33.0, 1), language="en")]
    second = [BatchInput("b", _pcm(1.0, 2), language="en"), BatchInput("c", _pcm(1.5, 3), language="de")]
    finish_first = adapter.begin(first, None)  # returns at once: the decoding thread runs it
    finish_second = adapter.begin(second, None)
    together = finish_first() + finish_second()
    alone = _adapter({"config": "tiny", "seed": 5})
    apart = [alone.run_batch([item])[0] for item in first + second]
    assert all(isinstance(t, Transcript) for t in together)
    assert [(t.text, t.language) for t in together] == [(t.text, t.language) for t in apart]  # type: ignore[union-attr]
    assert adapter.stats().clips == 3  # type: ignore[attr-defined]
    adapter.close()
    alone.close()


@pytest.mark.parametrize("step_ahead, failing_call", [(False, 1), (True, 1), (True, 3)])
def test_a_failed_step_fails_the_batches_in_the_engine_and_the_next_batch_runs(
        monkeypatch: pytest.MonkeyPatch, step_ahead: bool, failing_call: int) -> None:
    """With stepAhead, a step that fails after others (the 3rd) fails while an earlier one is unread."""
    adapter = _adapter({"config": "tiny", "seed": 5, "stepAhead": step_ahead})
    engine = adapter.engine
    step = engine._run_step
    calls = []

    def failing_once(rows: int) -> None:
        calls.append(rows)
        if len(calls) == failing_call:
            assert (engine._pending is not None) == (failing_call > 1)
            raise RuntimeError("device lost")
        step(rows)

    monkeypatch.setattr(engine, "_run_step", failing_once)
    finish = adapter.begin([BatchInput("a", _pcm(1.0, 1), language="en")], None)
    with pytest.raises(RuntimeError, match="device lost"):
        finish()
    assert len(calls) == failing_call and engine.is_idle and engine._pending is None
    assert isinstance(adapter.run_batch([BatchInput("b", _pcm(1.0, 2), language="en")])[0], Transcript)
    adapter.close()
    with pytest.raises(InstanceError):
        adapter.begin([BatchInput("c", _pcm(1.0, 3), language="en")], None)


def _shapes_seen(engine: WhisperEngine, monkeypatch: pytest.MonkeyPatch) -> Dict[str, List[Any]]:
    """Records the shapes of the engine's eager calls: encoder batches and the decoder's cached calls
    outside the step (language detection, prefill)."""
    seen: Dict[str, List[Any]] = {"encoder": [], "decoder": []}
    encoder, forward_cached = engine.model.encoder.forward, engine.model.decoder.forward_cached

    def encode(mel: torch.Tensor) -> torch.Tensor:
        seen["encoder"].append(int(mel.shape[0]))
        return encoder(mel)

    def cached(cache: Any, tokens: torch.Tensor, positions: torch.Tensor, slots: Any = None,
               span: Any = None) -> torch.Tensor:
        if slots is not None:
            seen["decoder"].append(tuple(tokens.shape))
        return forward_cached(cache, tokens, positions, slots, span)

    monkeypatch.setattr(engine.model.encoder, "forward", encode)
    monkeypatch.setattr(engine.model.decoder, "forward_cached", cached)
    return seen


def test_warming_the_shapes_meets_every_join_shape_before_serving_and_changes_no_transcript(
        model: WhisperModel, monkeypatch: pytest.MonkeyPatch) -> None:
    audios = [_audio(1.0 + 0.4 * k, seed=30 + k) for k in range(5)]
    requests = [RequestOptions(language=None if k % 2 else "en", prompt="the cat" if k == 3 else None) for k in range(5)]
    # Clips detected on their own windows: a group's encoder call is then as large as the group.
    cold = _engine(model, detect_on_window=True).transcribe(audios, requests)
    warmed = _engine(model, warm_shapes=True, detect_on_window=True)
    seen = _shapes_seen(warmed, monkeypatch)
    met = warmed.warm_shapes()
    lengths = sorted({min(n, TINY.n_text_ctx) for n in PREFILL_LENGTHS})
    assert list(warmed.prefill_lengths) == lengths
    # Every join size, 1 to the slots: its encoder call, its language detection and its prefill at each length.
    assert seen["encoder"] == [1, 2, 3, 4]
    assert set(seen["decoder"]) == {(n, 1) for n in range(1, 5)} | {(n, t) for n in range(1, 5) for t in lengths}
    assert met == len(seen["encoder"]) + len(seen["decoder"])
    warm_calls = {kind: list(calls) for kind, calls in seen.items()}
    assert _summary(warmed.transcribe(audios, requests)) == _summary(cold)
    # Serving met no shape that warming had not: the prefill is padded to one of its lengths.
    assert set(seen["encoder"][4:]) <= set(warm_calls["encoder"])
    assert set(seen["decoder"][len(warm_calls["decoder"]):]) <= set(warm_calls["decoder"])


def test_the_prefill_has_a_few_lengths_with_or_without_warming(model: WhisperModel,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Each new prefill shape costs a cuDNN attention graph (about 0.1 s on an H100): prompts of every length
    # (the previous windows' text) would otherwise keep meeting new ones.
    engine = _engine(model)
    seen = _shapes_seen(engine, monkeypatch)
    prompt = "the cat sat on the mat and then the dog came in"
    engine.transcribe([_audio(1.0, seed=40), _audio(1.0, seed=41)],
                      [RequestOptions(language="en"), RequestOptions(language="en", prompt=prompt)])
    # <|startoftranscript|>, language, task: the first step feeds the last, so two are prefilled, padded to
    # 4; with the prompt (<|startofprev|> and its tokens before them) the join's longest is padded further.
    longest = len(engine.tokenizer.encode(" " + prompt)) + 1 + 2
    assert seen["decoder"] == [(2, next(n for n in PREFILL_LENGTHS if n >= longest))]
    assert longest not in PREFILL_LENGTHS


def test_warming_also_runs_the_front_end(model: WhisperModel,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The front end's first call loads the FFT library and builds the mel filters: not the first request's wait.
    engine = _engine(model)
    lengths: List[int] = []

    def front_end(audio: torch.Tensor, n_mels: int) -> torch.Tensor:
        lengths.append(int(audio.shape[-1]))
        return log_mel_spectrogram(audio, n_mels)

    monkeypatch.setattr(decoding, "log_mel_spectrogram", front_end)
    assert engine.warm_first_calls() == 3
    assert lengths == [30 * 16000]


class _HeldKernels:
    """A stand-in for attention_kernels.held_to: records the kernels asked for and whether a call is inside."""

    def __init__(self) -> None:
        self.asked: List[Tuple[str, ...]] = []
        self.inside = False

    @contextlib.contextmanager
    def __call__(self, names: Sequence[str]) -> Iterator[None]:
        self.asked.append(tuple(names))
        assert not self.inside
        self.inside = True
        try:
            yield
        finally:
            self.inside = False


def test_efficient_prefill_attention_holds_every_join_call_and_only_those(model: WhisperModel,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # cuDNN's attention, torch's choice on an H100 or H200, builds a graph per new shape (0.1-0.15 s): a join's
    # eager decoder calls (language detection, the prefill) are held to the memory-efficient kernel, the
    # decode steps are not.
    held = _HeldKernels()
    monkeypatch.setattr(attention_kernels, "held_to", held)
    audios = [_audio(1.0 + 0.4 * k, seed=70 + k) for k in range(3)]
    requests = [RequestOptions(language=None if k == 1 else "en", prompt="the cat" if k == 2 else None) for k in range(3)]
    plain = _engine(model).transcribe(audios, requests)
    assert held.asked == []
    engine = _engine(model, prefill_attention="efficient", warm_shapes=True)
    calls: List[Tuple[Tuple[int, ...], bool]] = []
    forward_cached = engine.model.decoder.forward_cached

    def cached(cache: Any, tokens: torch.Tensor, positions: torch.Tensor, slots: Any = None,
               span: Any = None) -> torch.Tensor:
        calls.append((tuple(tokens.shape), held.inside))
        return forward_cached(cache, tokens, positions, slots, span)

    monkeypatch.setattr(engine.model.decoder, "forward_cached", cached)
    engine.warm_shapes()
    assert calls and all(inside for _, inside in calls)
    assert set(held.asked) == {("EFFICIENT_ATTENTION", "MATH")}
    calls.clear()
    assert _summary(engine.transcribe(audios, requests)) == _summary(plain)
    joins = [shape for shape, inside in calls if inside]
    steps = [shape for shape, inside in calls if not inside]
    # One group of three: one detection (one window), one prefill (three windows, padded to 8 tokens by the
    # prompt), then the steps, none of them held.
    assert joins == [(1, 1), (3, 8)]
    assert steps and engine.counters.decode_steps == len(steps)


def test_prefill_attention_takes_auto_or_efficient(model: WhisperModel) -> None:
    assert _engine(model).prefill_kernels is None
    with pytest.raises(ValueError, match="Expected prefill_attention to be one of"):
        _engine(model, prefill_attention="flash")


def test_the_adapter_holds_its_prefill_to_a_cuda_kernel_where_torch_can(monkeypatch: pytest.MonkeyPatch) -> None:
    from voxmux_host.models.whisper import adapter as adapter_module
    base = {"device": "cpu", "config": "tiny", "seed": 5}
    with pytest.raises(InstanceError, match="Expected prefillAttention to be one of auto, efficient: got 'cudnn'"):
        WhisperAdapter().load(LoadContext("i0", "whisper-tiny", {**base, "prefillAttention": "cudnn"}))
    monkeypatch.setattr(adapter_module, "attention_kernels", lambda: None)
    with pytest.raises(InstanceError, match=r"prefillAttention efficient: picking an attention kernel needs torch >= 2\.3"):
        WhisperAdapter().load(LoadContext("i0", "whisper-tiny", {**base, "prefillAttention": "efficient"}))
    monkeypatch.setattr(adapter_module, "attention_kernels", lambda: object())
    with pytest.raises(InstanceError, match="prefillAttention efficient picks a CUDA kernel: got device cpu"):
        WhisperAdapter().load(LoadContext("i0", "whisper-tiny", {**base, "prefillAttention": "efficient"}))


def test_the_adapter_warms_the_shapes_when_asked_without_counting_it_as_work(monkeypatch: pytest.MonkeyPatch) -> None:
    warms: List[Tuple[str, Tuple[int, ...], str]] = []
    warm = WhisperEngine._warm

    def counted(engine: WhisperEngine, sizes: Sequence[int], lengths: Sequence[int]) -> int:
        warms.append(("shapes" if engine.options.warm_shapes else "plain", tuple(sizes),
                      threading.current_thread().name))
        return warm(engine, sizes, lengths)

    monkeypatch.setattr(WhisperEngine, "_warm", counted)
    warmed = WhisperAdapter()
    info = warmed.load(LoadContext("i0", "whisper-tiny", {"device": "cpu", "maxTokensPerAudioSecond": 2,
                                                          "temperatureIncrement": 0, "batchSizes": [1, 2, 4],
                                                          "config": "tiny", "seed": 5, "warmShapes": True}))
    # On the decoding thread, where serving makes its calls: a library's per-shape plans (cuDNN's attention
    # graphs) and handles are kept per thread, so calls on the thread that loaded the model would warm nothing.
    # At load, while sibling instances may serve: warmup, under the exclusive-warmup gate, only captures.
    assert warms == [("shapes", (1, 2, 3, 4), "whisper-decode")]
    assert [stage.stage for stage in info.stages] == ["warmup"]
    warmup = warmed.warmup()
    assert len(warms) == 1 and warmup.stages == ()  # no graphs on the CPU: nothing to capture
    plain = _adapter({"config": "tiny", "seed": 5})
    # Without warmShapes, one join of one window: the decoding thread's first calls are not the first request's.
    assert warms[1:] == [("plain", (1,), "whisper-decode")]
    # The engine's counts are the requests' work: warming adds nothing to them.
    assert warmed.stats().encoder_windows == plain.stats().encoder_windows == 0  # type: ignore[attr-defined]
    pcm = _pcm(1.0, 9)
    assert warmed.run_batch([BatchInput("a", pcm)])[0] == plain.run_batch([BatchInput("a", pcm)])[0]
    warmed.close()
    plain.close()


def test_a_warming_that_fails_fails_the_load_and_stops_the_decoding_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_memory(engine: WhisperEngine) -> int:
        raise RuntimeError("CUDA out of memory (a stand-in)")

    monkeypatch.setattr(WhisperEngine, "warm_first_calls", out_of_memory)
    adapter = WhisperAdapter()
    before = set(threading.enumerate())
    with pytest.raises(RuntimeError, match="out of memory"):
        adapter.load(LoadContext("i0", "whisper-tiny", {"device": "cpu", "config": "tiny", "seed": 5}))
    assert [t.name for t in set(threading.enumerate()) - before] == []
    with pytest.raises(InstanceError, match="not loaded"):
        adapter.begin([BatchInput("a", _pcm(1.0, 1))], None)


def test_the_decoding_thread_runs_a_call_between_steps_and_gives_back_its_value_or_error(model: WhisperModel) -> None:
    engine = _engine(model)
    service = DecodeService(engine)
    try:
        assert service.call(lambda: threading.current_thread().name).result(timeout=30) == "whisper-decode"

        def fails() -> None:
            raise ValueError("no")

        with pytest.raises(ValueError, match="no"):
            service.call(fails).result(timeout=30)
        # The thread goes on: a batch after the failed call decodes as it would on its own.
        audio, request = _audio(1.0, seed=41), RequestOptions(language="en")
        decoded = service.submit([audio], [request]).result(timeout=60)
        assert _summary(decoded) == _summary(_engine(model).transcribe([audio], [request]))
    finally:
        service.close()
    with pytest.raises(RuntimeError, match="closed"):
        service.call(lambda: None).result(timeout=30)


@pytest.mark.parametrize("step_ahead", [False, True])
def test_steps_over_shorter_cache_spans_give_the_same_transcripts(model: WhisperModel, step_ahead: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # 31 s clips: a second window whose prompt holds the first's text; up to 60 tokens a window, so that
    # decoding crosses the spans of 8 and 16 positions and goes on over the whole cache.
    audios = [_audio(s, 50 + i) for i, s in enumerate((31.0, 3.0, 12.0, 31.0, 1.0))]
    requests = [RequestOptions(language="en"), RequestOptions(language="de", prompt="the cat"),
                RequestOptions(language="en", timestamps=False), RequestOptions(language="fr"),
                RequestOptions(language="en")]
    plain = _engine(model, step_ahead=step_ahead)
    spanned = _engine(model, step_ahead=step_ahead, step_spans=(8, 16))
    spans: List[int] = []
    step = spanned._step

    def recorded(b: int, span: int) -> None:
        # The step's query position of every window it decodes lies inside the span it attends over.
        decoding = [i for i, a in enumerate(spanned._slots[:b]) if a is not None and not a.done]
        assert all(int(spanned.state.positions[i]) < span for i in decoding)
        spans.append(span)
        step(b, span)

    monkeypatch.setattr(spanned, "_step", recorded)
    assert _summary(spanned.transcribe(audios, requests)) == _summary(plain.transcribe(audios, requests))
    assert set(spans) == {16, TINY.n_text_ctx}  # some window always past 8 positions
    # A lone short clip (2 tokens after a prompt of 3) stays within 8 positions.
    lone = ([_audio(1.0, 59)], [RequestOptions(language="en")])
    assert _summary(spanned.transcribe(*lone)) == _summary(plain.transcribe(*lone))
    assert set(spans[-3:]) == {8} and spanned.counters.decode_steps == len(spans)


def test_a_step_replays_the_graph_of_the_shortest_span_that_holds_its_slots(model: WhisperModel) -> None:
    audios = [_audio(s, 60 + i) for i, s in enumerate((31.0, 2.0, 9.0))]
    requests = [RequestOptions(language="en"), RequestOptions(language="en", prompt="the cat"),
                RequestOptions(language="it")]
    lone = ([_audio(1.0, 59)], [RequestOptions(language="en")])
    plain = _engine(model)
    engine = _engine(model, batch_sizes=(4,), step_spans=(8, 16))
    graphs = {(4, span): _ReplayStep(engine, 4, span) for span in (8, 16, TINY.n_text_ctx)}
    engine.graphs = graphs  # type: ignore[assignment]
    assert _summary(engine.transcribe(*lone)) == _summary(plain.transcribe(*lone))
    assert [g.replays > 0 for g in graphs.values()] == [True, False, False]
    assert _summary(engine.transcribe(audios, requests)) == _summary(plain.transcribe(audios, requests))
    assert all(graph.replays > 0 for graph in graphs.values())
    assert sum(g.replays for g in graphs.values()) == engine.counters.graph_replays == engine.counters.decode_steps


def test_spans_at_or_past_the_text_context_are_refused(model: WhisperModel) -> None:
    with pytest.raises(ValueError, match="Expected step_spans below n_text_ctx 448: got"):
        _engine(model, step_spans=(16, 448))


def test_the_adapter_captures_its_steps_at_the_cache_spans_it_is_given() -> None:
    spanned = _adapter({"config": "tiny", "seed": 5, "stepCacheSpans": [16, 8]})
    assert spanned.engine.spans == (8, 16, TINY.n_text_ctx)
    plain = _adapter({"config": "tiny", "seed": 5})
    assert plain.engine.spans == (TINY.n_text_ctx,)
    pcm = _pcm(3.0, 11)
    assert spanned.run_batch([BatchInput("a", pcm)])[0] == plain.run_batch([BatchInput("a", pcm)])[0]
    spanned.close()
    plain.close()
