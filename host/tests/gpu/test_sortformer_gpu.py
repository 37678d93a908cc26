"""Sortformer on CUDA (full configuration): bf16 against fp32, CUDA-graph replay against eager, a session
resumed from its state bytes against an undisturbed one, a batch begun before the previous one
finished against batches one after the other, and a timing print of the per-chunk latency of
15 s chunks for batch sizes 1 to 64 (``pytest -s`` shows it). Skipped without CUDA."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt
import pytest
import torch

from voxmux_host.model_api import LoadContext, SequenceInput, SequenceOutput
from voxmux_host.models.parakeet.random_init import speech_like_noise
from voxmux_host.models.sortformer.adapter import SortformerAdapter, graph_batch_sizes
from voxmux_host.models.sortformer.engine import new_context
from voxmux_host.models.sortformer.postprocess import PostState
from voxmux_host.models.sortformer.session import SessionState

from sortformer_support import two_batch_outputs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

RATE = 16000
CHUNK_S = 15
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
#: Chunks per session in the timing run; the first two fill the speaker cache and are not timed.
TIMED_CHUNKS = 8


def recording(seconds: float, seed: int) -> npt.NDArray[np.int16]:
    return np.clip(speech_like_noise(seconds, seed) * 32768 * 3, -32768, 32767).astype(np.int16)


def load(**options: Any) -> SortformerAdapter:
    adapter = SortformerAdapter()
    adapter.load(LoadContext("gpu", "diar", {"config": "full", "device": "cuda", **options}))
    adapter.warmup()
    return adapter


def step_predictions(adapter: SortformerAdapter, audios: List[npt.NDArray[np.int16]]) -> List[npt.NDArray[np.float32]]:
    engine = adapter._require_engine()
    config = adapter._config
    assert config is not None
    states = [SessionState(fingerprint="f", context=new_context(config, engine.storage_dtype), post=PostState(4),
                           samples=a.shape[0], pending=a.copy(), finished=True) for a in audios]
    return [np.concatenate(p) for p in engine.run(states)]


def test_bf16_predictions_follow_fp32() -> None:
    audios = [recording(40.0, 1), recording(33.0, 2)]
    fp32 = step_predictions(load(dtype="fp32", cudaGraphs=False, maxBatchSize=2), audios)
    bf16 = step_predictions(load(dtype="bf16", cudaGraphs=False, maxBatchSize=2), audios)
    for a, b in zip(fp32, bf16):
        diff = np.abs(a - b)
        print(f"bf16 vs fp32: mean {diff.mean():.4f}, max {diff.max():.4f} over {a.shape}")
        assert diff.mean() < 0.02 and diff.max() < 0.25


def test_graph_replay_equals_eager() -> None:
    audios = [recording(40.0, 3), recording(20.0, 4), recording(31.0, 5)]
    eager = step_predictions(load(cudaGraphs=False, maxBatchSize=4), audios)
    graphed_adapter = load(cudaGraphs=True, maxBatchSize=4)
    graphed = step_predictions(graphed_adapter, audios)
    assert graphed_adapter._require_engine().counters.graph_replays > 0
    for a, b in zip(eager, graphed):
        diff = np.abs(a - b)
        print(f"graph vs eager: mean {diff.mean():.5f}, max {diff.max():.5f}")
        assert diff.mean() < 5e-3 and diff.max() < 5e-2


def _session(adapter: SortformerAdapter, audio: npt.NDArray[np.int16], cuts: List[int], state: Optional[bytes],
             first_seq: int, last: bool) -> Tuple[List[Dict[str, Any]], bytes]:
    bounds = [0, *cuts, audio.shape[0]]
    outputs = []
    for k in range(len(bounds) - 1):
        result = adapter.run_sequence([SequenceInput(f"r{k}", "s", first_seq + k, audio[bounds[k]:bounds[k + 1]],
                                                     state, last and k == len(bounds) - 2, {})])[0]
        assert isinstance(result, SequenceOutput), result
        outputs.append(result.output)
        state = result.state
    assert state is not None
    return outputs, state


def test_state_resumed_on_a_fresh_instance_equals_undisturbed_on_cuda() -> None:
    audio = recording(75.0, 6)
    cut = [15 * RATE * k for k in range(1, 5)]
    undisturbed, final_state = _session(load(), audio, cut, None, 0, True)
    first, state = _session(load(), audio[: cut[1]], cut[:1], None, 0, False)
    rest, resumed = _session(load(), audio[cut[1]:], [c - cut[1] for c in cut[2:]], state, 2, True)
    assert first + rest == undisturbed
    assert resumed == final_state
    assert len(final_state) < 1 << 20


def test_the_next_batch_beginning_before_this_one_finishes_changes_nothing_on_cuda() -> None:
    """As the host runs it with two batches in flight: batch B's forward passes (graphs replayed, staging
    buffers reused) run before batch A's finish; each session's outputs and state bytes equal those of
    the batches run one after the other."""
    chunk = CHUNK_S * RATE
    audios = [recording(45.0, 40 + i) for i in range(6)]
    chunks = [[audio[k * chunk:(k + 1) * chunk] for k in range(3)] for audio in audios]
    interleaved_adapter = load(maxBatchSize=4)
    interleaved = two_batch_outputs(interleaved_adapter, chunks, 3, interleaved=True)
    assert interleaved_adapter._require_engine().counters.graph_replays > 0
    assert interleaved == two_batch_outputs(load(maxBatchSize=4), chunks, 3, interleaved=False)


def test_timing_per_chunk_for_batch_sizes() -> None:
    adapter = load(maxBatchSize=max(BATCH_SIZES))
    chunk = CHUNK_S * RATE
    audio = [recording(TIMED_CHUNKS * CHUNK_S, 100 + i) for i in range(max(BATCH_SIZES))]
    print(f"\nsortformer full, bf16, CUDA graphs, preset chunk-15s, {CHUNK_S} s chunks, "
          f"{torch.cuda.get_device_name()}")
    print("batch | ms per call (p50) | ms per call (min) | ms per chunk | forward ms | state bytes")
    for batch in BATCH_SIZES:
        states: List[Optional[bytes]] = [None] * batch
        times: List[float] = []
        forward: List[float] = []
        size = 0
        for k in range(TIMED_CHUNKS):
            items = [SequenceInput(f"r{i}-{k}", f"s{i}", k, audio[i][k * chunk:(k + 1) * chunk], states[i], False, {})
                     for i in range(batch)]
            torch.cuda.synchronize()
            start = time.perf_counter()
            results = adapter.run_sequence(items)
            elapsed = time.perf_counter() - start
            for i, result in enumerate(results):
                assert isinstance(result, SequenceOutput)
                states[i] = result.state
                size = max(size, len(result.state))
            if k >= 2:  # cache full and compressed from the second step on
                times.append(elapsed * 1000)
                forward.append(_forward_ms(adapter, batch))
        p50 = float(np.median(times))
        print(f"{batch:5d} | {p50:17.1f} | {min(times):17.1f} | {p50 / batch:12.2f} | {float(np.median(forward)):10.1f} "
              f"| {size}")


def _forward_ms(adapter: SortformerAdapter, batch: int) -> float:
    """One graph replay of this batch size (the model's share of a call)."""
    engine = adapter._require_engine()
    size = next(g for g in engine.graph_batch_sizes if g >= batch)
    graph = engine._graphs[size]
    torch.cuda.synchronize()
    start = time.perf_counter()
    graph.graph.replay()  # type: ignore[no-untyped-call]
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1000


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="needs torch.compile")
@pytest.mark.parametrize("options", [{"compileEncoder": True}, {"compileEncoder": True, "compileHead": True}],
                         ids=["encoder", "encoder-and-head"])
def test_compiled_parts_follow_eager_and_their_forward_time(options: Dict[str, Any]) -> None:
    audios = [recording(40.0, 7), recording(25.0, 8)]
    eager = step_predictions(load(cudaGraphs=False, maxBatchSize=2), audios)
    start = time.perf_counter()
    compiled_adapter = load(**options, maxBatchSize=64)
    print(f"\ncompiled warmup (compile and capture of {len(graph_batch_sizes(64))} batch sizes): "
          f"{time.perf_counter() - start:.1f} s")
    compiled = step_predictions(compiled_adapter, audios)
    for a, b in zip(eager, compiled):
        diff = np.abs(a - b)
        print(f"compiled vs eager: mean {diff.mean():.5f}, max {diff.max():.5f}")
        assert diff.mean() < 5e-3 and diff.max() < 5e-2
    for batch in BATCH_SIZES:
        times = [_forward_ms(compiled_adapter, batch) for _ in range(5)]
        print(f"compiled forward, batch {batch:2d}: {float(np.median(times)):.1f} ms")
