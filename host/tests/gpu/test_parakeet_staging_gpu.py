"""Parakeet on CUDA, batches staged ahead into pinned memory: the same tokens through a graph replay as
unstaged, the buffers come back, and staging overlaps a running batch. Skipped without CUDA."""
from __future__ import annotations

import threading
from typing import Iterator, List, Optional, Sequence

import numpy as np
import numpy.typing as npt
import pytest
import torch

from voxmux_host.model_api import LoadContext, BatchInput, Transcript
from voxmux_host.models.parakeet.adapter import ParakeetAdapter
from voxmux_host.models.parakeet.model import pcm16_from_float
from voxmux_host.models.parakeet.random_init import speech_like_noise
from voxmux_host.models.parakeet.staging import StagedClips

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture(scope="module")
def graphed() -> Iterator[ParakeetAdapter]:
    a = ParakeetAdapter()
    a.load(LoadContext("gpu", "parakeet", {"config": "tiny", "device": "cuda", "batchSizes": [1, 4], "lengthBucketsMs": [5000]}))
    a.warmup()
    yield a
    a.close()


def _requests(durations: List[float], seed: int) -> List[BatchInput]:
    clips: List[npt.NDArray[np.int16]] = [pcm16_from_float(speech_like_noise(d, seed + i)) for i, d in enumerate(durations)]
    return [BatchInput(f"r{i}", clip) for i, clip in enumerate(clips)]


def _texts(outputs: Sequence[object]) -> List[str]:
    return [o.text if isinstance(o, Transcript) else repr(o) for o in outputs]


def test_a_staged_batch_replays_to_the_same_tokens_as_an_unstaged_one(graphed: ParakeetAdapter) -> None:
    runner = graphed._runner
    assert runner is not None and runner.has_graphs
    requests = _requests([3.1, 4.7, 1.9], seed=90)
    unstaged = _texts(graphed.run_batch(requests))
    before = runner.counters.graph_replays
    staged = graphed.stage(requests)
    assert staged is not None and staged.shape == (4, runner.buckets[0]) and staged.host.is_pinned()
    assert _texts(graphed.begin(requests, staged)()) == unstaged
    assert runner.counters.graph_replays == before + 1
    # Both buffers are free again once the copies out of them are done.
    assert len(runner.staging._free) == 2


def test_staging_the_next_batch_while_one_runs_keeps_both_correct(graphed: ParakeetAdapter) -> None:
    # The stager thread fills the second buffer while the main thread replays out of the first, as
    # the host does; then a third batch reuses the first buffer after waiting for its copy event.
    runner = graphed._runner
    assert runner is not None
    batches = [_requests([2.0 + k, 1.0], seed=100 + 10 * k) for k in range(3)]
    expected = [_texts(graphed.run_batch(batch)) for batch in batches]
    staged: List[Optional[StagedClips]] = [graphed.stage(batches[0]), None, None]
    got: List[List[str]] = []
    for k in range(3):
        stager: Optional[threading.Thread] = None
        if k + 1 < 3:
            def stage(index: int = k + 1) -> None:
                staged[index] = graphed.stage(batches[index])

            stager = threading.Thread(target=stage)
            stager.start()
        got.append(_texts(graphed.begin(batches[k], staged[k])()))
        if stager is not None:
            stager.join(30)
    assert got == expected
