"""The instance process: protocol loop, heartbeats and health probe around one model adapter.

Threads, and what each one owns:

- **main** runs every controller message except Heartbeat, one at a time in arrival order:
  LoadRequest, WarmupRequest, RunBatch and Close. Only this thread calls the adapter's
  ``load``, ``warmup``, ``run_batch`` (or ``begin_batch``) and ``close``. Every
  ``pipeline_log_every`` batches or ``pipeline_log_interval_s`` seconds it logs where its time
  went ('batch pipeline', see ``pipeline_stats.py``).
- **reader** decodes frames from fd 3. It answers Heartbeat itself, at once, without waiting
  for the model, and queues every other message for the stager. A malformed frame ends
  the process with exit code 3; end of input ends it with exit code 0.
- **stager** passes those messages on to the main thread in the same order. For a RunBatch it
  first slices the body into requests and, for an adapter with ``stage_batch``, lets it copy the
  audio where the model reads it, so that this copy overlaps the batch the main thread is
  running. It may wait there (for a free staging buffer); the reader never does.
- **finisher** builds each batch's results and sends its BatchResult, in the order the batches
  ran. For an adapter with ``begin_batch`` it runs the function that call returned, so the main
  thread starts the next batch while the last one's texts are still being built; for any other
  adapter it only encodes and sends what ``run_batch`` returned.
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
queued work is dropped, and a running batch is abandoned (the process exits at once). After a
Close, end of input changes nothing: queued batches still finish and Closed is still sent.
"""
from __future__ import annotations

import fcntl
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, List, Mapping, NoReturn, Optional, Sequence, Tuple, Union, cast

import numpy as np

from . import __version__
from .errors import InstanceError
from .log import Logger
from .pipeline_stats import DEFAULT_EVERY, DEFAULT_INTERVAL_S, PipelineStats
from .model_api import (
    AdapterStats,
    BatchFinish,
    LoadContext,
    ModelAdapter,
    RequestFailure,
    RequestInput,
    RequestOutput,
    StagedBatch,
)
from .messages import (
    CONTROLLER_TAGS,
    WIRE_ERROR_CODE_VALUES,
    BatchResult,
    CancelStream,
    Close,
    Closed,
    ControllerMessage,
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
    RunBatch,
    RunSequenceBatch,
    Segment,
    StartStream,
    StreamCredit,
    Transcript,
    WarmupRequest,
    WarmupResult,
    WireError,
    WireErrorCode,
    Word,
)
from .protocol import PROTOCOL_VERSION, ByteInput, ProtocolError, encode_message, from_frame, read_frame
from .registry import ADAPTERS, AdapterFactory, adapter_names, create_adapter

EXIT_OK = 0
EXIT_BAD_ARGUMENTS = 2
EXIT_BAD_FRAME = 3
EXIT_LOAD_FAILED = 4  # reserved by the protocol; this host reports load failures as Error frames
EXIT_CRASHED = 1  # a bug in the host itself (an uncaught exception)

DEFAULT_PROBE_INTERVAL_MS = 5000
DEFAULT_PROBE_TIMEOUT_MS = 2000

_INPUT_CLOSED = object()  # queue sentinel: end of input on fd 3
#: Controller messages of protocol 3 that this host does not handle yet: each is answered with an
#: Error (unsupported_option) carrying its correlation id.
_UNSUPPORTED = (RunSequenceBatch, EndSessions, StartStream, StreamCredit, CancelStream, LoadResource, EvictResource)
_QueueItem = Union[Tuple[int, ControllerMessage], object]
#: sys.setswitchinterval for the host process: how long a thread that wakes (the main thread, to queue
#: the next decode chunk) may wait for the GIL while another thread runs Python (the finisher).
GIL_SWITCH_INTERVAL_S = 0.0005
#: How long closing waits for the finisher to send the results of batches that already ran.
FINISHER_DRAIN_TIMEOUT_S = 60.0


@dataclass
class _Ready:
    """A controller message for the main thread; a RunBatch comes split, and staged where the adapter can."""

    correlation_id: int
    message: ControllerMessage
    inputs: Optional[List[RequestInput]] = None
    staged: Optional[StagedBatch] = None


_ReadyItem = Union[_Ready, object]


@dataclass
class _Finishing:
    """A batch whose model part is done: the finisher builds its results and sends them."""

    correlation_id: int
    batch: RunBatch
    started: float  # clock seconds when the batch started
    finish: BatchFinish


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
        self._state_lock = threading.Lock()
        self._queue: 'queue.Queue[_QueueItem]' = queue.Queue()
        self._ready: 'queue.Queue[_ReadyItem]' = queue.Queue()
        self._finishing: 'queue.Queue[Optional[_Finishing]]' = queue.Queue()
        self._finisher: Optional[threading.Thread] = None
        self._stopped = threading.Event()

        # Guarded by _state_lock.
        self._queued_batches = 0
        self._batch_started: Optional[float] = None
        self._is_main_busy = False
        self._is_close_requested = False
        self._is_input_closed = False
        self._is_wedged = False

        self._adapter: Optional[ModelAdapter] = None
        self._model = ''
        self._pipeline = PipelineStats(options.pipeline_log_every, options.pipeline_log_interval_s)  # main thread only

    # -- entry point -----------------------------------------------------------------------

    def run(self) -> int:
        """Send Hello, start the reader, run controller messages until Close or end of input."""
        self._send(Hello(PROTOCOL_VERSION, __version__, os.getpid(), tuple(adapter_names(self._registry))))
        self._log.info('instance started', adapter=self._options.adapter, pid=os.getpid())
        threading.Thread(target=self._read_main, name='reader', daemon=True).start()
        threading.Thread(target=self._stage_main, name='stager', daemon=True).start()
        self._finisher = threading.Thread(target=self._finish_main, name='finisher', daemon=True)
        self._finisher.start()
        while True:
            item = self._ready.get()
            if item is _INPUT_CLOSED:
                self._log.info('input closed')
                self._shutdown()
                return EXIT_OK
            assert isinstance(item, _Ready)
            message = item.message
            with self._state_lock:
                if isinstance(message, RunBatch):
                    self._queued_batches -= 1
                is_dropped = self._is_input_closed and not self._is_close_requested
                if not is_dropped:
                    self._is_main_busy = True
            if is_dropped:  # the supervisor is gone: nobody waits for this result
                _release_staged(item.staged)
                continue
            try:
                if isinstance(message, Close):
                    self._shutdown()
                    self._send(Closed(), item.correlation_id)
                    self._log.info('instance closed')
                    return EXIT_OK
                self._handle(item)
            finally:
                with self._state_lock:
                    self._is_main_busy = False
                    self._batch_started = None

    def _handle(self, item: _Ready) -> None:
        correlation_id, message = item.correlation_id, item.message
        if isinstance(message, LoadRequest):
            self._load(correlation_id, message)
        elif isinstance(message, WarmupRequest):
            self._warmup(correlation_id)
        elif isinstance(message, RunBatch):
            self._run_batch(correlation_id, message, item.inputs, item.staged)
        else:  # Heartbeat is answered by the reader and Close by run(); nothing else is queued
            raise AssertionError(f'Unexpected message on the main thread: {message!r}')

    def _shutdown(self) -> None:
        self._drain_finisher()
        self._stopped.set()
        adapter, self._adapter = self._adapter, None
        if adapter is not None:
            try:
                adapter.close()
            except Exception as err:  # noqa: BLE001 - closing must not stop the process from exiting
                self._log.error('adapter close failed', err=err)

    # -- reader thread ---------------------------------------------------------------------

    def _read_main(self) -> None:
        try:
            self._read_loop()
        except BaseException as err:  # noqa: BLE001 - without its reader the instance is deaf: end it
            self._log.fatal('reader failed', err=err)
            self._flush_and_exit(EXIT_CRASHED)

    def _read_loop(self) -> None:
        while True:
            try:
                frame = read_frame(self._input)
                if frame is None:
                    self._on_input_closed()
                    return
                if frame.type not in CONTROLLER_TAGS:
                    raise ProtocolError(f'Expected a controller message: got type 0x{frame.type:02X}')
                message = from_frame(frame)
            except ProtocolError as err:
                self._fail_bad_frame(err)
            except OSError as err:
                self._log.warn('input failed', err=err)
                self._on_input_closed()
                return
            if isinstance(message, Heartbeat):
                self._answer_heartbeat(frame.correlation_id, message)
                continue
            if isinstance(message, _UNSUPPORTED):
                self._send(Error('unsupported_option', f'This instance does not handle {type(message).__name__} messages', None),
                           frame.correlation_id)
                continue
            with self._state_lock:
                if isinstance(message, RunBatch):
                    self._queued_batches += 1
                elif isinstance(message, Close):
                    self._is_close_requested = True
                self._queue.put((frame.correlation_id, message))

    # -- stager thread ---------------------------------------------------------------------

    def _stage_main(self) -> None:
        try:
            while True:
                item = self._queue.get()
                if item is _INPUT_CLOSED:
                    self._ready.put(item)
                    return
                assert isinstance(item, tuple)
                correlation_id, message = item
                ready = _Ready(correlation_id, message)
                if isinstance(message, RunBatch):
                    ready.inputs = split_batch(message)
                    ready.staged = self._stage(ready.inputs)
                self._ready.put(ready)
        except BaseException as err:  # noqa: BLE001 - without its stager the main thread starves: end it
            self._log.fatal('stager failed', err=err)
            self._flush_and_exit(EXIT_CRASHED)

    def _stage(self, inputs: List[RequestInput]) -> Optional[StagedBatch]:
        """The adapter's staging of a batch; None without one, or when it fails (begin_batch then
        reads the requests' audio itself)."""
        stage = cast(Optional[Callable[[Sequence[RequestInput]], Optional[StagedBatch]]],
                     getattr(self._adapter, 'stage_batch', None))
        with self._state_lock:
            if stage is None or (self._is_input_closed and not self._is_close_requested):
                return None
        try:
            return stage(inputs)
        except Exception as err:  # noqa: BLE001 - staging is an optimisation: run the batch without it
            self._log.warn('staging failed', err=err)
            return None

    def _fail_bad_frame(self, err: ProtocolError) -> NoReturn:
        self._log.error('bad frame', code=err.code, err=err)
        try:
            self._send(Error('bad_frame', err.message, None))
        except Exception:  # noqa: BLE001 - the process exits with EXIT_BAD_FRAME regardless
            pass
        self._flush_and_exit(EXIT_BAD_FRAME)

    def _on_input_closed(self) -> None:
        with self._state_lock:
            self._is_input_closed = True
            if self._is_close_requested:
                return  # the main thread finishes the queued batches and exits after Closed
            is_busy = self._is_main_busy
            if not is_busy:
                self._queue.put(_INPUT_CLOSED)
        if is_busy:
            self._log.info('input closed while busy')
            self._flush_and_exit(EXIT_OK)

    def _answer_heartbeat(self, correlation_id: int, beat: Heartbeat) -> None:
        now = self._clock()
        state: HeartbeatAckState
        with self._state_lock:
            if self._is_wedged:
                state = 'wedged'
            elif self._batch_started is not None:
                state = 'busy'
            else:
                state = 'idle'
            busy_ms = 0 if self._batch_started is None else int((now - self._batch_started) * 1000)
            queued = self._queued_batches
        stats = self._adapter_stats()
        self._send(HeartbeatAck(beat.seq, state, busy_ms, queued, stats.memory_bytes, stats.eager_batches,
                                stats.graph_replays, 0, 0, ()), correlation_id)

    def _adapter_stats(self) -> AdapterStats:
        adapter = self._adapter
        if adapter is None:
            return AdapterStats()
        try:
            return adapter.stats()
        except Exception as err:  # noqa: BLE001 - a heartbeat must be answered even if stats fail
            self._log.warn('adapter stats failed', err=err)
            return AdapterStats()

    # -- main thread: load, warmup, batches ------------------------------------------------

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
            info = adapter.load(LoadContext(request.instance_id, request.model, dict(request.options)))
            load_ms = int((self._clock() - started) * 1000)
        except InstanceError as err:
            log.error('load failed', code=err.code, err=err)
            self._send(Error(_wire_code(err.code), err.message, None), correlation_id)
            return
        except Exception as err:  # noqa: BLE001 - any adapter failure is a load failure
            log.error('load failed', code='load_failed', err=err)
            self._send(Error('load_failed', f'The model failed to load: {type(err).__name__}: {err}', None),
                       correlation_id)
            return
        except BaseException:
            _release_lock(lock_file)
            raise
        finally:
            if self._adapter is None and lock_file is not None and not lock_file.closed:
                _release_lock(lock_file)
        # The lock stays held through warmup: CUDA graph capture must not overlap another
        # instance's load or capture on the same machine (docs/protocol.md, Lifecycle).
        self._load_lock_file = lock_file
        self._adapter = adapter
        self._model = request.model
        log.info('model loaded', device=info.device, durationMs=load_ms, memoryBytes=info.memory_bytes)
        self._send(LoadResult(request.model, info.device, info.parameters, info.memory_bytes, load_ms, ('batch',)),
                   correlation_id)
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
            code = _code_for_exception(err)
            self._log.error('warmup failed', code=code, err=err)
            self._send(Error(code, f'Warmup failed: {type(err).__name__}', None), correlation_id)
            return
        self._release_load_lock()
        warmup_ms = int((self._clock() - started) * 1000)
        self._log.info('model warmed up', durationMs=warmup_ms, graphsCaptured=info.graphs_captured)
        self._send(WarmupResult(warmup_ms, info.graphs_captured), correlation_id)

    def _run_batch(self, correlation_id: int, batch: RunBatch, inputs: Optional[List[RequestInput]],
                   staged: Optional[StagedBatch]) -> None:
        adapter = self._adapter
        if adapter is None:
            _release_staged(staged)
            self._send(Error('model_failed', 'Expected a loaded model before RunBatch: got none', None),
                       correlation_id)
            return
        if inputs is None:
            inputs = split_batch(batch)
        started = self._clock()
        self._pipeline.began(started, len(inputs))
        with self._state_lock:
            self._batch_started = started
        # An adapter with begin_batch (SplitBatchAdapter) leaves building the results to the finisher;
        # one with stage_batch too (StagingAdapter) gets back what it staged, and owns it from here.
        begin = cast(Optional[Callable[..., BatchFinish]], getattr(adapter, 'begin_batch', None))
        try:
            if begin is not None and staged is not None:
                finish = begin(inputs, staged)
            elif begin is not None:
                finish = begin(inputs)
            else:
                outputs = adapter.run_batch(inputs)
                finish = _returning(outputs)
        except Exception as err:  # noqa: BLE001 - reported per request by the finisher, in batch order
            finish = _raising(err)
        with self._state_lock:
            # Cleared before the result goes out: a heartbeat that follows the result says idle.
            self._batch_started = None
        self._finishing.put(_Finishing(correlation_id, batch, started, finish))
        summary = self._pipeline.ended(self._clock(), next_is_ready=not self._ready.empty())
        if summary is not None:
            self._log.info('batch pipeline', **summary)

    # -- finisher thread -------------------------------------------------------------------

    def _finish_main(self) -> None:
        try:
            while True:
                item = self._finishing.get()
                if item is None:
                    return
                self._finish_batch(item)
        except BaseException as err:  # noqa: BLE001 - results would stop going out: end the process
            self._log.fatal('finisher failed', err=err)
            self._flush_and_exit(EXIT_CRASHED)

    def _finish_batch(self, item: _Finishing) -> None:
        batch = item.batch
        try:
            results = self._to_results(batch, item.finish())
        except InstanceError as err:
            self._log.warn('batch failed', batchId=batch.batch_id, code=err.code, err=err)
            error = WireError(_wire_code(err.code), err.message)
            results = [ItemResult(request.request_id, error, None) for request in batch.requests]
        except Exception as err:  # noqa: BLE001 - per the contract: model_failed, traceback logged
            code = _code_for_exception(err)
            self._log.error('batch failed', batchId=batch.batch_id, code=code, err=err)
            message = f'The model failed on this batch: {type(err).__name__}'
            results = [ItemResult(request.request_id, WireError(code, message), None) for request in batch.requests]
        compute_ms = round((self._clock() - item.started) * 1000, 3)
        self._log.debug('batch done', batchId=batch.batch_id, batchSize=len(batch.requests), durationMs=compute_ms)
        self._send(BatchResult(batch.batch_id, tuple(results), compute_ms), item.correlation_id)

    def _drain_finisher(self) -> None:
        """Let the finisher send every result of the batches that already ran, then stop it."""
        finisher, self._finisher = self._finisher, None
        if finisher is None:
            return
        self._finishing.put(None)
        finisher.join(FINISHER_DRAIN_TIMEOUT_S)
        if finisher.is_alive():
            self._log.error('finisher did not drain', timeoutS=FINISHER_DRAIN_TIMEOUT_S)

    def _to_results(self, batch: RunBatch,
                    outputs: Sequence[Union[RequestOutput, RequestFailure]]) -> List[ItemResult]:
        ids = [item.request_id for item in batch.requests]
        got = [output.request_id for output in outputs]
        if got != ids:
            raise RuntimeError(f'Expected one adapter result per request, in order: {ids}; got {got}')
        results: List[ItemResult] = []
        for item, output in zip(batch.requests, outputs):
            if isinstance(output, RequestFailure):
                results.append(ItemResult(item.request_id, WireError(_wire_code(output.code), output.message), None))
                continue
            segments = None if output.segments is None else tuple(
                Segment(_seconds(s.start), _seconds(s.end), s.text) for s in output.segments)
            words = None
            if item.word_timestamps and output.words is not None:
                words = tuple(Word(w.word, _seconds(w.start), _seconds(w.end)) for w in output.words)
            transcript = Transcript(output.text, output.language, _seconds(output.duration_s), segments, words)
            results.append(ItemResult(item.request_id, None, transcript))
        return results

    # -- probe thread ----------------------------------------------------------------------

    def _probe_loop(self, adapter: ModelAdapter) -> None:
        interval_s = self._options.probe_interval_ms / 1000
        while not self._stopped.wait(interval_s):
            reason = self._probe_once(adapter)
            if reason is None:
                continue
            with self._state_lock:
                self._is_wedged = True
            self._log.error('instance wedged', code='instance_wedged', reason=reason)
            return

    def _probe_once(self, adapter: ModelAdapter) -> Optional[str]:
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


def split_batch(batch: RunBatch) -> List[RequestInput]:
    """Slice the int16 PCM body into one array per request (views of the body, not copies).

    The views share the body's buffer: a bytearray from ``read_frame`` gives writable arrays.
    """
    # NOTE: astype is a no-op on little-endian machines; a big-endian one would get one copy.
    audio = np.frombuffer(batch.body, dtype='<i2').astype(np.int16, copy=False)
    inputs: List[RequestInput] = []
    offset = 0
    for item in batch.requests:
        inputs.append(RequestInput(item.request_id, audio[offset:offset + item.samples], item.language, item.prompt,
                                   item.word_timestamps))
        offset += item.samples
    return inputs


def _release_staged(staged: Optional[StagedBatch]) -> None:
    if staged is not None:
        staged.release()


def _returning(outputs: List[Union[RequestOutput, RequestFailure]]) -> BatchFinish:
    return lambda: outputs


def _raising(err: Exception) -> BatchFinish:
    def finish() -> List[Union[RequestOutput, RequestFailure]]:
        raise err

    return finish


def _seconds(value: float) -> float:
    """Times travel rounded to the millisecond: short decimals print the same in Python and JS."""
    return round(float(value), 3)


def _wire_code(code: str) -> WireErrorCode:
    """``code`` when it is a wire code (InstanceError checks that it is), otherwise model_failed."""
    for known in WIRE_ERROR_CODE_VALUES:
        if code == known:
            return known
    return 'model_failed'


def _code_for_exception(err: BaseException) -> WireErrorCode:
    # NOTE: matched by class name so that torch.cuda.OutOfMemoryError maps to out_of_memory
    # without this module importing torch.
    if isinstance(err, MemoryError) or type(err).__name__ == 'OutOfMemoryError':
        return 'out_of_memory'
    return 'model_failed'


def _release_lock(lock_file: Optional[BinaryIO]) -> None:
    if lock_file is None or lock_file.closed:
        return
    fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)
    lock_file.close()
