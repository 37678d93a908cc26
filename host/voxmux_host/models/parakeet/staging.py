"""Staging buffers: a batch's int16 clips copied into host memory ahead of its run, off the main thread.

The host stages each batch on its stager thread as it arrives (``ParakeetAdapter.stage_batch``), while
the main thread still runs the batch before it. The copy into pinned memory (about 46 MB for 32 x 45 s,
5 ms of one CPU core) then no longer leaves the GPU waiting between batches: the main thread only
enqueues one host-to-device copy out of the staged buffer.

A pool holds a fixed number of flat buffers (rows x width int16, pinned on CUDA); a batch of n clips
padded to w samples fills the first n x w of one, as a contiguous [n, w] tensor, so that it crosses to
the device in one copy (PyTorch copies a strided host tensor through a pageable temporary). :meth:`StagingPool.acquire`
blocks until one is free; a buffer comes back with :meth:`StagedClips.release`, on CUDA with the event
recorded after the last copy out of it, which the next user of that buffer waits for before writing.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch

#: Two buffers: one being read by the batch the GPU runs, one being filled for the next.
DEFAULT_SLOTS = 2


@dataclass
class StagedClips:
    """Clips in rows of one staging buffer, zero-padded to ``width`` samples, ready for one run.

    ``order`` lists the batch index of the clip in each row; ``shape`` is the (batch size, bucket) of
    the CUDA graphs it was staged for, or None for an eager run.
    """

    pool: "StagingPool"
    slot: int
    host: torch.Tensor  # [clips, width] int16, contiguous, a view of the slot's buffer
    order: List[int]
    lengths: List[int]
    shape: Optional[Tuple[int, int]]
    _released: bool = field(default=False, repr=False)

    def release(self, after: Optional[Any] = None) -> None:
        """Give the buffer back; ``after``: a CUDA event recorded after the last copy out of it.
        Idempotent (a batch that never ran is released without an event)."""
        if self._released:
            return
        self._released = True
        self.pool.give_back(self.slot, after)


class StagingPool:
    """``slots`` buffers of rows x width int16, allocated on first use (pinned when ``pinned``)."""

    def __init__(self, rows: int, width: int, pinned: bool, slots: int = DEFAULT_SLOTS) -> None:
        if rows < 1 or width < 1 or slots < 1:
            raise ValueError(f"Expected positive rows, width and slots: got {rows}, {width}, {slots}")
        self.rows = rows
        self.width = width
        self.pinned = pinned
        self._buffers: List[Optional[torch.Tensor]] = [None] * slots
        self._events: List[Optional[Any]] = [None] * slots
        self._free = list(range(slots))
        self._cond = threading.Condition()

    def fits(self, rows: int, width: int) -> bool:
        return rows <= self.rows and width <= self.width

    def acquire(self) -> Tuple[int, torch.Tensor]:
        """A free slot and its buffer, once the copies out of its last use are done (blocks until then)."""
        with self._cond:
            while not self._free:
                self._cond.wait()
            slot = self._free.pop(0)
            event, self._events[slot] = self._events[slot], None
        if event is not None:
            event.synchronize()
        buffer = self._buffers[slot]
        if buffer is None:
            buffer = torch.empty(self.rows * self.width, dtype=torch.int16)
            if self.pinned:
                buffer = buffer.pin_memory()
            self._buffers[slot] = buffer
        return slot, buffer

    def give_back(self, slot: int, after: Optional[Any]) -> None:
        with self._cond:
            self._events[slot] = after
            self._free.append(slot)
            self._cond.notify()

    def stage(
        self,
        clips: Sequence[npt.NDArray[np.int16]],
        order: Sequence[int],
        width: int,
        shape: Optional[Tuple[int, int]],
    ) -> StagedClips:
        """Copy ``clips[i]`` for i in ``order`` into the rows of a free buffer, zero-padded to ``width``."""
        if not self.fits(len(order), width):
            raise ValueError(f"Expected at most {self.rows} clips of at most {self.width} samples: got {len(order)} x {width}")
        slot, buffer = self.acquire()
        try:
            host = buffer[: len(order) * width].view(len(order), width)
            rows = host.numpy()
            lengths: List[int] = []
            for row, index in enumerate(order):
                clip = clips[index]
                n = int(clip.shape[0])
                rows[row, :n] = clip
                rows[row, n:] = 0
                lengths.append(n)
        except BaseException:
            self.give_back(slot, None)
            raise
        return StagedClips(self, slot, host, list(order), lengths, shape)
