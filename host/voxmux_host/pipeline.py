"""The work pipeline of an instance: the reader, stager, main and finisher threads around one adapter.

``host.py`` turns frames into work items and results into frames (a ``Sink``; both in ``work.py``); this module runs
the work. Threads, and what each one owns:

- **reader** takes work from the host's ``receive`` (which reads and decodes frames, and answers
  Heartbeat, StreamCredit and CancelStream itself, at once) and queues it for the stager. It counts
  queued batches, notes a Close, and registers each stream's credit as its StartStream arrives, so
  that grants and cancels never wait behind queued work. End of input without a Close drops
  queued work; if the main thread is busy then, the process exits at once.
- **stager** passes the work on to the main thread in the same order. For a batch it first lets the
  adapter ``stage`` it (copy the audio where the model reads it), so that this copy overlaps the batch
  the main thread is running. It may wait there (for a free staging buffer); the reader never does.
- **main** runs the work one item at a time in arrival order: batches (the adapter's ``begin``),
  sequence batches (``begin_sequence``), session ends, resource loads and evictions, stream starts,
  the host's own calls (load, warmup) and Close. Between two items, and whenever it would otherwise
  wait, it advances each open stream that has credit by one step (one ``next()``), in turn: frames
  and streams alternate, so neither starves the other. Cancels are checked before every step. With
  no stream open it blocks on its queue as it always did. Every ``pipeline_log_every`` batches or
  ``pipeline_log_interval_s`` seconds it logs where its time went ('batch pipeline', see
  ``pipeline_stats.py``).
- **finisher** runs the function each batch's ``begin`` or ``begin_sequence`` returned (the texts,
  words and segments; a sequence batch's state updates and outputs) and hands the results to the sink,
  in the order the batches ran, while the main thread already runs the next batch.

The pipeline keeps the state of each sequence session (resident state): the adapter gets it in
``SequenceInput.state`` and returns the new one, which the finisher stores, before the result goes
out, until the session's last item or an EndSessions. A sequence batch or an EndSessions that names a
session whose previous item is still with the finisher waits for it (the scheduler sends a session's
next item only after its result, so this wait is for other senders).
"""
from __future__ import annotations

import collections.abc
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple, Union, cast

from .errors import InstanceError
from .log import Logger
from .messages import Transcript
from .model_api import (
    Adapter,
    BatchFinish,
    BatchInput,
    BatchOutput,
    ItemFailure,
    SequenceFinish,
    SequenceInput,
    SequenceOutput,
    SequenceResultItem,
    StagedBatch,
    StreamPiece,
)
from .pipeline_stats import DEFAULT_EVERY, DEFAULT_INTERVAL_S, PipelineStats
from .protocol import MAX_STATE_BYTES, ProtocolError
from .stream_controls import StreamControls
from .work import (
    BatchWork,
    CallWork,
    CloseWork,
    EndSessionsWork,
    EvictResourceWork,
    LoadResourceWork,
    SequenceWork,
    Sink,
    StreamWork,
    Work,
    WorkKinds,
)

#: How long closing waits for the finisher to send the results of batches that already ran.
FINISHER_DRAIN_TIMEOUT_S = 60.0

#: The kind a resource is asked for by name when the host never loaded it (a stream's voice).
BY_NAME_KIND = 'voice'

EXIT_OK = 0
EXIT_CRASHED = 1  # a bug in the host itself (an uncaught exception)


@dataclass(frozen=True)
class PipelineOptions:
    #: Batches and seconds per 'batch pipeline' log line, at most (pipeline_stats.py).
    pipeline_log_every: int = DEFAULT_EVERY
    pipeline_log_interval_s: float = DEFAULT_INTERVAL_S


@dataclass
class PipelineDeps:
    #: Reader thread: the next work item, blocking; None at end of input.
    receive: Callable[[], Optional[Work]]
    sink: Sink
    log: Logger
    exit: Callable[[int], NoReturn]
    clock: Callable[[], float]  # seconds


@dataclass(frozen=True)
class PipelineSnapshot:
    """What a HeartbeatAck reports of the pipeline."""

    busy_ms: Optional[int]  # how long the oldest model work whose results are not out has run; None when none
    queued_batches: int
    sessions: int
    streams: int


_NO_KINDS = WorkKinds((), None, None, None, None)
_INPUT_CLOSED = object()  # queue sentinel: end of input
_WAKE = object()  # ready-queue token: a stream got credit or was cancelled
_QueueItem = Union[Work, object]


@dataclass
class _Finishing:
    """A batch whose model part is done: the finisher builds its results."""

    work: BatchWork
    started: float  # clock seconds when the batch started
    finish: BatchFinish


@dataclass
class _FinishingSequence:
    """A sequence batch whose model part is done: the finisher builds its results, stores the sessions'
    new states and sends the results."""

    work: SequenceWork
    started: float  # clock seconds when the batch started
    finish: SequenceFinish
    inputs: List[SequenceInput]  # the items given to the adapter
    positions: List[int]  # each input's index in work.items
    results: List[Optional[SequenceResultItem]]  # per work item: failures found before the adapter


@dataclass
class _OpenStream:
    work: StreamWork
    pieces: collections.abc.Iterator[StreamPiece]
    chunks: int = 0


class Pipeline:
    def __init__(self, options: PipelineOptions, deps: PipelineDeps) -> None:
        self._receive = deps.receive
        self._sink = deps.sink
        self._log = deps.log
        self._exit = deps.exit
        self._clock = deps.clock

        self._state_lock = threading.Lock()
        self._queue: 'queue.Queue[_QueueItem]' = queue.Queue()
        self._ready: 'queue.Queue[_QueueItem]' = queue.Queue()
        self._finishing: 'queue.Queue[Union[_Finishing, _FinishingSequence, None]]' = queue.Queue()
        self._finisher: Optional[threading.Thread] = None
        self.stopped = threading.Event()

        # Guarded by _state_lock.
        self._queued_batches = 0
        self._work_started: Optional[float] = None
        self._finishing_started: Optional[float] = None  # the batch whose results the finisher builds
        self._is_main_busy = False
        self._is_close_requested = False
        self._is_input_closed = False

        # Set on the main thread by bind(), before the reply to the load goes out; read by the others.
        self._kinds = _NO_KINDS
        self._is_bound = False

        # Resident session states: read by the main thread, written by the finisher, and by the main
        # thread for EndSessions (the heartbeat thread reads the size). A session's entry is never
        # touched by both at once: _sessions_finishing says which sessions the finisher still holds.
        self._sessions: Dict[str, bytes] = {}
        self._sessions_finishing: Dict[str, int] = {}  # session id -> its items with the finisher
        self._sessions_finished = threading.Condition()
        # Main thread only (the heartbeat thread reads the size).
        self._streams: Dict[str, _OpenStream] = {}
        self._resource_sources: Dict[str, Tuple[str, Dict[str, Any]]] = {}
        self._stats = PipelineStats(options.pipeline_log_every, options.pipeline_log_interval_s)
        # The adapter's cumulative stage times at the last 'batch pipeline' line.
        self._stage_ms_logged: Dict[str, float] = {}

        self.controls = StreamControls()

    # -- the host's side ---------------------------------------------------------------------

    def bind(self, kinds: WorkKinds) -> None:
        """Main thread, once the adapter has loaded: what the work is dispatched to from now on."""
        self._kinds = kinds
        self._is_bound = True

    @property
    def kinds(self) -> WorkKinds:
        return self._kinds

    def grant(self, stream_id: str, chunks: int) -> None:
        """Reader thread (StreamCredit). A grant for a stream that ended already changes nothing."""
        if self.controls.grant(stream_id, chunks):
            self._ready.put(_WAKE)

    def cancel(self, stream_id: str) -> None:
        """Reader thread (CancelStream): the stream ends with stream_cancelled before its next step,
        unless it ended already."""
        if self.controls.cancel(stream_id):
            self._ready.put(_WAKE)

    def snapshot(self) -> PipelineSnapshot:
        """Any thread: what a heartbeat reports."""
        with self._state_lock:
            # Read under the lock: work that starts meanwhile must not make busyMs negative.
            now = self._clock()
            begun = [t for t in (self._work_started, self._finishing_started) if t is not None]
            queued = self._queued_batches
        # A batch whose results the finisher still builds (waiting for the GPU's copies) is model work too.
        busy_ms = None if not begun else max(0, int((now - min(begun)) * 1000))
        return PipelineSnapshot(busy_ms, queued, len(self._sessions), len(self._streams))

    def run(self) -> int:
        """Start the reader, stager and finisher; run the main loop on this thread until Close or end of
        input. The exit code."""
        threading.Thread(target=self._read_main, name='reader', daemon=True).start()
        threading.Thread(target=self._stage_main, name='stager', daemon=True).start()
        self._finisher = threading.Thread(target=self._finish_main, name='finisher', daemon=True)
        self._finisher.start()
        return self._main_loop()

    # -- reader thread -------------------------------------------------------------------------

    def _read_main(self) -> None:
        try:
            while True:
                work = self._receive()
                if work is None:
                    self._on_input_closed()
                    return
                if isinstance(work, StreamWork) and not self.controls.register(work.request.stream_id,
                                                                                work.credit_chunks,
                                                                                work.request.cancelled):
                    self._sink.rejected(work, ItemFailure(
                        'model_failed', f"Expected a streamId that is not running: got '{work.request.stream_id}'"))
                    continue
                with self._state_lock:
                    if isinstance(work, (BatchWork, SequenceWork)):
                        self._queued_batches += 1
                    elif isinstance(work, CloseWork):
                        self._is_close_requested = True
                    self._queue.put(work)
        except BaseException as err:  # noqa: BLE001 - without its reader the instance is deaf: end it
            self._log.fatal('reader failed', err=err)
            self._exit(EXIT_CRASHED)

    def _on_input_closed(self) -> None:
        with self._state_lock:
            self._is_input_closed = True
            if self._is_close_requested:
                return  # the main thread finishes the queued work and exits after Closed
            is_busy = self._is_main_busy
            if not is_busy:
                self._queue.put(_INPUT_CLOSED)
        if is_busy:
            self._log.info('input closed while busy')
            self._exit(EXIT_OK)

    def _is_dropping(self) -> bool:
        """Under _state_lock: the supervisor is gone, so nobody waits for results."""
        return self._is_input_closed and not self._is_close_requested

    # -- stager thread -------------------------------------------------------------------------

    def _stage_main(self) -> None:
        try:
            while True:
                item = self._queue.get()
                if isinstance(item, BatchWork):
                    item.staged = self._stage(item.inputs)
                self._ready.put(item)
                if item is _INPUT_CLOSED:
                    return
        except BaseException as err:  # noqa: BLE001 - without its stager the main thread starves: end it
            self._log.fatal('stager failed', err=err)
            self._exit(EXIT_CRASHED)

    def _stage(self, inputs: List[BatchInput]) -> Optional[StagedBatch]:
        """The adapter's staging of a batch; None when it fails (``begin`` then reads the audio itself)."""
        adapter = self._kinds.batch
        with self._state_lock:
            if adapter is None or self._is_dropping():
                return None
        try:
            return adapter.stage(inputs)
        except Exception as err:  # noqa: BLE001 - staging is an optimisation: run the batch without it
            self._log.warn('staging failed', err=err)
            return None

    # -- main thread ---------------------------------------------------------------------------

    def _main_loop(self) -> int:
        ready = self._ready
        while True:
            if self._streams and self._has_runnable_stream():
                try:
                    item = ready.get_nowait()
                except queue.Empty:
                    self._step_streams()
                    continue
            else:
                item = ready.get()  # a frame's work, or a grant or cancel (_WAKE)
            if item is _WAKE:
                if self._streams:
                    self._step_streams()
                continue
            if item is _INPUT_CLOSED:
                self._log.info('input closed')
                self._stop(None)
                return EXIT_OK
            work = cast(Work, item)
            with self._state_lock:
                if isinstance(work, (BatchWork, SequenceWork)):
                    self._queued_batches -= 1
                is_dropped = self._is_dropping()
                if not is_dropped:
                    self._is_main_busy = True
            if is_dropped:  # the supervisor is gone: nobody waits for this result
                if isinstance(work, BatchWork) and work.staged is not None:
                    work.staged.release()
                continue
            try:
                if isinstance(work, CloseWork):
                    self._stop(work)
                    return EXIT_OK
                self._run(work)
            finally:
                with self._state_lock:
                    self._is_main_busy = False
                    self._work_started = None
            if self._streams:
                self._step_streams()  # frames and streams alternate

    def _run(self, work: Work) -> None:
        if isinstance(work, BatchWork):
            self._run_batch(work)
        elif isinstance(work, SequenceWork):
            self._run_sequence(work)
        elif isinstance(work, StreamWork):
            self._open_stream(work)
        elif isinstance(work, EndSessionsWork):
            self._end_sessions(work)
        elif isinstance(work, LoadResourceWork):
            self._load_resource(work)
        elif isinstance(work, EvictResourceWork):
            self._evict_resource(work)
        elif isinstance(work, CallWork):
            work.run()
        else:  # CloseWork is handled by the loop
            raise AssertionError(f'Unexpected work on the main thread: {work!r}')

    def _begin_work(self) -> float:
        started = self._clock()
        with self._state_lock:
            self._work_started = started
        return started

    def _end_work(self) -> None:
        with self._state_lock:
            self._work_started = None

    def _unserved(self, work: Work, kind: str) -> ItemFailure:
        if not self._is_bound:
            return ItemFailure('model_failed', f'Expected a loaded model before {work.NAME}: got none')
        return ItemFailure('unsupported_option', f'This instance does not handle {work.NAME} messages '
                                                 f'(work kind {kind})')

    def _stop(self, work: Optional[CloseWork]) -> None:
        """After a Close, open streams end with stream_cancelled; at end of input nobody waits for them."""
        self._drain_finisher()
        for stream in list(self._streams.values()):
            self._close_stream(stream)
            if work is None:
                self._forget_stream(stream)
            else:
                self._end_stream(stream, None, ItemFailure('stream_cancelled', 'The instance is closing'))
        self.stopped.set()
        self._sink.stopped(work)

    # -- batches (main and finisher threads) -------------------------------------------------------

    def _run_batch(self, work: BatchWork) -> None:
        adapter = self._kinds.batch
        if adapter is None:
            if work.staged is not None:
                work.staged.release()
            self._sink.rejected(work, self._unserved(work, 'batch'))
            return
        started = self._clock()
        self._stats.began(started, len(work.inputs))
        with self._state_lock:
            self._work_started = started
        try:
            finish = adapter.begin(work.inputs, work.staged)
        except Exception as err:  # noqa: BLE001 - reported per request by the finisher, in batch order
            finish = _raising(err)
        work.staged = None
        with self._state_lock:
            # Cleared before the result goes out: a heartbeat that follows the result says idle.
            self._work_started = None
        self._finishing.put(_Finishing(work, started, finish))
        self._log_pipeline(adapter)

    def _finish_main(self) -> None:
        try:
            while True:
                item = self._finishing.get()
                if item is None:
                    return
                with self._state_lock:
                    self._finishing_started = item.started
                if isinstance(item, _FinishingSequence):
                    self._finish_sequence(item)
                else:
                    self._finish_batch(item)
        except BaseException as err:  # noqa: BLE001 - results would stop going out: end the process
            self._log.fatal('finisher failed', err=err)
            self._exit(EXIT_CRASHED)

    def _finish_batch(self, item: _Finishing) -> None:
        work = item.work
        outputs: Sequence[BatchOutput]
        try:
            outputs = item.finish()
            _check_batch_outputs(work, outputs)
        except Exception as err:  # noqa: BLE001 - per the contract: every request fails with its code
            failure = self._failure('batch failed', err, batchId=work.batch_id)
            outputs = [failure] * len(work.inputs)
        self._results_built()
        compute_ms = round((self._clock() - item.started) * 1000, 3)
        self._log.debug('batch done', batchId=work.batch_id, batchSize=len(work.inputs), durationMs=compute_ms)
        try:
            self._sink.batch_done(work, outputs, compute_ms)
        except ProtocolError as err:  # outputs the protocol cannot carry: the batch fails, the host goes on
            failure = self._failure('batch result not sendable', _not_sendable(err), batchId=work.batch_id)
            self._sink.batch_done(work, [failure] * len(work.inputs), compute_ms)

    def _results_built(self) -> None:
        """Finisher thread, before the results go out: a heartbeat that follows them says idle."""
        with self._state_lock:
            self._finishing_started = None

    def _drain_finisher(self) -> None:
        """Let the finisher send every result of the batches that already ran, then stop it."""
        finisher, self._finisher = self._finisher, None
        if finisher is None:
            return
        self._finishing.put(None)
        finisher.join(FINISHER_DRAIN_TIMEOUT_S)
        if finisher.is_alive():
            self._log.error('finisher did not drain', timeoutS=FINISHER_DRAIN_TIMEOUT_S)

    def _failure(self, what: str, err: Exception, **fields: Any) -> ItemFailure:
        """An exception that fails a whole call, logged: InstanceError keeps its code (a warning),
        anything else is model_failed or out_of_memory (an error, with its traceback)."""
        if isinstance(err, InstanceError):
            self._log.warn(what, code=err.code, err=err, **fields)
            return ItemFailure(err.code, err.message)
        code = code_for_exception(err)
        self._log.error(what, code=code, err=err, **fields)
        return ItemFailure(code, f'The model failed: {type(err).__name__}: {err}')

    # -- sequence batches and sessions ---------------------------------------------------------------

    def _run_sequence(self, work: SequenceWork) -> None:
        adapter = self._kinds.sequence
        if adapter is None:
            self._sink.rejected(work, self._unserved(work, 'sequence'))
            return
        self._wait_for_sessions([item.session_id for item in work.items])
        started = self._begin_work()
        self._stats.began(started, len(work.items))
        results: List[Optional[SequenceResultItem]] = [None] * len(work.items)
        inputs: List[SequenceInput] = []
        positions: List[int] = []
        for i, item in enumerate(work.items):
            state: Optional[bytes]
            if item.state_in == 'new':
                state = None
            elif item.state_in == 'attached':
                state = item.attached_state
            else:
                state = self._sessions.get(item.session_id)
                if state is None:
                    results[i] = ItemFailure('session_state_missing',
                                             f"Expected the state of session '{item.session_id}' to be resident: "
                                             'this instance does not hold it')
                    continue
            inputs.append(SequenceInput(item.request_id, item.session_id, item.seq, item.audio, state, item.is_last,
                                        item.options))
            positions.append(i)
        finish: SequenceFinish = _no_results
        if inputs:
            try:
                finish = adapter.begin_sequence(inputs)
            except Exception as err:  # noqa: BLE001 - every item of the call fails with its code, in batch order
                finish = _raising(err)
        self._end_work()
        with self._sessions_finished:
            for given in inputs:
                self._sessions_finishing[given.session_id] = self._sessions_finishing.get(given.session_id, 0) + 1
        self._finishing.put(_FinishingSequence(work, started, finish, inputs, positions, results))
        self._log_pipeline(adapter)

    def _finish_sequence(self, item: _FinishingSequence) -> None:
        """Finisher thread: the batch's results, the sessions' new resident states, then the results out."""
        work, inputs, results = item.work, item.inputs, item.results
        outputs: Sequence[SequenceResultItem] = []
        if inputs:
            try:
                outputs = item.finish()
                _check_sequence_outputs(inputs, outputs)
            except Exception as err:  # noqa: BLE001 - every item of the call fails with its code
                outputs = [self._failure('sequence batch failed', err, batchId=work.batch_id)] * len(inputs)
        for position, given, output in zip(item.positions, inputs, outputs):
            if isinstance(output, SequenceOutput) and len(output.state) > MAX_STATE_BYTES:
                output = ItemFailure('state_too_large', f'Expected a session state of at most {MAX_STATE_BYTES} '
                                                        f'bytes: got {len(output.state)}')
            if given.is_last:
                self._sessions.pop(given.session_id, None)
            elif isinstance(output, SequenceOutput):
                self._sessions[given.session_id] = bytes(output.state)
            # A failed item leaves the session's resident state as it was.
            results[position] = output
        with self._sessions_finished:
            for given in inputs:
                left = self._sessions_finishing[given.session_id] - 1
                if left:
                    self._sessions_finishing[given.session_id] = left
                else:
                    del self._sessions_finishing[given.session_id]
            self._sessions_finished.notify_all()
        self._results_built()
        compute_ms = round((self._clock() - item.started) * 1000, 3)
        try:
            self._sink.sequence_done(work, [result for result in results if result is not None], compute_ms)
        except ProtocolError as err:
            # Outputs the protocol cannot carry: every item fails, and the states kept for them go (the
            # next item of each session is answered session_state_missing and comes with its checkpoint).
            failure = self._failure('sequence result not sendable', _not_sendable(err), batchId=work.batch_id)
            for given in inputs:
                self._sessions.pop(given.session_id, None)
            self._sink.sequence_done(work, [failure for result in results if result is not None], compute_ms)

    def _wait_for_sessions(self, session_ids: Sequence[str]) -> None:
        """Main thread: until the finisher holds no item of these sessions (their resident states are
        final). Returns at once when it holds none, as with the scheduler's order."""
        with self._sessions_finished:
            while any(session_id in self._sessions_finishing for session_id in session_ids):
                self._sessions_finished.wait()

    def _log_pipeline(self, adapter: Adapter) -> None:
        """After a batch's model part: ends it in the window's timings and, once a window is full, logs
        'batch pipeline' with the adapter's own stage times over the window (``stageMs``), if it keeps any."""
        summary = self._stats.ended(self._clock(), next_is_ready=not self._ready.empty())
        if summary is None:
            return
        try:
            stage_ms = dict(adapter.stats().stage_ms)
        except Exception:  # noqa: BLE001 - the summary goes out without the stages
            stage_ms = {}
        if stage_ms:
            summary['stageMs'] = {name: round(total - self._stage_ms_logged.get(name, 0.0), 1)
                                  for name, total in stage_ms.items()}
            self._stage_ms_logged = stage_ms
        self._log.info('batch pipeline', **summary)

    def _end_sessions(self, work: EndSessionsWork) -> None:
        if self._kinds.sequence is None:
            self._sink.rejected(work, self._unserved(work, 'sequence'))
            return
        self._wait_for_sessions(work.session_ids)
        for session_id in work.session_ids:
            self._sessions.pop(session_id, None)
        self._sink.sessions_ended(work)

    # -- resources -------------------------------------------------------------------------------

    def _load_resource(self, work: LoadResourceWork) -> None:
        adapter = self._kinds.resources
        if adapter is None:
            self._sink.rejected(work, self._unserved(work, 'resources'))
            return
        self._begin_work()
        try:
            load = adapter.load_resource(work.name, work.kind, work.source)
        except Exception as err:  # noqa: BLE001 - an Error frame with its code
            self._sink.rejected(work, self._failure('resource load failed', err, resource=work.name))
            return
        finally:
            self._end_work()
        self._resource_sources[work.name] = (work.kind, work.source)
        self._sink.resource_loaded(work, load)

    def _evict_resource(self, work: EvictResourceWork) -> None:
        adapter = self._kinds.resources
        if adapter is None:
            self._sink.rejected(work, self._unserved(work, 'resources'))
            return
        try:
            freed = adapter.evict_resource(work.name)
        except Exception as err:  # noqa: BLE001 - an Error frame with its code
            self._sink.rejected(work, self._failure('resource eviction failed', err, resource=work.name))
            return
        self._sink.resource_evicted(work, freed)

    def _ensure_resource(self, name: str) -> Optional[ItemFailure]:
        """Make the named resource resident for a stream: nothing when it is; otherwise load it again from
        the source of its last LoadResource, or, for one the host never loaded, ask the adapter for it by
        name (``load_resource(name, 'voice', {})``: the adapter finds it in its own catalogue and raises
        InstanceError('resource_not_found') when it has no such resource). A failure when that fails."""
        adapter = self._kinds.resources
        if adapter is None:
            return ItemFailure('resource_not_found', f"Expected a resource '{name}': this adapter holds none")
        if any(info.name == name for info in adapter.resources()):
            return None
        kind, source = self._resource_sources.get(name, (BY_NAME_KIND, {}))
        try:
            adapter.load_resource(name, kind, dict(source))
        except Exception as err:  # noqa: BLE001 - the stream ends with its code
            return self._failure('resource load failed', err, resource=name)
        return None

    # -- streams ---------------------------------------------------------------------------------

    def _has_runnable_stream(self) -> bool:
        if self.controls.has_cancels:
            return True
        return any(self.controls.has_credit(stream_id) for stream_id in self._streams)

    def _open_stream(self, work: StreamWork) -> None:
        stream_id = work.request.stream_id
        adapter = self._kinds.stream
        if adapter is None:
            self.controls.remove(stream_id)
            self._sink.rejected(work, self._unserved(work, 'stream'))
            return
        if self.controls.is_cancelled(stream_id):
            self.controls.remove(stream_id)
            self._sink.stream_end(work, 0, None, _cancelled())
            return
        failure = None
        self._begin_work()
        try:
            if work.request.resource is not None:
                failure = self._ensure_resource(work.request.resource)
            if failure is None:
                pieces = iter(adapter.open_stream(work.request))
        except Exception as err:  # noqa: BLE001 - the stream ends with its code
            failure = self._failure('stream failed', err, streamId=stream_id)
        finally:
            self._end_work()
        if failure is not None:
            self.controls.remove(stream_id)
            self._sink.stream_end(work, 0, None, failure)
            return
        self._streams[stream_id] = _OpenStream(work, pieces)

    def _step_streams(self) -> None:
        """One round: each open stream with credit advances by one piece; cancels are taken first."""
        controls = self.controls
        for stream in list(self._streams.values()):
            if controls.has_cancels:
                self._apply_cancels()
            stream_id = stream.work.request.stream_id
            if stream_id in self._streams and controls.has_credit(stream_id):
                self._step(stream)
        if controls.has_cancels:
            self._apply_cancels()

    def _apply_cancels(self) -> None:
        for stream_id in self.controls.take_cancels():
            stream = self._streams.get(stream_id)
            if stream is None:
                continue  # not open yet: its start ends it; or ended already
            self._close_stream(stream)
            self._end_stream(stream, None, _cancelled())

    def _step(self, stream: _OpenStream) -> None:
        self._begin_work()
        try:
            piece = next(stream.pieces)
            if not isinstance(piece, StreamPiece):
                raise TypeError(f'Expected a StreamPiece from the stream: got {type(piece).__name__}')
        except StopIteration as stop:
            self._end_work()
            if stream.work.request.cancelled.is_set():  # the adapter returned early on the cancel
                self._end_stream(stream, None, _cancelled())
                return
            usage = stop.value if isinstance(stop.value, dict) else {}
            self._end_stream(stream, usage, None)
            return
        except Exception as err:  # noqa: BLE001 - the stream ends with its code
            self._end_work()
            self._end_stream(stream, None, self._failure('stream failed', err,
                                                         streamId=stream.work.request.stream_id))
            return
        self._end_work()
        if stream.work.request.cancelled.is_set():  # cancelled during the step: its piece is dropped
            self._close_stream(stream)
            self._end_stream(stream, None, _cancelled())
            return
        self.controls.spend(stream.work.request.stream_id)
        try:
            self._sink.stream_chunk(stream.work, stream.chunks, piece)
        except ProtocolError as err:  # a piece the protocol cannot carry: the stream ends, the host goes on
            self._close_stream(stream)
            self._end_stream(stream, None, self._failure('stream piece not sendable', _not_sendable(err),
                                                         streamId=stream.work.request.stream_id))
            return
        stream.chunks += 1

    def _close_stream(self, stream: _OpenStream) -> None:
        pieces = stream.pieces
        if isinstance(pieces, collections.abc.Generator):
            try:
                pieces.close()
            except Exception as err:  # noqa: BLE001 - the stream ends regardless
                self._log.warn('stream close failed', streamId=stream.work.request.stream_id, err=err)

    def _end_stream(self, stream: _OpenStream, usage: Optional[Dict[str, Any]],
                    failure: Optional[ItemFailure]) -> None:
        self._forget_stream(stream)
        self._sink.stream_end(stream.work, stream.chunks, usage, failure)

    def _forget_stream(self, stream: _OpenStream) -> None:
        stream_id = stream.work.request.stream_id
        self._streams.pop(stream_id, None)
        self.controls.remove(stream_id)


def _cancelled() -> ItemFailure:
    return ItemFailure('stream_cancelled', 'The stream was cancelled')


def _raising(err: Exception) -> Callable[[], NoReturn]:
    """A finish function (a batch's or a sequence batch's) that raises what its begin raised."""
    def finish() -> NoReturn:
        raise err

    return finish


def _no_results() -> List[SequenceResultItem]:
    return []


def _check_batch_outputs(work: BatchWork, outputs: Sequence[BatchOutput]) -> None:
    if len(outputs) != len(work.inputs):
        raise RuntimeError(f'Expected one adapter result per request ({len(work.inputs)}): got {len(outputs)}')
    for output in outputs:
        if not isinstance(output, (Transcript, ItemFailure)):
            raise TypeError(f'Expected a Transcript or an ItemFailure: got {type(output).__name__}')


def _check_sequence_outputs(inputs: Sequence[SequenceInput], outputs: Sequence[SequenceResultItem]) -> None:
    if len(outputs) != len(inputs):
        raise RuntimeError(f'Expected one adapter result per item ({len(inputs)}): got {len(outputs)}')
    for output in outputs:
        if not isinstance(output, (SequenceOutput, ItemFailure)):
            raise TypeError(f'Expected a SequenceOutput or an ItemFailure: got {type(output).__name__}')


def code_for_exception(err: BaseException) -> str:
    # NOTE: matched by class name so that torch.cuda.OutOfMemoryError maps to out_of_memory
    # without this module importing torch.
    if isinstance(err, MemoryError) or type(err).__name__ == 'OutOfMemoryError':
        return 'out_of_memory'
    return 'model_failed'


def _not_sendable(err: ProtocolError) -> Exception:
    """An adapter's output the protocol cannot carry, as the adapter's failure (model_failed), not a bad frame
    of the controller's."""
    return RuntimeError(f'The model gave an output the protocol cannot carry: {err.message}')
