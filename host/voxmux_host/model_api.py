"""The contract between the host loop and a model adapter.

An adapter turns batches of 16 kHz mono 16-bit PCM audio into transcripts. The audio is the
RunBatch body as it arrived (int16 views, no conversion); an adapter that needs floats
converts it itself, as float value = int16 / 32768. The host (``host.py``) owns the protocol,
threads and heartbeats; an adapter owns only the model.

Threads: ``load``, ``warmup``, ``run_batch`` and ``close`` are called from one thread, one at a
time. ``stats`` is called from the heartbeat thread and ``probe`` from the probe thread, both
while ``run_batch`` may be running, so they must be cheap, thread-safe and must not wait for
the model.

An adapter may also offer ``begin_batch(batch) -> BatchFinish`` (see :class:`SplitBatchAdapter`);
the host then calls it instead of ``run_batch``. It runs the model's part of the batch on the main
thread and returns the rest (texts, words, segments) as a function that the host calls once, on
its finisher thread, while the main thread already starts the next batch. That function may use
only what it was given and adapter state that no longer changes after ``load``.

An adapter with ``begin_batch`` may also offer ``stage_batch(batch) -> StagedBatch | None`` (see
:class:`StagingAdapter`). The host calls it on its stager thread as each batch arrives, in arrival
order, while the main thread may still run an earlier batch: it copies the batch's audio to where
the model reads it (pinned host memory, for example). The host then calls ``begin_batch(batch,
staged)`` with what it returned. It may block (until a staging buffer is free), but only on
batches that arrived before it. A batch the host drops after staging (its supervisor is gone)
gets ``staged.release()`` instead of ``begin_batch``. Raise ``errors.InstanceError(code, message)`` for a failure with a wire code; any
other exception from ``run_batch`` fails every request of the batch with ``model_failed``
(``out_of_memory`` for ``MemoryError`` or an exception class named ``OutOfMemoryError``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Union

import numpy as np
from numpy.typing import NDArray


@dataclass
class RequestInput:
    request_id: str
    #: 16 kHz mono 16-bit PCM, shape [samples]; a view of the batch body (float value = int16 / 32768).
    audio: NDArray[np.int16]
    language: Optional[str] = None
    prompt: Optional[str] = None
    word_timestamps: bool = False


@dataclass
class Word:
    word: str
    start: float  # seconds
    end: float  # seconds


@dataclass
class Segment:
    start: float  # seconds
    end: float  # seconds
    text: str


@dataclass
class RequestOutput:
    request_id: str
    text: str
    language: str
    duration_s: float
    segments: Optional[List[Segment]] = None
    words: Optional[List[Word]] = None


@dataclass
class RequestFailure:
    request_id: str
    code: str  # a wire code, see messages.WIRE_ERROR_CODE_VALUES
    message: str


@dataclass
class LoadInfo:
    device: str
    parameters: int = 0
    memory_bytes: int = 0


@dataclass
class WarmupInfo:
    graphs_captured: int = 0


@dataclass
class AdapterStats:
    """Cheap counters reported in every HeartbeatAck."""

    memory_bytes: int = 0
    eager_batches: int = 0
    graph_replays: int = 0


@dataclass
class LoadContext:
    instance_id: str
    model: str
    options: Dict[str, Any] = field(default_factory=dict)


class ModelAdapter(Protocol):
    def load(self, ctx: LoadContext) -> LoadInfo: ...

    def warmup(self) -> WarmupInfo: ...

    def run_batch(self, batch: Sequence[RequestInput]) -> List[RequestOutput | RequestFailure]:
        """One result per input, in input order; per-request failures do not fail the batch."""
        ...

    def stats(self) -> AdapterStats:
        """Called on the heartbeat thread, concurrently with run_batch: read counters only."""
        ...

    def probe(self) -> bool:
        """A cheap device health check run on a timer; False marks the instance wedged.

        Called on its own thread, concurrently with run_batch, only after a successful load. A
        probe that does not return within the host's probe timeout also marks it wedged.
        """
        ...

    def close(self) -> None: ...


#: What ``begin_batch`` leaves to do: one result per input, in input order (as ``run_batch`` returns).
BatchFinish = Callable[[], List[Union[RequestOutput, RequestFailure]]]


class SplitBatchAdapter(ModelAdapter, Protocol):
    def begin_batch(self, batch: Sequence[RequestInput]) -> BatchFinish:
        """Run the model on the batch (main thread); return the function that builds the results."""
        ...


class StagedBatch(Protocol):
    """What ``stage_batch`` prepared for one batch; opaque to the host."""

    def release(self) -> None:
        """Give back what staging holds, for a batch that will never begin. Idempotent."""
        ...


class StagingAdapter(ModelAdapter, Protocol):
    def stage_batch(self, batch: Sequence[RequestInput]) -> Optional[StagedBatch]:
        """Copy the batch's audio ahead of ``begin_batch`` (stager thread); None: nothing staged."""
        ...

    def begin_batch(self, batch: Sequence[RequestInput], staged: Optional[StagedBatch] = None) -> BatchFinish:
        """As :meth:`SplitBatchAdapter.begin_batch`, reading the audio from ``staged`` where given;
        it then owns ``staged`` and releases it."""
        ...
