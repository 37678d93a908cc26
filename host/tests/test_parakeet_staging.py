"""Staging a batch ahead of its run (CPU, tiny config): the pool, the runner and the adapter."""
from __future__ import annotations

import threading
import time
from typing import Any, Iterator, List

import numpy as np
import numpy.typing as npt
import pytest
import torch

from voxmux_host.model_api import LoadContext, BatchInput, Transcript
from voxmux_host.models.parakeet.adapter import ParakeetAdapter
from voxmux_host.models.parakeet.model import pcm16_from_float
from voxmux_host.models.parakeet.random_init import speech_like_noise
from voxmux_host.models.parakeet.staging import StagingPool


def _pcm(seconds: float, seed: int) -> npt.NDArray[np.int16]:
    return pcm16_from_float(speech_like_noise(seconds, seed))


def _free_slots(pool: StagingPool) -> int:
    return len(pool._free)  # noqa: SLF001 - the pool's own count of free buffers


# ---------------------------------------------------------------- the pool


def test_pool_stages_clips_in_the_given_row_order_zero_padded_and_contiguous() -> None:
    pool = StagingPool(rows=4, width=10, pinned=False)
    clips = [np.arange(1, 4, dtype=np.int16), np.arange(10, 16, dtype=np.int16)]
    staged = pool.stage(clips, order=[1, 0], width=8, shape=None)
    assert staged.host.shape == (2, 8) and staged.host.is_contiguous()
    assert staged.host.tolist() == [[10, 11, 12, 13, 14, 15, 0, 0], [1, 2, 3, 0, 0, 0, 0, 0]]
    assert (staged.order, staged.lengths, staged.shape) == ([1, 0], [6, 3], None)


def test_pool_padding_overwrites_what_the_buffer_held_before() -> None:
    pool = StagingPool(rows=2, width=6, pinned=False, slots=1)
    pool.stage([np.full(6, 7, dtype=np.int16)], order=[0], width=6, shape=None).release()
    again = pool.stage([np.full(2, 3, dtype=np.int16)], order=[0], width=6, shape=None)
    assert again.host.tolist() == [[3, 3, 0, 0, 0, 0]]


def test_pool_refuses_a_batch_larger_than_its_buffers_and_keeps_its_slots() -> None:
    pool = StagingPool(rows=2, width=6, pinned=False)
    assert not pool.fits(3, 6) and not pool.fits(2, 7) and pool.fits(2, 6)
    with pytest.raises(ValueError, match="at most 2 clips of at most 6 samples"):
        pool.stage([np.zeros(7, dtype=np.int16)], order=[0], width=7, shape=None)
    assert _free_slots(pool) == 2


def test_pool_gives_a_slot_back_when_a_clip_does_not_fit_its_row() -> None:
    pool = StagingPool(rows=2, width=6, pinned=False, slots=1)
    with pytest.raises(ValueError):
        pool.stage([np.zeros(5, dtype=np.int16)], order=[0], width=4, shape=None)
    assert _free_slots(pool) == 1


def test_acquire_waits_for_a_released_buffer_and_release_is_idempotent() -> None:
    pool = StagingPool(rows=1, width=4, pinned=False, slots=2)
    clip = [np.ones(4, dtype=np.int16)]
    first = pool.stage(clip, [0], 4, None)
    pool.stage(clip, [0], 4, None)
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pool.stage(clip, [0], 4, None)))
    waiter.start()
    time.sleep(0.2)
    assert got == [] and waiter.is_alive()  # both buffers are taken
    first.release()
    first.release()
    waiter.join(5)
    assert len(got) == 1 and got[0].slot == first.slot
    assert _free_slots(pool) == 0  # the second release did not free the slot twice


# ---------------------------------------------------------------- the runner and the adapter


@pytest.fixture(scope="module")
def adapter() -> Iterator[ParakeetAdapter]:
    torch.set_num_threads(2)
    a = ParakeetAdapter()
    a.load(LoadContext("i0", "parakeet", {"config": "tiny", "device": "cpu", "seed": 5, "batchSizes": [1, 2, 4]}))
    a.warmup()
    yield a
    a.close()


def _texts(outputs: List[Any]) -> List[str]:
    return [o.text if isinstance(o, Transcript) else f"failed: {o.code}" for o in outputs]


def test_a_staged_batch_gives_the_same_results_and_frees_its_buffer(adapter: ParakeetAdapter) -> None:
    requests = [BatchInput(f"r{i}", _pcm(d, 40 + i)) for i, d in enumerate([2.0, 0.7, 1.3])]
    runner = adapter._runner  # noqa: SLF001
    assert runner is not None
    staged = adapter.stage(requests)
    assert staged is not None
    assert staged.order == [1, 2, 0]  # shortest first, as the runner plans its sub-batches
    assert _free_slots(runner.staging) == 1
    outputs = adapter.begin(requests, staged)()
    assert _free_slots(runner.staging) == 2
    assert _texts(outputs) == _texts(adapter.run_batch(requests))
    assert all(isinstance(o, Transcript) and o.text for o in outputs)


def test_a_batch_with_an_invalid_request_is_not_staged_and_still_runs(adapter: ParakeetAdapter) -> None:
    requests = [BatchInput("ok", _pcm(1.0, 50)), BatchInput("empty", np.zeros(0, dtype=np.int16))]
    assert adapter.stage(requests) is None
    assert _texts(adapter.begin(requests)())[1] == "failed: invalid_audio"


def test_staging_that_does_not_match_the_batch_run_is_released_and_ignored(adapter: ParakeetAdapter) -> None:
    runner = adapter._runner  # noqa: SLF001
    assert runner is not None
    other = [BatchInput("x", _pcm(0.5, 60))]
    requests = [BatchInput("r", _pcm(1.5, 61))]
    staged = adapter.stage(other)
    outputs = adapter.begin(requests, staged)()
    assert _free_slots(runner.staging) == 2
    assert _texts(outputs) == _texts(adapter.run_batch(requests))


def test_batches_the_runner_would_split_are_not_staged(adapter: ParakeetAdapter) -> None:
    runner = adapter._runner  # noqa: SLF001
    assert runner is not None
    five = [_pcm(0.5, 70 + i) for i in range(5)]  # more than the largest batch size, 4
    assert runner.stage(five) is None
    assert runner.stage([np.zeros(800, dtype=np.float32)]) is None  # float reference clips
    assert _free_slots(runner.staging) == 2


def test_a_staged_batch_whose_run_fails_still_frees_its_buffer(
    adapter: ParakeetAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = adapter._runner  # noqa: SLF001
    assert runner is not None
    requests = [BatchInput("r", _pcm(1.0, 80))]
    staged = adapter.stage(requests)
    assert staged is not None and _free_slots(runner.staging) == 1

    def failing(*args: Any) -> Any:
        raise RuntimeError("the model failed on purpose")

    monkeypatch.setattr(runner, "_run", failing)
    with pytest.raises(RuntimeError, match="on purpose"):
        adapter.begin(requests, staged)
    assert _free_slots(runner.staging) == 2
