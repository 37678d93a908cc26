"""The instance process: the protocol around one model adapter.

``InstanceHost`` handles Hello, LoadRequest, WarmupRequest and Close, turns the other controller
frames into work for the pipeline (``pipeline.py``: the reader, stager, main and finisher threads) and
the pipeline's results into host frames, answers heartbeats, and runs the health probe:

- **reader** (the pipeline's) reads and decodes frames from fd 3 through :meth:`InstanceHost._receive`.
  Heartbeat is answered there, at once, without waiting for the model; StreamCredit and CancelStream
  go to the pipeline's stream controls at once too; every other message becomes work, in arrival
  order. A malformed frame ends the process with exit code 3; end of input ends it with exit code 0.
- **main** (the pipeline's) runs the work in arrival order; only it calls the adapter's ``load``,
  ``warmup``, ``begin``, ``begin_sequence``, stream generators, resource calls and ``close``; the
  pipeline's finisher calls the functions that ``begin`` and ``begin_sequence`` return.
- **probe** (after a successful load) calls ``adapter.probe()`` every ``probe_interval_ms`` on
  a helper thread and waits at most ``probe_timeout_ms``. A False, an exception or a timeout
  marks the instance wedged for good: every later HeartbeatAck says ``state: wedged`` and the
  supervisor replaces the instance.

A lock guards fd 4 so that frames from different threads never interleave.

The threads share one GIL. A thread that wakes from a wait that released it (a CUDA event, a socket
read) gets it back only after the running thread reaches the interpreter's switch interval, 5 ms by
default. The main thread launches each batch and wakes dozens of times per batch to queue the next
decode chunk, and any of that may fall while the finisher builds the last batch's texts in Python,
so the host runs with GIL_SWITCH_INTERVAL_S instead (``__main__`` sets it;
``host/bench_switch_interval.py`` measures the difference). For the same reason the reader takes
each frame part off its socket in one read (``input_stream.py``), not one socket buffer at a time.

End of input without a Close means the supervisor is gone or is destroying the instance:
queued work is dropped, and running work is abandoned (the process exits at once). After a
Close, end of input changes nothing: queued work still finishes and Closed is still sent.
"""
from __future__ import annotations

import fcntl
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Dict, List, Mapping, NoReturn, Optional, Sequence, Tuple, Union

import numpy as np

from . import __version__
from .errors import InstanceError
from .log import Logger
from .messages import (
    CONTROLLER_TAGS,
    LOAD_RESULT_WORK_KIND_VALUES,
    WIRE_ERROR_CODE_VALUES,
    BatchResult,
    BootStage,
    CancelStream,
    Close,
    Closed,
    EndSessions,
    Error,
    EvictResource,
    Heartbeat,
    HeartbeatAck,
    HeartbeatAckState,
    Hello,
    HostMessage,
    ItemResult,
    LoadRequest,
    LoadResource,
    LoadResult,
    LoadResultWorkKind,
    CatalogEntry,
    ResourceCounters,
    ResourceEvicted,
    ResourceInfo,
    ResourceLoaded,
    RunBatch,
    RunSequenceBatch,
    SequenceItemResult,
    SequenceResult,
    SessionsEnded,
    StartStream,
    StreamChunk,
    StreamCredit,
    StreamEnd,
    WarmupRequest,
    WarmupResult,
    WireError,
    WireErrorCode,
)
from .model_api import (
    Adapter,
    AdapterStats,
    BatchInput,
    BatchOutput,
    ItemFailure,
    LoadContext,
    ResourceLoad,
    SequenceOutput,
    SequenceResultItem,
    StreamPiece,
    StreamRequest,
    to_catalog,
    to_resource_counters,
)
from .pipeline import (
    EXIT_CRASHED,
    EXIT_OK,
    FINISHER_DRAIN_TIMEOUT_S,
    Pipeline,
    PipelineDeps,
    PipelineOptions,
    code_for_exception,
)
from .work import (
    BatchWork,
    CallWork,
    CloseWork,
    EndSessionsWork,
    EvictResourceWork,
    LoadResourceWork,
    SequenceWork,
    SequenceWorkItem,
    StreamWork,
    Work,
    work_kinds_of,
)
from .pipeline_stats import DEFAULT_EVERY, DEFAULT_INTERVAL_S
from .protocol import (
    PROTOCOL_VERSION,
    ByteInput,
    ProtocolError,
    encode_message,
    from_frame,
    join_states,
    read_frame,
    split_sequence_body,
)
from .registry import ADAPTERS, AdapterFactory, adapter_names, create_adapter

__all__ = [
    'DEFAULT_PROBE_INTERVAL_MS', 'DEFAULT_PROBE_TIMEOUT_MS', 'EXIT_BAD_ARGUMENTS', 'EXIT_BAD_FRAME', 'EXIT_CRASHED',
    'EXIT_OK', 'FINISHER_DRAIN_TIMEOUT_S', 'GIL_SWITCH_INTERVAL_S', 'HostDeps', 'HostOptions', 'InstanceHost',
    'split_batch', 'split_sequence',
]

EXIT_BAD_ARGUMENTS = 2
EXIT_BAD_FRAME = 3
EXIT_LOAD_FAILED = 4  # reserved by the protocol; this host reports load failures as Error frames

DEFAULT_PROBE_INTERVAL_MS = 5000
DEFAULT_PROBE_TIMEOUT_MS = 2000

#: sys.setswitchinterval for the host process: how long a thread that wakes (the main thread, to queue
#: the next decode chunk) may wait for the GIL while another thread runs Python (the finisher).
GIL_SWITCH_INTERVAL_S = 0.0005


@dataclass(frozen=True)
class HostOptions:
    adapter: str
    probe_interval_ms: int = DEFAULT_PROBE_INTERVAL_MS  # 0 turns the probe off
    probe_timeout_ms: int = DEFAULT_PROBE_TIMEOUT_MS
    #: Batches and seconds per 'batch pipeline' log line, at most (pipeline_stats.py).
    pipeline_log_every: int = DEFAULT_EVERY
    pipeline_log_interval_s: float = DEFAULT_INTERVAL_S


@dataclass
class HostDeps:
    input: ByteInput  # controller frames (fd 3)
    output_fd: int  # host frames (fd 4)
    log: Logger
    registry: Mapping[str, AdapterFactory] = field(default_factory=lambda: ADAPTERS)
    exit: Callable[[int], NoReturn] = os._exit
    clock: Callable[[], float] = time.monotonic  # seconds


class InstanceHost:
    def __init__(self, options: HostOptions, deps: HostDeps) -> None:
        self._options = options
        self._input = deps.input
        self._output_fd = deps.output_fd
        self._log = deps.log
        self._registry = deps.registry
        self._exit = deps.exit
        self._clock = deps.clock

        self._write_lock = threading.Lock()
        self._wedged_lock = threading.Lock()
        self._is_wedged = False  # guarded by _wedged_lock
        self._has_warned_counters = False  # heartbeat thread only

        self._adapter: Optional[Adapter] = None
        self._model = ''
        self._load_lock_file: Optional[BinaryIO] = None
        self._pipeline = Pipeline(
            PipelineOptions(options.pipeline_log_every, options.pipeline_log_interval_s),
            PipelineDeps(receive=self._receive, sink=self, log=self._log, exit=self._flush_and_exit,
                         clock=self._clock))

    # -- entry point -----------------------------------------------------------------------

    def run(self) -> int:
        """Send Hello, then run the pipeline until Close or end of input."""
        self._send(Hello(PROTOCOL_VERSION, __version__, os.getpid(), tuple(adapter_names(self._registry))))
        self._log.info('instance started', adapter=self._options.adapter, pid=os.getpid())
        return self._pipeline.run()

    # -- reader thread: frames to work -----------------------------------------------------

    def _receive(self) -> Optional[Work]:
        """The next work item from fd 3; None at end of input. Heartbeats, grants and cancels are
        handled here, at once."""
        while True:
            try:
                frame = read_frame(self._input)
                if frame is None:
                    return None
                if frame.type not in CONTROLLER_TAGS:
                    raise ProtocolError(f'Expected a controller message: got type 0x{frame.type:02X}')
                message = from_frame(frame)
            except ProtocolError as err:
                self._fail_bad_frame(err)
            except OSError as err:
                self._log.warn('input failed', err=err)
                return None
            correlation_id = frame.correlation_id
            if isinstance(message, Heartbeat):
                self._answer_heartbeat(correlation_id, message)
            elif isinstance(message, (StreamCredit, CancelStream)):
                if self._pipeline.kinds.stream is None:
                    self._send(Error('unsupported_option', f'This instance does not handle {type(message).__name__} messages',
                                     None), correlation_id)
                elif isinstance(message, StreamCredit):
                    self._pipeline.grant(message.stream_id, message.chunks)
                else:
                    self._pipeline.cancel(message.stream_id)
            elif isinstance(message, RunBatch):
                return BatchWork(correlation_id, message.batch_id, split_batch(message))
            elif isinstance(message, RunSequenceBatch):
                return SequenceWork(correlation_id, message.batch_id, split_sequence(message))
            elif isinstance(message, StartStream):
                request = StreamRequest(message.stream_id, message.request_id, message.resource, dict(message.params),
                                        bytes(message.body))
                return StreamWork(correlation_id, request, message.credit_chunks)
            elif isinstance(message, EndSessions):
                return EndSessionsWork(correlation_id, message.session_ids)
            elif isinstance(message, LoadResource):
                return LoadResourceWork(correlation_id, message.name, message.kind, dict(message.source))
            elif isinstance(message, EvictResource):
                return EvictResourceWork(correlation_id, message.name)
            elif isinstance(message, LoadRequest):
                return CallWork(correlation_id, _bind(self._load, correlation_id, message))
            elif isinstance(message, WarmupRequest):
                return CallWork(correlation_id, _bind(self._warmup, correlation_id))
            elif isinstance(message, Close):
                return CloseWork(correlation_id)
            else:
                raise AssertionError(f'Unexpected controller message: {message!r}')

    def _fail_bad_frame(self, err: ProtocolError) -> NoReturn:
        self._log.error('bad frame', code=err.code, err=err)
        try:
            self._send(Error('bad_frame', err.message, None))
        except Exception:  # noqa: BLE001 - the process exits with EXIT_BAD_FRAME regardless
            pass
        self._flush_and_exit(EXIT_BAD_FRAME)

    def _answer_heartbeat(self, correlation_id: int, beat: Heartbeat) -> None:
        snapshot = self._pipeline.snapshot()
        state: HeartbeatAckState
        with self._wedged_lock:
            is_wedged = self._is_wedged
        if is_wedged:
            state = 'wedged'
        elif snapshot.busy_ms is not None:
            state = 'busy'
        else:
            state = 'idle'
        stats = self._adapter_stats()
        self._send(HeartbeatAck(beat.seq, state, snapshot.busy_ms or 0, snapshot.queued_batches, stats.memory_bytes,
                                stats.eager_batches, stats.graph_replays, snapshot.sessions, snapshot.streams,
                                self._adapter_resources(), self._resource_counters(), stats.engine_counters()),
                   correlation_id)

    def _adapter_stats(self) -> AdapterStats:
        adapter = self._adapter
        if adapter is None:
            return AdapterStats()
        try:
            return adapter.stats()
        except Exception as err:  # noqa: BLE001 - a heartbeat must be answered even if stats fail
            self._log.warn('adapter stats failed', err=err)
            return AdapterStats()

    def _adapter_resources(self) -> Tuple[ResourceInfo, ...]:
        adapter = self._pipeline.kinds.resources
        if adapter is None:
            return ()
        try:
            return tuple(adapter.resources())
        except Exception as err:  # noqa: BLE001 - a heartbeat must be answered even if this fails
            self._log.warn('adapter resources failed', err=err)
            return ()

    def _resource_counters(self) -> Optional[ResourceCounters]:
        """The adapter's ``resource_counters()``; None when it has none, or when they fail (warned once:
        the heartbeat runs every few hundred milliseconds)."""
        read = getattr(self._adapter, 'resource_counters', None)
        if read is None:
            return None
        try:
            return to_resource_counters(read())
        except Exception as err:  # noqa: BLE001 - a heartbeat must be answered even if this fails
            if not self._has_warned_counters:
                self._has_warned_counters = True
                self._log.warn('adapter resource counters failed', err=err)
            return None

    # -- main thread: load, warmup ---------------------------------------------------------

    def _load(self, correlation_id: int, request: LoadRequest) -> None:
        log = self._log.child(model=request.model, instanceId=request.instance_id)
        if self._adapter is not None:
            self._send(Error('load_failed', f"Expected one LoadRequest: model '{self._model}' is already loaded",
                             None), correlation_id)
            return
        if request.adapter != self._options.adapter:
            self._send(Error('load_failed', f"Expected adapter '{self._options.adapter}': got '{request.adapter}'",
                             None), correlation_id)
            return
        lock_file: Optional[BinaryIO] = None
        try:
            if request.load_lock_path is not None:
                lock_file = self._acquire_load_lock(request.load_lock_path, log)
            started = self._clock()
            adapter = create_adapter(request.adapter, self._registry)
            import_stage = BootStage('import', round((self._clock() - started) * 1000, 3), 0)
            kinds = work_kinds_of(adapter)
            info = adapter.load(LoadContext(request.instance_id, request.model, dict(request.options)))
            load_ms = int((self._clock() - started) * 1000)
            stages = (import_stage, *info.stages)
            catalog = _catalog_of(adapter)
        except InstanceError as err:
            _release_lock(lock_file)
            log.error('load failed', code=err.code, err=err)
            self._send(Error(_wire_code(err.code), err.message, None), correlation_id)
            return
        except Exception as err:  # noqa: BLE001 - any adapter failure is a load failure
            _release_lock(lock_file)
            log.error('load failed', code='load_failed', err=err)
            self._send(Error('load_failed', f'The model failed to load: {type(err).__name__}: {err}', None),
                       correlation_id)
            return
        except BaseException:
            _release_lock(lock_file)
            raise
        # The lock stays held through warmup: CUDA graph capture must not overlap another
        # instance's load or capture on the same machine (docs/protocol.md, Lifecycle).
        self._load_lock_file = lock_file
        self._adapter = adapter
        self._model = request.model
        self._pipeline.bind(kinds)
        log.info('model loaded', device=info.device, durationMs=load_ms, memoryBytes=info.memory_bytes,
                 workKinds=list(kinds.names), catalogEntries=len(catalog), stages=_stage_fields(stages))
        work_kinds: Tuple[LoadResultWorkKind, ...] = tuple(
            kind for kind in LOAD_RESULT_WORK_KIND_VALUES if kind in kinds.names)
        self._send(LoadResult(request.model, info.device, info.parameters, info.memory_bytes, load_ms, work_kinds,
                              catalog, stages), correlation_id)
        if self._options.probe_interval_ms > 0:
            threading.Thread(target=self._probe_loop, args=(adapter,), name='probe', daemon=True).start()

    def _release_load_lock(self) -> None:
        lock_file = self._load_lock_file
        self._load_lock_file = None
        _release_lock(lock_file)

    def _acquire_load_lock(self, path: str, log: Logger) -> BinaryIO:
        try:
            lock_file = open(path, 'ab')
        except OSError as err:
            raise InstanceError('load_failed', f'Cannot open the load lock {path}: {err.strerror}') from err
        started = self._clock()
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
        log.info('load lock acquired', waitedMs=int((self._clock() - started) * 1000))
        return lock_file

    def _warmup(self, correlation_id: int) -> None:
        adapter = self._adapter
        if adapter is None:
            self._send(Error('model_failed', 'Expected a loaded model before WarmupRequest: got none', None),
                       correlation_id)
            return
        started = self._clock()
        try:
            info = adapter.warmup()
        except InstanceError as err:
            self._release_load_lock()
            self._log.error('warmup failed', code=err.code, err=err)
            self._send(Error(_wire_code(err.code), err.message, None), correlation_id)
            return
        except Exception as err:  # noqa: BLE001 - reported as model_failed, traceback logged
            self._release_load_lock()
            code = _wire_code(code_for_exception(err))
            self._log.error('warmup failed', code=code, err=err)
            self._send(Error(code, f'Warmup failed: {type(err).__name__}', None), correlation_id)
            return
        self._release_load_lock()
        warmup_ms = int((self._clock() - started) * 1000)
        self._log.info('model warmed up', durationMs=warmup_ms, graphsCaptured=info.graphs_captured,
                       stages=_stage_fields(info.stages))
        self._send(WarmupResult(warmup_ms, info.graphs_captured, tuple(info.stages)), correlation_id)

    # -- results to frames (the pipeline's Sink) -------------------------------------------

    def batch_done(self, work: BatchWork, outputs: Sequence[BatchOutput], compute_ms: float) -> None:
        results = [ItemResult(given.request_id, _wire_error(output), None) if isinstance(output, ItemFailure)
                   else ItemResult(given.request_id, None, output) for given, output in zip(work.inputs, outputs)]
        self._send(BatchResult(work.batch_id, tuple(results), compute_ms), work.correlation_id)

    def sequence_done(self, work: SequenceWork, outputs: Sequence[SequenceResultItem], compute_ms: float) -> None:
        results: List[SequenceItemResult] = []
        states: List[bytes] = []
        for item, output in zip(work.items, outputs):
            if isinstance(output, SequenceOutput):
                results.append(SequenceItemResult(item.request_id, item.session_id, item.seq, None, output.output,
                                                  len(output.state)))
                states.append(output.state)
            else:
                results.append(SequenceItemResult(item.request_id, item.session_id, item.seq, _wire_error(output),
                                                  None, 0))
        self._send(SequenceResult(work.batch_id, tuple(results), compute_ms, join_states(states)), work.correlation_id)

    def sessions_ended(self, work: EndSessionsWork) -> None:
        self._send(SessionsEnded(work.session_ids), work.correlation_id)

    def stream_chunk(self, work: StreamWork, index: int, piece: StreamPiece) -> None:
        self._send(StreamChunk(work.request.stream_id, index, piece.meta, piece.data), work.correlation_id)

    def stream_end(self, work: StreamWork, chunks: int, usage: Optional[Dict[str, Any]],
                   failure: Optional[ItemFailure]) -> None:
        error = None if failure is None else _wire_error(failure)
        self._send(StreamEnd(work.request.stream_id, chunks, usage if error is None else None, error),
                   work.correlation_id)

    def resource_loaded(self, work: LoadResourceWork, load: ResourceLoad) -> None:
        self._send(ResourceLoaded(work.name, work.kind, load.residency, load.bytes, load.load_ms, load.source),
                   work.correlation_id)

    def resource_evicted(self, work: EvictResourceWork, bytes_freed: int) -> None:
        self._send(ResourceEvicted(work.name, bytes_freed), work.correlation_id)

    def rejected(self, work: Work, failure: ItemFailure) -> None:
        request_id = work.request.request_id if isinstance(work, StreamWork) else None
        self._send(Error(_wire_code(failure.code), failure.message, request_id), work.correlation_id)

    def stopped(self, work: Optional[CloseWork]) -> None:
        adapter, self._adapter = self._adapter, None
        if adapter is not None:
            try:
                adapter.close()
            except Exception as err:  # noqa: BLE001 - closing must not stop the process from exiting
                self._log.error('adapter close failed', err=err)
        if work is not None:
            self._send(Closed(), work.correlation_id)
            self._log.info('instance closed')

    # -- probe thread ----------------------------------------------------------------------

    def _probe_loop(self, adapter: Adapter) -> None:
        interval_s = self._options.probe_interval_ms / 1000
        while not self._pipeline.stopped.wait(interval_s):
            reason = self._probe_once(adapter)
            if reason is None:
                continue
            with self._wedged_lock:
                self._is_wedged = True
            self._log.error('instance wedged', code='instance_wedged', reason=reason)
            return

    def _probe_once(self, adapter: Adapter) -> Optional[str]:
        """None when healthy, otherwise why the probe failed."""
        done = threading.Event()
        outcome: List[Union[bool, BaseException]] = []

        def probe() -> None:
            try:
                outcome.append(bool(adapter.probe()))
            except BaseException as err:  # noqa: BLE001 - reported as a failed probe
                outcome.append(err)
            finally:
                done.set()

        threading.Thread(target=probe, name='probe-call', daemon=True).start()
        if not done.wait(self._options.probe_timeout_ms / 1000):
            return f'probe did not answer within {self._options.probe_timeout_ms} ms'
        result = outcome[0]
        if isinstance(result, BaseException):
            return f'probe raised {type(result).__name__}: {result}'
        return None if result else 'probe returned false'

    # -- output ----------------------------------------------------------------------------

    def _send(self, message: HostMessage, correlation_id: int = 0) -> None:
        data = memoryview(encode_message(message, correlation_id))
        with self._write_lock:
            try:
                while data:
                    written = os.write(self._output_fd, data)
                    data = data[written:]
            except BrokenPipeError:
                self._log.warn('output closed')
                self._flush_and_exit(EXIT_OK)

    def _flush_and_exit(self, code: int) -> NoReturn:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        self._exit(code)


def split_batch(batch: RunBatch) -> List[BatchInput]:
    """Slice the int16 PCM body into one array per request (views of the body, not copies).

    The views share the body's buffer: a bytearray from ``read_frame`` gives writable arrays.
    """
    # NOTE: astype is a no-op on little-endian machines; a big-endian one would get one copy.
    audio = np.frombuffer(batch.body, dtype='<i2').astype(np.int16, copy=False)
    inputs: List[BatchInput] = []
    offset = 0
    for item in batch.requests:
        inputs.append(BatchInput(item.request_id, audio[offset:offset + item.samples], item.language, item.prompt,
                                 item.word_timestamps, item.task, item.temperature, item.piece))
        offset += item.samples
    return inputs


def split_sequence(batch: RunSequenceBatch) -> List[SequenceWorkItem]:
    """Each item of a sequence batch with its audio (an int16 view of the body) and attached state (a copy)."""
    items: List[SequenceWorkItem] = []
    for item, part in zip(batch.items, split_sequence_body(batch)):
        audio = np.frombuffer(part.audio, dtype=np.int16) if len(part.audio) else np.zeros(0, dtype=np.int16)
        items.append(SequenceWorkItem(item.request_id, item.session_id, item.seq, audio, item.state_in, part.state,
                                      item.is_last, dict(item.options)))
    return items


def _stage_fields(stages: Sequence[BootStage]) -> List[Dict[str, Any]]:
    """Boot stages as log fields."""
    return [{'stage': s.stage, 'ms': s.ms, 'bytes': s.bytes} for s in stages]


def _catalog_of(adapter: Adapter) -> Tuple[CatalogEntry, ...]:
    """The adapter's catalogue (its optional ``catalog()``), validated; InstanceError('load_failed') when it
    is malformed or raises, after closing the adapter (the load has already succeeded)."""
    read = getattr(adapter, 'catalog', None)
    if read is None:
        return ()
    try:
        return to_catalog(read())
    except Exception as err:
        try:
            adapter.close()
        except Exception:  # noqa: BLE001 - the load fails with the catalogue's error either way
            pass
        if isinstance(err, InstanceError):
            raise
        raise InstanceError('load_failed', f'The adapter catalogue failed: {type(err).__name__}: {err}') from err


def _bind(function: Callable[..., None], *args: Any) -> Callable[[], None]:
    return lambda: function(*args)


def _wire_error(failure: ItemFailure) -> WireError:
    return WireError(_wire_code(failure.code), failure.message)


def _wire_code(code: str) -> WireErrorCode:
    """``code`` when it is a wire code (InstanceError checks that it is), otherwise model_failed."""
    for known in WIRE_ERROR_CODE_VALUES:
        if code == known:
            return known
    return 'model_failed'


def _release_lock(lock_file: Optional[BinaryIO]) -> None:
    if lock_file is None or lock_file.closed:
        return
    fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)
    lock_file.close()
