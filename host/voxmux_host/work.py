"""The work an instance runs: what the host makes of each controller frame, where the results go
(the :class:`Sink` that ``host.py`` implements), and the work kinds of a loaded adapter.

``pipeline.py`` runs these items on its threads; ``host.py`` builds them from frames and turns
what reaches the sink back into frames.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, List, Optional, Protocol, Sequence, Tuple, Union, cast

import numpy as np
from numpy.typing import NDArray

from .errors import InstanceError
from .messages import SequenceItemStateIn
from .model_api import (
    WORK_KINDS,
    Adapter,
    BatchAdapter,
    BatchInput,
    BatchOutput,
    ItemFailure,
    ResourceAdapter,
    ResourceLoad,
    SequenceAdapter,
    SequenceResultItem,
    StagedBatch,
    StreamAdapter,
    StreamPiece,
    StreamRequest,
)


@dataclass
class BatchWork:
    """A RunBatch: its requests' audio are views of the frame body."""

    NAME: ClassVar[str] = 'RunBatch'
    correlation_id: int
    batch_id: str
    inputs: List[BatchInput]
    staged: Optional[StagedBatch] = None  # set by the stager


@dataclass
class SequenceWorkItem:
    request_id: str
    session_id: str
    seq: int
    audio: NDArray[np.int16]
    state_in: SequenceItemStateIn
    attached_state: bytes  # empty unless state_in is 'attached'
    is_last: bool
    options: Dict[str, Any]


@dataclass
class SequenceWork:
    """A RunSequenceBatch: at most one item per session."""

    NAME: ClassVar[str] = 'RunSequenceBatch'
    correlation_id: int
    batch_id: str
    items: List[SequenceWorkItem]


@dataclass
class EndSessionsWork:
    NAME: ClassVar[str] = 'EndSessions'
    correlation_id: int
    session_ids: Tuple[str, ...]


@dataclass
class StreamWork:
    """A StartStream; its chunks and its end carry this correlation id."""

    NAME: ClassVar[str] = 'StartStream'
    correlation_id: int
    request: StreamRequest
    credit_chunks: int


@dataclass
class LoadResourceWork:
    NAME: ClassVar[str] = 'LoadResource'
    correlation_id: int
    name: str
    kind: str
    source: Dict[str, Any]


@dataclass
class EvictResourceWork:
    NAME: ClassVar[str] = 'EvictResource'
    correlation_id: int
    name: str


@dataclass
class CallWork:
    """The host's own work on the main thread, in order with the rest (a load, a warmup)."""

    correlation_id: int
    run: Callable[[], None]
    NAME: ClassVar[str] = 'call'


@dataclass
class CloseWork:
    NAME: ClassVar[str] = 'Close'
    correlation_id: int


Work = Union[BatchWork, SequenceWork, EndSessionsWork, StreamWork, LoadResourceWork, EvictResourceWork, CallWork,
             CloseWork]


class Sink(Protocol):
    """Where results go (``host.py`` turns them into frames). Called on the main thread, except
    ``batch_done`` and ``sequence_done`` (finisher) and ``rejected`` (main or reader)."""

    def batch_done(self, work: BatchWork, outputs: Sequence[BatchOutput], compute_ms: float) -> None: ...

    def sequence_done(self, work: SequenceWork, outputs: Sequence[SequenceResultItem], compute_ms: float) -> None: ...

    def sessions_ended(self, work: EndSessionsWork) -> None: ...

    def stream_chunk(self, work: StreamWork, index: int, piece: StreamPiece) -> None: ...

    def stream_end(self, work: StreamWork, chunks: int, usage: Optional[Dict[str, Any]],
                   failure: Optional[ItemFailure]) -> None: ...

    def resource_loaded(self, work: LoadResourceWork, load: ResourceLoad) -> None: ...

    def resource_evicted(self, work: EvictResourceWork, bytes_freed: int) -> None: ...

    def rejected(self, work: Work, failure: ItemFailure) -> None:
        """The whole work item failed (an Error frame)."""
        ...

    def stopped(self, work: Optional[CloseWork]) -> None:
        """The pipeline has stopped: after a Close (``work``) or at end of input (None)."""
        ...


@dataclass(frozen=True)
class WorkKinds:
    """The interfaces of a loaded adapter, checked once against its declared ``work_kinds``."""

    names: Tuple[str, ...]
    batch: Optional[BatchAdapter]
    sequence: Optional[SequenceAdapter]
    stream: Optional[StreamAdapter]
    resources: Optional[ResourceAdapter]


def work_kinds_of(adapter: Adapter) -> WorkKinds:
    """The adapter's work kinds and the interface of each; InstanceError('load_failed') when it declares
    a kind it does not implement, or none."""
    names = tuple(adapter.work_kinds)
    unknown = [name for name in names if name not in WORK_KINDS]
    if not names or unknown:
        raise InstanceError('load_failed', f'Expected work_kinds to be a non-empty subset of {", ".join(WORK_KINDS)}: '
                                           f'got {names!r}')
    interfaces: Dict[str, type] = {'batch': BatchAdapter, 'sequence': SequenceAdapter, 'stream': StreamAdapter}
    missing = [name for name in names if not isinstance(adapter, interfaces[name])]
    if missing:
        raise InstanceError('load_failed', f'Expected the adapter to implement the interface of each of its work '
                                           f'kinds: {type(adapter).__name__} lacks {", ".join(missing)}')
    return WorkKinds(
        names,
        cast(BatchAdapter, adapter) if 'batch' in names else None,
        cast(SequenceAdapter, adapter) if 'sequence' in names else None,
        cast(StreamAdapter, adapter) if 'stream' in names else None,
        cast(ResourceAdapter, adapter) if isinstance(adapter, ResourceAdapter) else None,
    )
