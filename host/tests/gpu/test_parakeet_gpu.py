"""Parakeet on CUDA: graph replay against eager, int16 staging against float32 input, SDPA against the
manual attention, FP8 products against bf16, the probe, and a smoke run of the full 0.6 B configuration.
Skipped without CUDA."""
from __future__ import annotations

import importlib
import time
from typing import Any, Dict, Iterator, List

import numpy as np
import numpy.typing as npt
import pytest
import torch
import torch.nn.functional as F

from voxmux_host.model_api import LoadContext, BatchInput, Transcript
from voxmux_host.models.parakeet.adapter import ParakeetAdapter, ParakeetStats
from voxmux_host.models.parakeet.config import (
    TINY,
    count_parameters,
    encoder_frames,
    feature_tensor_frames,
)
from voxmux_host.models.parakeet.encoder import HAS_SDPA
from voxmux_host.fp8 import (
    FP8_AVAILABLE,
    fp8_linear,
    fp8_linear_reference,
    fp8_weight_from,
)
from voxmux_host.models.parakeet.model import PCM16_SCALE, build_model, pad_audio, pcm16_from_float
from voxmux_host.models.parakeet.random_init import speech_like_noise

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

# bf16 matrix products: graph and eager run the same kernels on the same shapes, so they should agree
# to within a few bf16 ulps (2^-8 relative) even where the library picks a different algorithm.
BF16_ATOL = 3e-2
BF16_RTOL = 3e-2


def _load(options: Dict[str, Any]) -> ParakeetAdapter:
    adapter = ParakeetAdapter()
    adapter.load(LoadContext("gpu", "parakeet", {"config": "tiny", "device": "cuda", **options}))
    return adapter


@pytest.fixture(scope="module")
def graphed() -> Iterator[ParakeetAdapter]:
    a = _load({"batchSizes": [1, 2, 4], "lengthBucketsMs": [5000, 15000]})
    info = a.warmup()
    assert info.graphs_captured == 3 * 2 + 3
    yield a
    a.close()


def _pcm(seconds: float, seed: int) -> npt.NDArray[np.int16]:
    """Speech-like int16 PCM, the wire format."""
    return pcm16_from_float(speech_like_noise(seconds, seed))


def _clips(durations: List[float], seed: int) -> List[npt.NDArray[np.int16]]:
    return [_pcm(d, seed + i) for i, d in enumerate(durations)]


def _floats(clips: List[npt.NDArray[np.int16]]) -> List[npt.NDArray[np.float32]]:
    """The float32 clips the int16 ones stand for (int16 / 32768, exact)."""
    return [clip.astype(np.float32) * np.float32(PCM16_SCALE) for clip in clips]


def _assert_replay_equals_eager_on_the_same_shapes(adapter: ParakeetAdapter, seed: int) -> None:
    """A warmed-up adapter (tiny, batch size 4 captured) gives the same tokens, frames and durations, and
    encoder output within bf16 tolerance, by a graph replay and by an eager run on the same shapes."""
    runner = adapter._runner
    assert runner is not None
    clips = _clips([3.1, 4.7, 1.9], seed=seed)
    batch_size, bucket = 4, runner.buckets[0]
    replayed = runner.run_graph(clips, batch_size, bucket)
    frames = encoder_frames(feature_tensor_frames(bucket, TINY), TINY)
    graph_enc = runner.graph_encoder_output(batch_size, frames)
    eager, eager_enc = runner.run_eager_padded(clips, batch_size, bucket)
    for i in range(len(clips)):
        assert replayed[i].tokens == eager[i].tokens
        assert replayed[i].frames == eager[i].frames
        assert replayed[i].durations == eager[i].durations
        n = encoder_frames(clips[i].shape[0] // 160, TINY)
        torch.testing.assert_close(graph_enc[i, :n], eager_enc[i, :n], atol=BF16_ATOL, rtol=BF16_RTOL)
    assert sum(len(item.tokens) for item in replayed) > 0


def test_graph_replay_equals_eager_on_the_same_shapes(graphed: ParakeetAdapter) -> None:
    _assert_replay_equals_eager_on_the_same_shapes(graphed, seed=3)


def test_graph_replay_of_int16_equals_replay_of_the_equivalent_float32(graphed: ParakeetAdapter) -> None:
    runner = graphed._runner
    assert runner is not None
    clips = _clips([2.2, 4.4], seed=13)
    batch_size, bucket = 2, runner.buckets[0]
    frames = encoder_frames(feature_tensor_frames(bucket, TINY), TINY)
    from_pcm = runner.run_graph(clips, batch_size, bucket)
    pcm_enc = runner.graph_encoder_output(batch_size, frames)
    # The int16 staging leaves the last batch's converted samples in the float32 input; stale values past
    # each clip's length must not matter, so a float32 replay over them gives the same result.
    from_float = runner.run_graph(_floats(clips), batch_size, bucket)
    float_enc = runner.graph_encoder_output(batch_size, frames)
    for i in range(len(clips)):
        assert from_pcm[i].tokens == from_float[i].tokens
        assert from_pcm[i].frames == from_float[i].frames
        assert from_pcm[i].durations == from_float[i].durations
        n = encoder_frames(clips[i].shape[0] // 160, TINY)
        torch.testing.assert_close(pcm_enc[i, :n], float_enc[i, :n], atol=BF16_ATOL, rtol=BF16_RTOL)
    eager = runner.run_eager_padded(_floats(clips), batch_size, bucket)[0]
    assert [item.tokens for item in eager] == [item.tokens for item in from_pcm]


def test_adapter_replays_graphs_and_falls_back_to_eager(graphed: ParakeetAdapter) -> None:
    before = graphed.stats()
    requests = [BatchInput(f"r{i}", clip, word_timestamps=True) for i, clip in enumerate(_clips([2.0, 4.0, 11.0], 7))]
    outputs = graphed.run_batch(requests)
    assert all(isinstance(o, Transcript) and o.text for o in outputs)
    mid = graphed.stats()
    assert mid.graph_replays == before.graph_replays + 1  # 3 clips -> batch 4, bucket 15 s
    assert mid.eager_batches == before.eager_batches
    long_clip = BatchInput("long", _pcm(16.5, 1))
    graphed.run_batch([long_clip])
    after = graphed.stats()
    assert after.eager_batches == mid.eager_batches + 1  # longer than the largest bucket
    many = [BatchInput(f"m{i}", clip) for i, clip in enumerate(_clips([1.0] * 6, 20))]
    graphed.run_batch(many)
    assert graphed.stats().graph_replays == after.graph_replays + 2  # split 4 + 2
    assert isinstance(after, ParakeetStats) and after.memory_bytes > 0


def test_graph_results_match_eager_adapter_text() -> None:
    clips = _clips([2.5, 3.5], seed=50)
    eager = _load({"cudaGraphs": False, "dtype": "fp32"})
    graph = _load({"dtype": "fp32", "batchSizes": [2], "lengthBucketsMs": [5000]})
    graph.warmup()
    requests = [BatchInput(f"r{i}", c) for i, c in enumerate(clips)]
    a = eager.run_batch(requests)
    b = graph.run_batch(requests)
    assert [o.text for o in a] == [o.text for o in b]  # type: ignore[union-attr]
    assert graph.stats().graph_replays == 1 and eager.stats().eager_batches == 1
    eager.close()
    graph.close()


def _assert_same_tokens_through_replay(reference: Dict[str, Any], candidate: Dict[str, Any], seed: int) -> None:
    """Two adapters (fp32, tiny) warmed up with CUDA graphs give the same texts for one batch of 3,
    the candidate by a single graph replay."""
    requests = [BatchInput(f"r{i}", c) for i, c in enumerate(_clips([2.5, 3.5, 1.2], seed=seed))]
    plain, other = _load(reference), _load(candidate)
    plain.warmup()
    other.warmup()
    assert [o.text for o in plain.run_batch(requests)] == [o.text for o in other.run_batch(requests)]  # type: ignore[union-attr]
    assert other.stats().graph_replays == 1
    plain.close()
    other.close()


def _assert_same_encoder_output(reference: str, candidate: str, seed: int) -> None:
    """The tiny model's encoder (fp32) with two attention implementations agrees on every valid frame."""
    model = build_model(TINY, seed=4)
    model.prepare_for_inference_(torch.device("cuda"), torch.float32)
    audio, lengths = pad_audio(_clips([2.0, 3.0], seed=seed), torch.device("cuda"))
    with torch.inference_mode():  # type: ignore[no-untyped-call]
        model.encoder.set_attention_impl(reference)
        expected, enc_len = model.encode(audio, lengths)
        model.encoder.set_attention_impl(candidate)
        got, _ = model.encode(audio, lengths)
    for i in range(2):
        n = int(enc_len[i])
        torch.testing.assert_close(got[i, :n], expected[i, :n], atol=2e-3, rtol=2e-3)


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="needs torch >= 2.0")
def test_compiled_decode_step_replays_the_same_tokens_as_the_eager_step() -> None:
    options: Dict[str, Any] = {"dtype": "fp32", "batchSizes": [4], "lengthBucketsMs": [5000]}
    _assert_same_tokens_through_replay(options, {**options, "compileDecodeStep": True}, seed=70)


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="needs torch >= 2.0")
def test_compiled_encoder_replays_the_same_tokens_as_the_eager_encoder() -> None:
    options: Dict[str, Any] = {"dtype": "fp32", "batchSizes": [1, 4], "lengthBucketsMs": [5000]}
    _assert_same_tokens_through_replay(options, {**options, "compileEncoder": True}, seed=80)


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="needs torch >= 2.0")
def test_load_compiles_and_runs_every_shape_and_warmup_only_captures() -> None:
    adapter = _load({"batchSizes": [1, 2], "lengthBucketsMs": [5000], "compileEncoder": True, "compileDecodeStep": True})
    runner = adapter._runner
    assert runner is not None
    # After load: every shape has run (compiled), no graph exists yet, and batches would run eagerly.
    assert runner.is_prepared and not runner.has_graphs and runner.graphs_captured == 0
    assert all(shape is None for _, shape in runner.plan([16000, 16000]))
    # torch >= 2.0 only (the installed torch may be older, hence no static import).
    counters: Any = importlib.import_module("torch._dynamo.utils").counters
    compiled_graphs = counters["stats"]["unique_graphs"]
    assert compiled_graphs > 0
    info = adapter.warmup()
    assert info.graphs_captured == 2 * 1 + 2 and runner.has_graphs
    # Nothing was left to compile under the warmup gate.
    assert counters["stats"]["unique_graphs"] == compiled_graphs
    clips = _clips([2.5, 1.5], seed=90)
    outputs = adapter.run_batch([BatchInput(f"r{i}", c) for i, c in enumerate(clips)])
    assert all(isinstance(o, Transcript) for o in outputs)
    assert adapter.stats().graph_replays == 1
    adapter.close()


@pytest.mark.skipif(not HAS_SDPA, reason="needs torch >= 2.0")
def test_sdpa_equals_manual_attention() -> None:
    _assert_same_encoder_output("manual", "sdpa", seed=60)


def test_probe_on_cuda() -> None:
    a = _load({})
    assert a.probe() is True
    a.close()
    hanging = _load({"simulateHang": "hang", "probeTimeoutMs": 100})
    start = time.monotonic()
    assert hanging.probe() is False
    assert time.monotonic() - start < 2.0
    hanging.close()


def test_full_configuration_smoke() -> None:
    a = ParakeetAdapter()
    options = {"config": "full", "device": "cuda", "batchSizes": [1, 4], "lengthBucketsMs": [15000]}
    info = a.load(LoadContext("gpu", "parakeet", options))
    assert info.parameters == count_parameters(a._config) == 617_825_926  # type: ignore[arg-type]
    assert 1.0e9 < info.memory_bytes < 2.0e9  # bf16 weights
    warm = a.warmup()
    assert warm.graphs_captured == 2 * 1 + 2
    outputs = a.run_batch([BatchInput(f"r{i}", c) for i, c in enumerate(_clips([12.0, 14.0, 9.0], 80))])
    assert all(isinstance(o, Transcript) and o.text for o in outputs)
    stats = a.stats()
    assert isinstance(stats, ParakeetStats) and stats.graph_replays == 1
    assert 1.5 < stats.tokens_per_audio_second < 6.5, stats
    a.close()


def _has_fp8_gpu() -> bool:
    return (
        FP8_AVAILABLE
        and hasattr(torch, "compile")
        and torch.cuda.is_available()
        and torch.cuda.get_device_capability() >= (8, 9)
    )


needs_fp8 = pytest.mark.skipif(not _has_fp8_gpu(), reason="needs torch >= 2.5 and a GPU of compute capability >= 8.9")

#: Both operands of every FP8 product are rounded to 3 mantissa bits (about 3.5 % of a product); in a
#: float32 emulation on the CPU the tiny encoder's output frames keep a cosine similarity of about
#: 0.998 to the bf16 encoder's.
FP8_ENCODER_MIN_COSINE = 0.99
#: torch._scaled_mm against the float32 product of the same dequantized operands: only the
#: accumulation (fast FP8 accumulation, another order) and the final rounding to bf16 differ.
FP8_PRODUCT_ATOL = 2e-2
FP8_PRODUCT_RTOL = 2e-2


@needs_fp8
def test_fp8_linear_equals_the_product_of_its_dequantized_operands() -> None:
    generator = torch.Generator(device="cuda").manual_seed(5)
    # 111 rows: M need not be a multiple of 16 (K and N must).
    x = torch.randn(3, 37, 1024, device="cuda", generator=generator).to(torch.bfloat16)
    weight = (0.05 * torch.randn(3072, 1024, device="cuda", generator=generator)).to(torch.bfloat16)
    bias = torch.randn(3072, device="cuda", generator=generator).to(torch.bfloat16)
    w = fp8_weight_from(weight, bias)
    with torch.inference_mode():  # type: ignore[no-untyped-call]
        got = fp8_linear(x, w)
        expected = fp8_linear_reference(x, w)
    assert got.dtype == torch.bfloat16 and got.shape == (3, 37, 3072)
    torch.testing.assert_close(got.float(), expected, atol=FP8_PRODUCT_ATOL, rtol=FP8_PRODUCT_RTOL)


@needs_fp8
def test_compiled_fp8_encoder_follows_the_bf16_encoder() -> None:
    model = build_model(TINY, seed=4)
    model.prepare_for_inference_(torch.device("cuda"), torch.bfloat16)
    audio, lengths = pad_audio(_clips([2.0, 3.0], seed=110), torch.device("cuda"))
    with torch.inference_mode():  # type: ignore[no-untyped-call]
        expected, enc_len = model.encode(audio, lengths)
    # As the adapter does at load: quantize the weights outside inference mode, then compile.
    model.encoder.set_matmul("fp8")
    model.encoder.compile_layers()
    with torch.inference_mode():  # type: ignore[no-untyped-call]
        got, _ = model.encode(audio, lengths)
    assert got.dtype == expected.dtype and not torch.equal(got, expected)  # the FP8 path did run
    for i in range(2):
        n = int(enc_len[i])
        cosines = F.cosine_similarity(got[i, :n].double(), expected[i, :n].double(), dim=-1)
        assert float(cosines.min()) >= FP8_ENCODER_MIN_COSINE, cosines


@needs_fp8
def test_fp8_graph_replay_equals_eager_on_the_same_shapes() -> None:
    adapter = _load({"batchSizes": [1, 4], "lengthBucketsMs": [5000], "compileEncoder": True, "matmul": "fp8"})
    try:
        adapter.warmup()
        _assert_replay_equals_eager_on_the_same_shapes(adapter, seed=120)
    finally:
        adapter.close()
