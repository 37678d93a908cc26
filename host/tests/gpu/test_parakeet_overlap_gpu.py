"""Overlapped decoding on CUDA (overlapDecode): a batch decodes on the second stream while the next one's
encoder runs, in the other set of graphs; the tokens equal those of the plain runner. Skipped without
CUDA."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np
import numpy.typing as npt
import pytest
import torch

from voxmux_host.model_api import LoadContext, RequestInput, RequestOutput, WarmupInfo
from voxmux_host.models.parakeet.adapter import ParakeetAdapter
from voxmux_host.models.parakeet.model import pcm16_from_float
from voxmux_host.models.parakeet.random_init import speech_like_noise

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

OPTIONS: Dict[str, Any] = {"config": "tiny", "device": "cuda", "batchSizes": [1, 4], "lengthBucketsMs": [5000]}


def _clips(durations: List[float], seed: int) -> List[npt.NDArray[np.int16]]:
    return [pcm16_from_float(speech_like_noise(d, seed + i)) for i, d in enumerate(durations)]


def _batches() -> List[List[RequestInput]]:
    shapes = [[3.1, 4.7, 1.9], [2.2, 4.9, 0.7, 3.3], [1.1], [4.2, 2.8]]
    return [[RequestInput(f"b{k}r{i}", c) for i, c in enumerate(_clips(d, seed=200 + 10 * k))] for k, d in enumerate(shapes)]


@contextmanager
def _warmed(options: Dict[str, Any]) -> Iterator[Tuple[ParakeetAdapter, WarmupInfo]]:
    """An adapter loaded with ``options`` and warmed up (graphs captured), closed afterwards."""
    adapter = ParakeetAdapter()
    adapter.load(LoadContext("gpu", "parakeet", options))
    try:
        yield adapter, adapter.warmup()
    finally:
        adapter.close()


def _texts(outputs: List[Any]) -> List[str]:
    assert all(isinstance(o, RequestOutput) for o in outputs)
    return [o.text for o in outputs]


@pytest.fixture(scope="module")
def expected() -> List[List[str]]:
    with _warmed(OPTIONS) as (plain, _):
        return [_texts(plain.run_batch(batch)) for batch in _batches()]


def test_batches_begun_before_the_previous_one_decoded_give_the_plain_runner_s_tokens(expected: List[List[str]]) -> None:
    with _warmed({**OPTIONS, "overlapDecode": True}) as (adapter, info):
        runner = adapter._runner
        assert runner is not None and runner.overlapping and runner.decode_stream is not runner.stream
        assert info.graphs_captured == 2 * (2 * 1 + 2)  # two sets of (one encoder graph per batch size + one decode graph)
        a, b, c, d = _batches()
        # Two batches of size 4 in flight (sets 0 and 1), then a batch of size 1, then size 4 again,
        # which reuses set 0 only after batch a was collected.
        finish_a = adapter.begin_batch(a)
        finish_b = adapter.begin_batch(b)
        assert runner.is_busy
        got_a = _texts(finish_a())
        finish_c = adapter.begin_batch(c)
        finish_d = adapter.begin_batch(d)
        got = [got_a, _texts(finish_b()), _texts(finish_c()), _texts(finish_d())]
        assert got == expected
        assert not runner.is_busy
        assert adapter.stats().graph_replays == 4


def test_decodes_run_on_their_own_thread_before_anyone_collects_them(expected: List[List[str]]) -> None:
    # Batch d reuses batch a's set: it can begin only once a has decoded, which the runner's decode
    # thread does without finish_a being called first.
    with _warmed({**OPTIONS, "overlapDecode": True}) as (adapter, _):
        a, b, _, d = _batches()
        finish_a = adapter.begin_batch(a)
        finish_b = adapter.begin_batch(b)
        begun: List[Any] = []
        thread = threading.Thread(target=lambda: begun.append(adapter.begin_batch(d)), daemon=True)
        thread.start()
        thread.join(timeout=30)
        assert begun, "Expected batch d to begin before batch a was collected"
        assert [_texts(finish_a()), _texts(finish_b()), _texts(begun[0]())] == [expected[0], expected[1], expected[3]]


def test_staged_batches_overlap_too(expected: List[List[str]]) -> None:
    with _warmed({**OPTIONS, "overlapDecode": True}) as (adapter, _):
        a, b, _, _ = _batches()
        staged_a, staged_b = adapter.stage_batch(a), adapter.stage_batch(b)
        assert staged_a is not None and staged_b is not None
        finish_a = adapter.begin_batch(a, staged_a)
        finish_b = adapter.begin_batch(b, staged_b)
        assert [_texts(finish_a()), _texts(finish_b())] == expected[:2]


def test_the_full_configuration_overlapped_gives_the_plain_runner_s_texts() -> None:
    """The full model's products are large enough to use cuBLAS workspaces (the tiny model's are not):
    three batches of 16, two in flight, against the plain runner."""
    options: Dict[str, Any] = {"config": "full", "device": "cuda", "batchSizes": [16], "lengthBucketsMs": [5000]}
    batches = [
        [RequestInput(f"b{k}r{i}", c) for i, c in enumerate(_clips([4.5 - 0.2 * i for i in range(16)], seed=300 + 20 * k))]
        for k in range(3)
    ]
    with _warmed(options) as (plain, _):
        expected = [_texts(plain.run_batch(batch)) for batch in batches]
    with _warmed({**options, "overlapDecode": True}) as (adapter, _):
        finish_a = adapter.begin_batch(batches[0])
        finish_b = adapter.begin_batch(batches[1])
        got_a = _texts(finish_a())
        finish_c = adapter.begin_batch(batches[2])
        assert [got_a, _texts(finish_b()), _texts(finish_c())] == expected
