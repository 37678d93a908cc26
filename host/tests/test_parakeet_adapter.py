"""ParakeetAdapter end to end on the CPU (tiny config): text and words, per-request failures, stats,
options, probe, batch planning and bucket shapes."""
from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List

import numpy as np
import numpy.typing as npt
import pytest
import torch

from voxmux_host.errors import InstanceError
from voxmux_host.model_api import LoadContext, ItemFailure, BatchInput, Transcript
from voxmux_host.models.parakeet.adapter import ParakeetAdapter, ParakeetStats
from voxmux_host.models.parakeet.config import FULL, TINY, encoder_frames, feature_tensor_frames
from voxmux_host.models.parakeet.model import PCM16_SCALE, pcm16_from_float
from voxmux_host.models.parakeet.random_init import expected_tokens_per_second, speech_like_noise
from voxmux_host.models.parakeet.graphs import bucket_samples_for
from voxmux_host.models.parakeet.runner import ParakeetRunner, RunnerOptions


def _load(options: Dict[str, Any]) -> ParakeetAdapter:
    adapter = ParakeetAdapter()
    adapter.load(LoadContext("i0", "parakeet", {"config": "tiny", "device": "cpu", **options}))
    return adapter


@pytest.fixture(scope="module")
def adapter() -> Iterator[ParakeetAdapter]:
    torch.set_num_threads(2)
    a = _load({"seed": 3})
    a.warmup()
    yield a
    a.close()


def _pcm(seconds: float, seed: int) -> npt.NDArray[np.int16]:
    """Speech-like int16 PCM, the wire format."""
    return pcm16_from_float(speech_like_noise(seconds, seed))


def _clips(durations_s: List[float], seed: int) -> List[npt.NDArray[np.int16]]:
    return [_pcm(d, seed + i) for i, d in enumerate(durations_s)]


def _requests(durations_s: List[float], seed: int = 0, words: bool = True) -> List[BatchInput]:
    return [BatchInput(f"r{i}", clip, word_timestamps=words) for i, clip in enumerate(_clips(durations_s, seed))]


def test_run_batch_returns_text_and_words(adapter: ParakeetAdapter) -> None:
    requests = _requests([2.0, 3.5, 1.2])
    outputs = adapter.run_batch(requests)
    assert [o.request_id for o in outputs] == ["r0", "r1", "r2"]
    for request, output in zip(requests, outputs):
        assert isinstance(output, Transcript)
        assert output.language == "en"
        assert output.duration_s == pytest.approx(request.audio.shape[0] / 16000)
        assert output.text and output.text == output.text.strip()
        assert output.words and " ".join(w.word for w in output.words) == output.text
        starts = [w.start for w in output.words]
        assert starts == sorted(starts)
        assert all(0.0 <= w.start <= w.end <= output.duration_s for w in output.words)
        assert output.segments and output.segments[0].start == output.words[0].start


def test_begin_batch_runs_the_model_and_leaves_the_texts_to_its_function(adapter: ParakeetAdapter) -> None:
    requests = _requests([1.0, 2.0], seed=3)
    runner = adapter._runner
    assert runner is not None
    clips_before = runner.counters.clips
    finish = adapter.begin(requests)
    assert runner.counters.clips == clips_before + 2  # the model has run
    outputs = finish()
    assert [o.request_id for o in outputs] == ["r0", "r1"]
    assert outputs == adapter.run_batch(requests)


def test_words_only_when_asked(adapter: ParakeetAdapter) -> None:
    output = adapter.run_batch(_requests([1.5], words=False))[0]
    assert isinstance(output, Transcript) and output.words is None and output.segments


def test_bad_audio_fails_only_its_request(adapter: ParakeetAdapter) -> None:
    batch = [
        BatchInput("empty", np.zeros(0, dtype=np.int16)),
        BatchInput("ok", _pcm(1.0, 9)),
        BatchInput("float", speech_like_noise(1.0, 9)),  # type: ignore[arg-type]  # float32 is not the wire format
        BatchInput("stereo", np.zeros((2, 100), dtype=np.int16)),
    ]
    out = adapter.run_batch(batch)
    assert [o.request_id for o in out] == ["empty", "ok", "float", "stereo"]
    assert isinstance(out[1], Transcript)
    for i in (0, 2, 3):
        assert isinstance(out[i], ItemFailure) and out[i].code == "invalid_audio"  # type: ignore[union-attr]
    assert "int16" in out[2].message  # type: ignore[union-attr]


def test_batched_text_equals_one_by_one(adapter: ParakeetAdapter) -> None:
    requests = _requests([2.7, 0.9, 4.1, 1.6], seed=40)
    batched = adapter.run_batch(requests)
    for request, output in zip(requests, batched):
        single = adapter.run_batch([request])[0]
        assert isinstance(single, Transcript) and isinstance(output, Transcript)
        assert single.text == output.text
        assert single.words == output.words


def test_short_clips_decode_to_nothing_without_failing(adapter: ParakeetAdapter) -> None:
    out = adapter.run_batch(
        [BatchInput("one", np.full(1, 3277, dtype=np.int16)), BatchInput("tiny", np.zeros(500, dtype=np.int16))]
    )
    assert all(isinstance(o, Transcript) for o in out)
    assert out[0].text == ""  # type: ignore[union-attr]  # 1 sample: 0 feature frames, 0 encoder frames


def test_run_batch_accepts_a_view_of_a_wire_body(adapter: ParakeetAdapter) -> None:
    first, second = _pcm(1.3, 90), _pcm(2.2, 91)
    body = np.frombuffer(first.tobytes() + second.tobytes(), dtype="<i2")
    views = [BatchInput("a", body[: first.shape[0]]), BatchInput("b", body[first.shape[0] :])]
    copies = [BatchInput("a", first.copy()), BatchInput("b", second.copy())]
    from_views, from_copies = adapter.run_batch(views), adapter.run_batch(copies)
    assert [o.text for o in from_views] == [o.text for o in from_copies]  # type: ignore[union-attr]


def test_runner_gives_int16_the_same_tokens_as_the_equivalent_float32(adapter: ParakeetAdapter) -> None:
    runner = adapter._runner
    assert runner is not None
    pcm = _clips([2.4, 0.8, 3.1], seed=60)
    floats = [clip.astype(np.float32) * np.float32(PCM16_SCALE) for clip in pcm]
    from_pcm, from_float = runner.run(pcm, count=False), runner.run(floats, count=False)
    assert [item.tokens for item in from_pcm] == [item.tokens for item in from_float]
    assert [item.frames for item in from_pcm] == [item.frames for item in from_float]
    assert [item.durations for item in from_pcm] == [item.durations for item in from_float]
    assert sum(len(item.tokens) for item in from_pcm) > 0
    # Eager on a graph's padded shapes (what a replay is checked against) agrees too.
    bucket = runner.buckets[0]
    padded, _ = runner.run_eager_padded(pcm, 4, bucket)
    assert [item.tokens for item in padded] == [item.tokens for item in from_pcm]
    with pytest.raises(ValueError, match="mix"):
        runner.run([pcm[0], floats[1]])


def test_random_weights_decode_at_a_speech_like_rate() -> None:
    a = _load({"seed": 5})
    try:
        a.run_batch(_requests([6.0, 8.0, 5.0, 7.0], seed=70))
        stats = a.stats()
        assert isinstance(stats, ParakeetStats)
        assert stats.clips == 4 and stats.audio_seconds == pytest.approx(26.0)
        # the biases aim at ~3.4 tokens/s; random weights scatter around it
        assert 1.5 < stats.tokens_per_audio_second < 6.5
        assert stats.decode_steps_per_clip > stats.tokens_per_clip > 0
        assert expected_tokens_per_second(TINY) == pytest.approx(3.35, abs=0.1)
    finally:
        a.close()


def test_stats_count_eager_batches(adapter: ParakeetAdapter) -> None:
    before = adapter.stats()
    adapter.run_batch(_requests([1.0, 1.0]))
    after = adapter.stats()
    assert after.eager_batches == before.eager_batches + 1
    assert after.graph_replays == before.graph_replays == 0
    assert after.memory_bytes > 0
    assert isinstance(after, ParakeetStats) and after.tokens >= before.tokens  # type: ignore[attr-defined]


def test_unknown_and_invalid_options_fail_the_load() -> None:
    with pytest.raises(InstanceError) as info:
        _load({"batchSize": [1]})
    assert info.value.code == "load_failed" and "batchSize" in info.value.message
    with pytest.raises(InstanceError) as info:
        _load({"config": "huge", "batchSizes": [0], "simulateHang": "maybe"})
    for fragment in ("config", "batchSizes", "simulateHang"):
        assert fragment in info.value.message
    with pytest.raises(InstanceError) as info:
        _load({"compileDecodeStep": "yes", "cudnnBenchmark": 1, "compileEncoder": None})
    for key in ("compileDecodeStep", "cudnnBenchmark", "compileEncoder"):
        assert key in info.value.message


def test_an_unknown_attention_fails_the_load() -> None:
    with pytest.raises(InstanceError) as info:
        _load({"attention": "fast"})
    assert info.value.code == "load_failed"
    assert "Expected attention to be auto, sdpa or manual: got 'fast'" in info.value.message


@pytest.mark.skipif(hasattr(torch, "compile"), reason="torch >= 2.0 can compile")
def test_a_compiled_decode_step_needs_torch_2() -> None:
    for key in ("compileDecodeStep", "compileEncoder"):
        with pytest.raises(InstanceError) as info:
            _load({key: True})
        assert info.value.code == "load_failed" and key in info.value.message and "torch >= 2.0" in info.value.message


def test_probe_and_simulated_hang() -> None:
    healthy = _load({})
    assert healthy.probe() is True
    healthy.close()
    failing = _load({"simulateHang": "fail"})
    assert failing.probe() is False
    hanging = _load({"simulateHang": True, "probeTimeoutMs": 50})
    start = time.monotonic()
    assert hanging.probe() is False
    assert 0.04 < time.monotonic() - start < 2.0


def test_bucket_lengths_align_the_encoder() -> None:
    samples = bucket_samples_for(45_000, FULL)
    assert samples == 725_760  # 45.36 s
    frames = encoder_frames(feature_tensor_frames(samples, FULL), FULL)
    assert frames == 568 and frames % 8 == 0
    for ms in (5000, 15000, 30000, 60000):
        s = bucket_samples_for(ms, FULL)
        assert s >= ms * 16 and encoder_frames(feature_tensor_frames(s, FULL), FULL) % 8 == 0
        assert s - ms * 16 < 8 * 8 * 160  # less than 8 frames of padding


def test_plan_picks_the_smallest_graph_that_fits(adapter: ParakeetAdapter) -> None:
    runner = ParakeetRunner(
        adapter._model,  # type: ignore[arg-type]
        torch.device("cpu"),
        RunnerOptions(batch_sizes=(1, 2, 4), bucket_durations_ms=(5000, 15000), use_graphs=False),
    )
    assert runner.plan([16000] * 3) == [([0, 1, 2], None)]  # no graphs captured: eager
    runner.graphs.is_prepared = True
    assert runner.plan([16000] * 3) == [([0, 1, 2], None)]  # every shape run, but nothing captured yet
    runner.graphs.has_graphs = True
    b5, b15 = runner.buckets
    lengths = [16000 * 3, 16000 * 20, 16000 * 12, 16000 * 1, 16000 * 2, 16000 * 4, 16000 * 14]
    plan = runner.plan(lengths)
    # sorted by length, split at the largest batch size, padded to the smallest bucket and batch size
    assert plan == [([3, 4, 0, 5], (4, b5)), ([2, 6], (2, b15)), ([1], None)]


def test_the_retired_overlap_decode_option_fails_the_load() -> None:
    with pytest.raises(InstanceError) as info:
        _load({"overlapDecode": True})
    assert "Unknown parakeet option(s): overlapDecode" in info.value.message


def test_runner_begin_returns_what_run_returns(adapter: ParakeetAdapter) -> None:
    runner = adapter._runner
    assert runner is not None
    clips = _clips([1.2, 0.4, 2.1], seed=5)
    complete = runner.begin(clips)
    assert [item.tokens for item in complete()] == [item.tokens for item in runner.run(clips)]
