"""The contract between the host and a model adapter: one interface per work kind.

Every adapter implements :class:`Adapter` (``load``, ``warmup``, ``stats``, ``probe``, ``close``) and
declares the work kinds it serves in the class attribute ``work_kinds`` (a subset of 'batch',
'sequence', 'stream'; reported in LoadResult.workKinds). For each kind it declares it implements
that kind's interface, which the host checks once, at load:

- **batch** (:class:`BatchAdapter`): ``stage`` on the host's stager thread, ``begin`` on its main
  thread, and the :data:`BatchFinish` that ``begin`` returns on its finisher thread.
  :class:`SimpleBatchAdapter` is a base class for an adapter that runs a batch in one call.
- **sequence** (:class:`SequenceAdapter`): ``begin_sequence`` on the main thread, and the
  :data:`SequenceFinish` it returns on the finisher thread. The host keeps each session's state; the
  adapter gets it in and returns the new one. :class:`SimpleSequenceAdapter` is a base class for an
  adapter that runs a sequence batch in one call.
- **stream** (:class:`StreamAdapter`): ``open_stream`` returns a generator that the host steps on its
  main thread, one piece at a time, interleaved with other streams and with batches.
- **resources** (:class:`ResourceAdapter`), optional with any kind: named weights held resident.

Two optional methods, with any kind:

- ``catalog(self) -> List[Dict[str, Any]]``: what the adapter can serve (its voices), called once on the
  main thread right after ``load``; each entry ``{"name", "kind", "language", "sampleRate", "gender",
  "description"}`` (:func:`to_catalog`; a malformed catalogue fails the load with ``load_failed``). The
  host sends it in LoadResult.catalog; a resource that a stream names and the host never loaded is asked
  of the adapter by name (``load_resource(name, 'voice', {})``).
- ``resource_counters(self) -> Dict[str, float]``: cumulative residency counters (:data:`RESOURCE_COUNTER_KEYS`,
  :func:`to_resource_counters`), read on the heartbeat thread for every HeartbeatAck: cheap and
  thread-safe.

Threads: ``load``, ``warmup``, ``close``, ``begin``, ``begin_sequence``, the stream generators and the
resource calls run on the host's main thread, one at a time; the functions that ``begin`` and
``begin_sequence`` return run on the finisher thread, one at a time, in the order the calls ran,
while the main thread goes on. ``stats`` and ``resources`` are called on the heartbeat thread and
``probe`` on the probe thread while the model may run: they must be cheap, thread-safe, and must not
wait for the model.

Audio is the frame body as it arrived: 16 kHz mono 16-bit PCM, int16 views of the body (no
conversion); an adapter that needs floats converts it itself, as float value = int16 / 32768.

Failures: an item that fails alone is an :class:`ItemFailure` with a wire code (``messages.WIRE_ERROR_CODE_VALUES``)
in the item's place. ``errors.InstanceError(code, message)`` raised from a call fails every item of that
call with its code; any other exception fails them with ``model_failed`` (``out_of_memory`` for
``MemoryError`` or an exception class named ``OutOfMemoryError``), its traceback in the instance log.

Transcripts are the protocol's own :class:`~voxmux_host.messages.Transcript` (with ``Word`` and
``Segment``), which the host sends as they are: times in seconds, rounded to the millisecond
(:func:`seconds`), ``words`` only for a request that asked for them (``word_timestamps``); a segment's
``decoding`` (``SegmentDecoding``: its window's start, tokens, temperature, log-probability, compression ratio,
no-speech probability) from engines that decode Whisper's way, else None.
"""
from __future__ import annotations

import abc
import threading
from dataclasses import dataclass, field
from typing import (Any, Callable, ClassVar, Dict, Iterator, List, Literal, Optional, Protocol, Sequence, Tuple, Union,
                    runtime_checkable)

import numpy as np
from numpy.typing import NDArray

from .errors import InstanceError
from .messages import (BootStage, CatalogEntry, EngineCounter, ResourceCounters, ResourceInfo, Segment, SegmentDecoding,
                       Transcript, Word)
from .protocol import camel_case

__all__ = [
    'Adapter', 'AdapterStats', 'BatchAdapter', 'BatchFinish', 'BatchInput', 'BatchOutput', 'CatalogEntry',
    'ItemFailure', 'LoadContext', 'LoadInfo', 'RESOURCE_COUNTER_KEYS', 'ResourceAdapter', 'ResourceCounters',
    'ResourceInfo', 'ResourceLoad', 'Segment', 'SegmentDecoding', 'SequenceAdapter', 'SequenceFinish', 'SequenceInput',
    'SequenceOutput', 'SequenceResultItem', 'SimpleBatchAdapter', 'SimpleSequenceAdapter', 'StagedBatch',
    'StreamAdapter', 'StreamPiece', 'StreamRequest', 'Transcript', 'WORK_KINDS', 'WarmupInfo', 'Word', 'seconds',
    'to_catalog', 'to_resource_counters',
]

#: The work kinds an adapter may declare in ``work_kinds`` (LoadResult.workKinds).
WORK_KINDS: Tuple[str, ...] = ('batch', 'sequence', 'stream')


# ---------------------------------------------------------------------------------------------
# Common


@dataclass
class LoadContext:
    instance_id: str
    model: str
    options: Dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadInfo:
    device: str
    parameters: int = 0
    memory_bytes: int = 0
    #: The parts of the load the adapter timed, in order (``boot_stages.StageTimer.take()``).
    stages: Tuple[BootStage, ...] = ()


@dataclass
class WarmupInfo:
    graphs_captured: int = 0
    #: The parts of the warmup the adapter timed, in order (``boot_stages.StageTimer.take()``).
    stages: Tuple[BootStage, ...] = ()


@dataclass
class AdapterStats:
    """Cheap counters reported in every HeartbeatAck."""

    #: The fields of a subclass that are cumulative counts since the instance started (clips, tokens...): each
    #: goes up in every HeartbeatAck's ``engineCounters`` under its camelCase name, and reaches the metric
    #: ``voxmux_instance_engine_events_total``. Ratios and sizes are not counts: leave them out.
    ENGINE_COUNTERS: ClassVar[Tuple[str, ...]] = ()

    memory_bytes: int = 0
    eager_batches: int = 0
    graph_replays: int = 0
    #: Milliseconds spent in each stage of the model part since load, cumulative, for an adapter that
    #: times its own stages; the host logs each window's share on its 'batch pipeline' line (not sent
    #: in heartbeats).
    stage_ms: Dict[str, float] = field(default_factory=dict)

    def engine_counters(self) -> Tuple[EngineCounter, ...]:
        """The ENGINE_COUNTERS fields as the protocol's EngineCounters, named in camelCase."""
        return tuple(EngineCounter(camel_case(name), float(getattr(self, name))) for name in self.ENGINE_COUNTERS)


@dataclass(frozen=True)
class ItemFailure:
    """One item's failure, in its place among the results; the others still succeed."""

    code: str  # a wire code, see messages.WIRE_ERROR_CODE_VALUES
    message: str


def seconds(value: float) -> float:
    """A time as it travels: seconds rounded to the millisecond (short decimals print the same in Python
    and JavaScript)."""
    return round(float(value), 3)


@runtime_checkable
class Adapter(Protocol):
    """What every adapter implements, whatever it serves."""

    work_kinds: ClassVar[Tuple[str, ...]]

    def load(self, ctx: LoadContext) -> LoadInfo: ...

    def warmup(self) -> WarmupInfo: ...

    def stats(self) -> AdapterStats:
        """Heartbeat thread, while the model may run: read counters only."""
        ...

    def probe(self) -> bool:
        """A cheap device health check run on a timer; False marks the instance wedged.

        Called on its own thread, while the model may run, only after a successful load. A probe
        that does not return within the host's probe timeout also marks it wedged.
        """
        ...

    def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------
# batch


@dataclass
class BatchInput:
    """One request of a RunBatch."""

    request_id: str
    #: 16 kHz mono 16-bit PCM, shape [samples]; a view of the batch body (float value = int16 / 32768).
    audio: NDArray[np.int16]
    language: Optional[str] = None
    prompt: Optional[str] = None
    word_timestamps: bool = False
    #: 'transcribe' or 'translate' (into English); the gateway sends 'translate' only to adapters that can.
    task: str = 'transcribe'
    #: Sampling temperature from 0 (greedy) to 1; adapters that do not sample ignore it.
    temperature: float = 0.0
    #: The audio is one piece of a longer recording that the gateway cut at pauses (its long-audio pieces).
    piece: bool = False


#: One request's result: its transcript, or its failure.
BatchOutput = Union[Transcript, ItemFailure]
#: What ``begin`` leaves to do, called once on the finisher thread: one result per input, in input order.
#: It may use only what it was given and adapter state that no longer changes after ``load``.
BatchFinish = Callable[[], List[BatchOutput]]


class StagedBatch(Protocol):
    """What ``stage`` prepared for one batch; opaque to the host."""

    def release(self) -> None:
        """Give back what staging holds, for a batch that will never begin. Idempotent."""
        ...


@runtime_checkable
class BatchAdapter(Adapter, Protocol):
    """Independent requests that run together: RunBatch → BatchResult."""

    def stage(self, inputs: Sequence[BatchInput]) -> Optional[StagedBatch]:
        """Stager thread, as each batch arrives, in arrival order, while the main thread may still run
        an earlier one: copy the audio where the model reads it (pinned memory, say); None when
        nothing is staged. It may block (for a free staging buffer), but only on earlier batches. An
        exception here is logged and the batch begins unstaged."""
        ...

    def begin(self, inputs: Sequence[BatchInput], staged: Optional[StagedBatch]) -> BatchFinish:
        """Main thread: run the model's part of the batch, reading the audio from ``staged`` where
        given (it owns ``staged`` from here and releases it); return what builds the results. A batch
        the host drops after staging (its supervisor is gone) gets ``staged.release()`` instead."""
        ...


class SimpleBatchAdapter(abc.ABC):
    """A batch adapter that runs a batch in one call on the main thread: override :meth:`run` only
    (plus the common methods of :class:`Adapter`)."""

    work_kinds: ClassVar[Tuple[str, ...]] = ('batch',)

    @abc.abstractmethod
    def run(self, inputs: Sequence[BatchInput]) -> List[BatchOutput]:
        """One result per input, in input order."""

    def stage(self, inputs: Sequence[BatchInput]) -> Optional[StagedBatch]:
        return None

    def begin(self, inputs: Sequence[BatchInput], staged: Optional[StagedBatch]) -> BatchFinish:
        if staged is not None:
            staged.release()
        outputs = self.run(inputs)
        return lambda: outputs


# ---------------------------------------------------------------------------------------------
# sequence


@dataclass
class SequenceInput:
    """One item of a RunSequenceBatch: the next piece of one session."""

    request_id: str
    session_id: str
    seq: int  # the item's position in its session, from 0
    #: 16 kHz mono 16-bit PCM, a view of the frame body.
    audio: NDArray[np.int16]
    #: The session's state after its previous item; None for a new session.
    state: Optional[bytes]
    is_last: bool
    options: Dict[str, Any] = field(default_factory=dict)


@dataclass
class SequenceOutput:
    """An item's result (a JSON object) and the session's state after it (at most MAX_STATE_BYTES)."""

    output: Dict[str, Any]
    state: bytes


#: One item's result: its output and the session's new state, or its failure.
SequenceResultItem = Union[SequenceOutput, ItemFailure]
#: What ``begin_sequence`` leaves to do, called once on the finisher thread while the main thread may
#: already begin the next call (on other sessions): one result per item, in item order. It may use what
#: it was given, adapter state that no longer changes after ``load``, and adapter state it alone
#: changes (finish functions run one at a time).
SequenceFinish = Callable[[], List[SequenceResultItem]]


@runtime_checkable
class SequenceAdapter(Adapter, Protocol):
    """Ordered items of sessions: RunSequenceBatch → SequenceResult."""

    def begin_sequence(self, items: Sequence[SequenceInput]) -> SequenceFinish:
        """Main thread; at most one item per session, and none of a session whose previous item's finish
        has not run yet (the host waits for it). Run the model's part; return what builds the results
        (the host part that can overlap the next call's model part: state updates, outputs, state bytes)."""
        ...


class SimpleSequenceAdapter(abc.ABC):
    """A sequence adapter that runs a sequence batch in one call on the main thread: override
    :meth:`run_sequence` (plus the common methods of :class:`Adapter`, and ``work_kinds``)."""

    @abc.abstractmethod
    def run_sequence(self, items: Sequence[SequenceInput]) -> List[SequenceResultItem]:
        """One result per item, in item order."""

    def begin_sequence(self, items: Sequence[SequenceInput]) -> SequenceFinish:
        outputs = self.run_sequence(items)
        return lambda: outputs


# ---------------------------------------------------------------------------------------------
# stream


@dataclass
class StreamRequest:
    stream_id: str
    request_id: str
    resource: Optional[str]  # resident when the stream opens (the host loads it first)
    params: Dict[str, Any]
    body: bytes
    #: Set by the host's reader thread the moment a CancelStream arrives, while a step may be running:
    #: an adapter whose steps take long checks it and returns early. The host then ends the stream with
    #: stream_cancelled, whatever the generator returned.
    cancelled: threading.Event = field(default_factory=threading.Event)


@dataclass
class StreamPiece:
    """One chunk of a stream's output: adapter-specific facts (``meta``) and bytes."""

    meta: Dict[str, Any]
    data: bytes


@runtime_checkable
class StreamAdapter(Adapter, Protocol):
    """One request, many ordered chunks: StartStream → StreamChunk… → StreamEnd."""

    def open_stream(self, request: StreamRequest) -> Iterator[StreamPiece]:
        """Main thread: a generator of the stream's pieces, whose return value is the usage (a JSON
        object). The host calls ``next()`` once per step, only while the stream has credit, between
        other streams' steps and batches; it calls ``close()`` on a cancelled stream. Keep each step
        short: a cancel or a frame waits for the step that runs.

        What the stream holds (its resident voice) is taken in this call, not at its first step: the
        host may open other streams, and load their resources, before it steps this one; a failure to
        take it fails the open. ``close()`` may come before the first step, and a generator that has
        not started runs no ``finally`` on ``close()``: run such a generator to a first yield here
        (the vits adapter does)."""
        ...


# ---------------------------------------------------------------------------------------------
# resources


@dataclass
class ResourceLoad:
    """Where a loaded resource lives, its size, and where it came from ('resident': it already was)."""

    residency: Literal['device', 'host']
    bytes: int
    source: Literal['disk', 'host', 'resident']
    load_ms: int = 0


@runtime_checkable
class ResourceAdapter(Protocol):
    """Named resources an adapter holds (voices); optional with any work kind."""

    def load_resource(self, name: str, kind: str, source: Dict[str, Any]) -> ResourceLoad:
        """Main thread, in arrival order with the other work."""
        ...

    def evict_resource(self, name: str) -> int:
        """Main thread: free the resource; the bytes freed (0 when it was not resident)."""
        ...

    def resources(self) -> List[ResourceInfo]:
        """Heartbeat thread: what is resident now. Cheap and thread-safe."""
        ...


# ---------------------------------------------------------------------------------------------
# catalogue and resource counters (optional methods, any kind)

_CATALOG_KEYS: Tuple[str, ...] = ('name', 'kind', 'language', 'sampleRate', 'gender', 'description')

#: The keys of ``resource_counters()``: counts, then cumulative load times in milliseconds, then bytes.
RESOURCE_COUNTER_KEYS: Tuple[str, ...] = ('hits', 'misses', 'loadsFromDisk', 'loadsFromHost', 'evictions',
                                          'diskLoadMs', 'hostLoadMs', 'budgetBytes', 'residentBytes')
_COUNTER_TIMES = ('diskLoadMs', 'hostLoadMs')


def to_catalog(raw: Any) -> Tuple[CatalogEntry, ...]:
    """An adapter's ``catalog()`` as protocol records; InstanceError('load_failed') naming the first
    problem: not a list, an entry that is not an object, a missing or unknown key, a value of the wrong
    type, an empty name, or a name that appears twice."""
    if not isinstance(raw, (list, tuple)):
        raise InstanceError('load_failed', f'Expected catalog() to return a list of entries: got {type(raw).__name__}')
    entries: List[CatalogEntry] = []
    seen = set()
    for index, item in enumerate(raw):
        where = f'catalog()[{index}]'
        if isinstance(item, CatalogEntry):
            item = item.to_meta()
        if not isinstance(item, dict):
            raise InstanceError('load_failed', f'Expected {where} to be an object: got {type(item).__name__}')
        missing = [key for key in _CATALOG_KEYS if key not in item]
        unknown = sorted(set(item) - set(_CATALOG_KEYS))
        if missing or unknown:
            raise InstanceError('load_failed', f'Expected {where} to have exactly the keys {", ".join(_CATALOG_KEYS)}: '
                                               f'missing {missing}, unknown {unknown}')
        name, gender, rate = item['name'], item['gender'], item['sampleRate']
        texts = ('name', 'kind', 'language', 'description')
        bad = [key for key in texts if not isinstance(item[key], str)]
        if not isinstance(rate, int) or isinstance(rate, bool) or rate <= 0:
            bad.append('sampleRate')
        if gender is not None and not isinstance(gender, str):
            bad.append('gender')
        if bad:
            raise InstanceError('load_failed', f'Expected {where} to have string name, kind, language and description, '
                                               f'a positive integer sampleRate and a string or null gender: '
                                               f'{", ".join(bad)} are not ({item!r})')
        if name == '' or name in seen:
            raise InstanceError('load_failed', f'Expected {where} to have a unique non-empty name: got {name!r}')
        seen.add(name)
        entries.append(CatalogEntry(name, item['kind'], item['language'], rate, gender, item['description']))
    return tuple(entries)


def to_resource_counters(raw: Any) -> ResourceCounters:
    """An adapter's ``resource_counters()`` as the protocol record: missing keys are 0; ValueError for an
    unknown key or a value that is not a non-negative number. Counts and bytes are rounded to integers."""
    if not isinstance(raw, dict):
        raise ValueError(f'Expected resource_counters() to return a dict: got {type(raw).__name__}')
    unknown = sorted(set(raw) - set(RESOURCE_COUNTER_KEYS))
    if unknown:
        raise ValueError(f'Expected resource counter keys among {", ".join(RESOURCE_COUNTER_KEYS)}: got {unknown}')
    values: List[Union[int, float]] = []
    for key in RESOURCE_COUNTER_KEYS:
        value = raw.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float('inf'):
            raise ValueError(f'Expected resource counter {key} to be a finite non-negative number: got {value!r}')
        values.append(float(value) if key in _COUNTER_TIMES else int(round(value)))
    return ResourceCounters(*values)  # type: ignore[arg-type]
