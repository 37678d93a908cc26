"""Staging buffers: a batch's int16 clips copied into host memory ahead of its run, off the main thread.

The host stages each batch on its stager thread as it arrives (``ParakeetAdapter.stage``), while
the main thread still runs the batch before it. The copy into pinned memory (about 46 MB for 32 x 45 s,
5 ms of one CPU core) then no longer leaves the GPU waiting between batches: the main thread only
enqueues one host-to-device copy out of the staged buffer.

A pool holds a fixed number of flat buffers (rows x width int16, pinned on CUDA); a batch of n clips
padded to w samples fills the first n x w of one, as a contiguous [n, w] tensor, so that it crosses to
the device in one copy (PyTorch copies a strided host tensor through a pageable temporary). :meth:`StagingPool.acquire`
blocks until one is free; a buffer comes back with :meth:`StagedClips.release`, on CUDA with the event
recorded after the last copy out of it, which the next user of that buffer waits for before writing.

The rest of this module moves a batch's audio onto the device, on the instance's stream:

- :class:`StaticInputs`: the input tensors the CUDA graphs of one batch size read (allocated before
  capture, rewritten for every replay), and their pinned host mirrors;
- :func:`copy_staged` and :func:`copy_clips`: a staged batch, or the clips themselves, into them;
- :func:`unstage_eager`: a staged batch as the eager path takes it.

Clips are int16 PCM, the wire format (float value = int16 / 32768), or float (reference input for tests
and tools); one batch holds one kind. int16 clips cross to the device as int16 (half the bytes of
float32) through pinned memory, and are converted to float32 on the device, outside the graphs, into the
float32 tensor that the encoder graphs read. A staged batch is already in pinned memory, padded to its
bucket: it crosses in one copy. Otherwise the main thread copies each clip into the pinned buffer of its
batch size first.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch

from .model import PCM16_SCALE, is_pcm16_batch

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


#: A plan's sub-batches: the clips' indices and the (batch size, bucket) of their graphs, or None (eager).
Plan = List[Tuple[List[int], Optional[Tuple[int, int]]]]


def staged_for(staged: StagedClips, groups: Plan, lengths: List[int]) -> bool:
    """Whether ``staged`` holds exactly the one sub-batch that ``groups`` plans for clips of ``lengths``."""
    if len(groups) != 1:
        return False
    order, shape = groups[0]
    return staged.order == order and staged.shape == shape and staged.lengths == [lengths[i] for i in order]


@dataclass
class StaticInputs:
    """The inputs of the graphs of one batch size (allocated before capture, reused by every replay)."""

    audio: torch.Tensor  # [B, max_samples] float32, device: the encoder graphs' input
    lengths: torch.Tensor  # [B] int64, device
    #: [B * max_samples] int16, device: a batch for bucket s lands in the first B * s as [B, s], then is
    #: scaled into `audio`. Flat, so that a staged batch's rows arrive in one contiguous copy.
    pcm: torch.Tensor
    pcm_host: torch.Tensor  # [B * max_samples] int16, pinned: the main thread's staging for `pcm`
    lengths_host: torch.Tensor  # pinned mirror of `lengths`

    @classmethod
    def allocate(cls, batch_size: int, max_samples: int, device: torch.device) -> "StaticInputs":
        return cls(
            audio=torch.zeros(batch_size, max_samples, dtype=torch.float32, device=device),
            lengths=torch.zeros(batch_size, dtype=torch.int64, device=device),
            pcm=torch.zeros(batch_size * max_samples, dtype=torch.int16, device=device),
            pcm_host=torch.zeros(batch_size * max_samples, dtype=torch.int16).pin_memory(),
            lengths_host=torch.zeros(batch_size, dtype=torch.int64).pin_memory(),
        )

    def fill_for_warmup(self, bucket: int) -> None:
        """Realistic inputs for the warm-up runs (lazy initialisation, library autotuning)."""
        generator = torch.Generator(device=self.audio.device).manual_seed(bucket)
        self.audio.normal_(0.0, 0.1, generator=generator)
        self.lengths.fill_(bucket)


#: Called once the copies out of a staging buffer are enqueued: an event recorded after them on CUDA,
#: None on the CPU (see :meth:`StagedClips.release`).
AfterCopies = Callable[[], Optional[Any]]


def copy_staged(inputs: StaticInputs, staged: StagedClips, batch_size: int, bucket: int, after_copies: AfterCopies) -> None:
    """A staged batch into the graphs' static inputs: one copy of its [n, bucket] rows, its lengths,
    then the scaling; the staging buffer goes back once the copy is done (an event)."""
    n = len(staged.order)
    lengths = inputs.lengths_host.numpy()
    lengths[:] = 0
    lengths[:n] = staged.lengths
    pcm = inputs.pcm[: batch_size * bucket].view(batch_size, bucket)
    pcm[:n].copy_(staged.host, non_blocking=True)
    staged.release(after_copies())
    # Rows n.. keep stale samples: their length is 0, so the front end zeroes them.
    torch.mul(pcm, PCM16_SCALE, out=inputs.audio[:, :bucket])
    inputs.lengths.copy_(inputs.lengths_host, non_blocking=True)


def copy_clips(inputs: StaticInputs, clips: Sequence[npt.NDArray[Any]], batch_size: int, bucket: int) -> None:
    """Copy clips and lengths into the graphs' static inputs, on the current stream.

    The pinned buffers are rewritten only after the previous replay was waited for (a graph run returns
    after its last event), so no copy still in flight reads them. Samples past a clip's length keep stale
    values: the front end zeroes everything at or beyond ``lengths``.
    """
    lengths = inputs.lengths_host.numpy()
    lengths[:] = 0
    if is_pcm16_batch(clips):
        host = inputs.pcm_host[: batch_size * bucket].view(batch_size, bucket)
        host_rows = host.numpy()
        pcm = inputs.pcm[: batch_size * bucket].view(batch_size, bucket)
        for row, clip in enumerate(clips):
            n = clip.shape[0]
            host_rows[row, :n] = clip
            lengths[row] = n
            pcm[row, :n].copy_(host[row, :n], non_blocking=True)
        # One kernel over the bucket, exact (see PCM16_SCALE); writes into the graphs' own input tensor.
        torch.mul(pcm, PCM16_SCALE, out=inputs.audio[:, :bucket])
    else:
        for row, clip in enumerate(clips):
            n = clip.shape[0]
            lengths[row] = n
            # Float clips are reference input, not the serving path: a pageable, synchronous copy.
            inputs.audio[row, :n].copy_(torch.tensor(clip, dtype=torch.float32))
    inputs.lengths.copy_(inputs.lengths_host, non_blocking=True)


def unstage_eager(staged: StagedClips, device: torch.device, after_copies: AfterCopies) -> Tuple[torch.Tensor, torch.Tensor]:
    """A staged batch as pad_audio() would give it: float32 [n, width] and lengths on the device;
    the staging buffer is released once nothing reads it any more."""
    pcm = staged.host.to(device, non_blocking=True)
    audio = pcm.to(torch.float32).mul_(PCM16_SCALE)  # a new tensor: the buffer is not read after this
    lengths = torch.tensor(staged.lengths, dtype=torch.int64).to(device, non_blocking=True)
    staged.release(after_copies())
    return audio, lengths
