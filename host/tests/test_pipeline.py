"""The pipeline (pipeline.py) in process, with a fake adapter for each work kind: work goes in as the host
would make it of frames, and results come out through a recording sink."""
from __future__ import annotations

import io
import json
import queue
import struct
import threading
import time
from typing import Any, ClassVar, Dict, Iterator, List, NoReturn, Optional, Sequence, Set, Tuple, Union

import numpy as np
import pytest

from voxmux_host.errors import InstanceError
from voxmux_host.log import Logger
from voxmux_host.messages import ResourceInfo, Transcript
from voxmux_host.protocol import ProtocolError
from voxmux_host.model_api import (
    AdapterStats,
    BatchFinish,
    BatchInput,
    BatchOutput,
    ItemFailure,
    LoadContext,
    LoadInfo,
    ResourceLoad,
    SequenceFinish,
    SequenceInput,
    SequenceOutput,
    SequenceResultItem,
    SimpleBatchAdapter,
    SimpleSequenceAdapter,
    StagedBatch,
    StreamPiece,
    StreamRequest,
    WarmupInfo,
)
from voxmux_host.pipeline import (
    Pipeline,
    PipelineDeps,
    PipelineOptions,
)
from voxmux_host.work import (
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

WAIT_S = 5.0


class _Common:
    """The common part of every fake adapter."""

    def load(self, ctx: LoadContext) -> LoadInfo:
        return LoadInfo('cpu')

    def warmup(self) -> WarmupInfo:
        return WarmupInfo()

    def stats(self) -> AdapterStats:
        return AdapterStats()

    def probe(self) -> bool:
        return True

    def close(self) -> None:
        pass


def transcript(text: str) -> Transcript:
    return Transcript(text, 'en', 0.0, None, None)


class EchoBatch(_Common, SimpleBatchAdapter):
    """A batch adapter: each request's text is its sample count; a prompt 'raise' raises, 'fail' fails it."""

    def __init__(self) -> None:
        self.threads: List[str] = []

    def run(self, inputs: Sequence[BatchInput]) -> List[BatchOutput]:
        self.threads.append(threading.current_thread().name)
        if any(i.prompt == 'raise' for i in inputs):
            raise RuntimeError('asked to raise')
        if any(i.prompt == 'oom' for i in inputs):
            raise MemoryError()
        if any(i.prompt == 'instance-error' for i in inputs):
            raise InstanceError('invalid_audio', 'asked to fail')
        if any(i.prompt == 'short' for i in inputs):
            return []
        return [ItemFailure('model_failed', 'asked') if i.prompt == 'fail' else transcript(str(len(i.audio)))
                for i in inputs]


class _Staged:
    def __init__(self) -> None:
        self.releases = 0

    def release(self) -> None:
        self.releases += 1


class StagingBatch(_Common):
    work_kinds: ClassVar[Tuple[str, ...]] = ('batch',)

    def __init__(self) -> None:
        self.log: List[Tuple[str, str]] = []

    def stage(self, inputs: Sequence[BatchInput]) -> Optional[StagedBatch]:
        self.log.append(('stage', threading.current_thread().name))
        return _Staged()

    def begin(self, inputs: Sequence[BatchInput], staged: Optional[StagedBatch]) -> BatchFinish:
        self.log.append(('begin', threading.current_thread().name))
        assert staged is not None
        staged.release()
        outputs: List[BatchOutput] = [transcript(i.request_id) for i in inputs]

        def finish() -> List[BatchOutput]:
            self.log.append(('finish', threading.current_thread().name))
            return outputs

        return finish


class Summing(_Common, SimpleSequenceAdapter):
    """A sequence adapter: the state is the running sum of the samples (8 bytes); option 'fail', 'raise',
    'big' (a state over 1 MiB)."""

    work_kinds: ClassVar[Tuple[str, ...]] = ('sequence',)

    def __init__(self) -> None:
        self.states_in: List[Optional[bytes]] = []

    def run_sequence(self, items: Sequence[SequenceInput]) -> List[Union[SequenceOutput, ItemFailure]]:
        outputs: List[Union[SequenceOutput, ItemFailure]] = []
        for item in items:
            self.states_in.append(item.state)
            if item.options.get('raise'):
                raise RuntimeError('asked to raise')
            if item.options.get('fail'):
                outputs.append(ItemFailure('model_failed', 'asked'))
                continue
            total = (0 if item.state is None else struct.unpack('<q', item.state[:8])[0]) + int(item.audio.sum())
            pad = bytes((1 << 20) + 1) if item.options.get('big') else b''
            outputs.append(SequenceOutput({'sum': total}, struct.pack('<q', total) + pad))
        return outputs


class Counting(_Common):
    """A stream adapter: params {'chunks': n, 'delayMs': d, 'failAt': k}; also holds resources, and loads the
    voices of its catalogue (CATALOG) by name."""

    work_kinds: ClassVar[Tuple[str, ...]] = ('stream',)
    CATALOG: ClassVar[Dict[str, int]] = {'known': 7}

    def __init__(self) -> None:
        self.closed: List[str] = []
        self.held: Dict[str, int] = {}
        self.loads: List[str] = []
        self.asked: List[Tuple[str, str, Dict[str, Any]]] = []

    def open_stream(self, request: StreamRequest) -> Iterator[StreamPiece]:
        return self._pieces(request)

    def _pieces(self, request: StreamRequest) -> Iterator[StreamPiece]:
        params = request.params
        try:
            for index in range(int(params.get('chunks', 3))):
                if params.get('failAt') == index:
                    raise RuntimeError('asked to fail')
                time.sleep(params.get('delayMs', 0) / 1000)
                yield StreamPiece({'i': index}, bytes([index % 256]))
        except GeneratorExit:
            self.closed.append(request.stream_id)
            raise
        return {'chunks': params.get('chunks', 3)}  # type: ignore[misc]

    def load_resource(self, name: str, kind: str, source: Dict[str, Any]) -> ResourceLoad:
        if name in self.held:
            return ResourceLoad('device', self.held[name], 'resident')
        self.asked.append((name, kind, dict(source)))
        if source.get('fail'):
            raise InstanceError('out_of_memory', 'asked to fail')
        if not source and name not in self.CATALOG:
            raise InstanceError('resource_not_found', f'no voice {name}')
        self.loads.append(name)
        self.held[name] = int(source.get('bytes', self.CATALOG.get(name, 0)))
        return ResourceLoad('device', self.held[name], 'disk', 1)

    def evict_resource(self, name: str) -> int:
        return self.held.pop(name, 0)

    def resources(self) -> List[ResourceInfo]:
        return [ResourceInfo(name, 'voice', 'device', size) for name, size in self.held.items()]


class Recorder:
    """The sink: every result as a tuple, in the order it came."""

    def __init__(self) -> None:
        self.events: List[Tuple[Any, ...]] = []
        self._changed = threading.Condition()

    def _add(self, *event: Any) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def wait_for(self, count: int, timeout_s: float = WAIT_S) -> List[Tuple[Any, ...]]:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.events) >= count, timeout_s), self.events
            return list(self.events)

    def batch_done(self, work: BatchWork, outputs: Sequence[BatchOutput], compute_ms: float) -> None:
        self._add('batch', work.batch_id, [o.text if isinstance(o, Transcript) else o.code for o in outputs])

    def sequence_done(self, work: SequenceWork, outputs: Sequence[SequenceResultItem], compute_ms: float) -> None:
        self._add('sequence', work.batch_id, [o.output if isinstance(o, SequenceOutput) else o.code for o in outputs])

    def sessions_ended(self, work: EndSessionsWork) -> None:
        self._add('ended', work.session_ids)

    def stream_chunk(self, work: StreamWork, index: int, piece: StreamPiece) -> None:
        self._add('chunk', work.request.stream_id, index)

    def stream_end(self, work: StreamWork, chunks: int, usage: Optional[Dict[str, Any]],
                   failure: Optional[ItemFailure]) -> None:
        self._add('end', work.request.stream_id, chunks, usage, None if failure is None else failure.code)

    def resource_loaded(self, work: LoadResourceWork, load: ResourceLoad) -> None:
        self._add('loaded', work.name, load.source, load.bytes)

    def resource_evicted(self, work: EvictResourceWork, bytes_freed: int) -> None:
        self._add('evicted', work.name, bytes_freed)

    def rejected(self, work: Work, failure: ItemFailure) -> None:
        self._add('rejected', work.NAME, failure.code)

    def stopped(self, work: Optional[CloseWork]) -> None:
        self._add('stopped', work is not None)


class _Exited(Exception):
    pass


def _exit(code: int) -> NoReturn:
    raise _Exited(code)


class Running:
    """A pipeline on its own thread, fed from a queue as the reader would be."""

    def __init__(self, adapter: Any, is_loaded: bool = True, options: Optional[PipelineOptions] = None) -> None:
        self.inbox: 'queue.Queue[Optional[Work]]' = queue.Queue()
        self.sink = Recorder()
        self.log = io.StringIO()
        self.pipeline = Pipeline(options or PipelineOptions(), PipelineDeps(receive=self.inbox.get, sink=self.sink,
                                                                 log=Logger(self.log), exit=_exit,
                                                                 clock=time.monotonic))
        self.exit_code: Optional[int] = None
        bound = threading.Event()

        def bind() -> None:
            self.pipeline.bind(work_kinds_of(adapter))
            bound.set()

        if is_loaded:
            self.inbox.put(CallWork(0, bind))
            self.sink._add('bound')
        self._thread = threading.Thread(target=self._run, name='pipeline-main', daemon=True)
        self._thread.start()
        if is_loaded:  # as the host, which sends LoadResult after the bind
            assert bound.wait(WAIT_S)

    def _run(self) -> None:
        self.exit_code = self.pipeline.run()

    def put(self, *works: Work) -> None:
        for work in works:
            self.inbox.put(work)

    def close(self) -> None:
        self.inbox.put(CloseWork(999))
        self._thread.join(WAIT_S)
        assert self.exit_code == 0


def batch(batch_id: str, *prompts: Optional[str]) -> BatchWork:
    return BatchWork(1, batch_id, [BatchInput(f'{batch_id}-{i}', np.zeros(i + 1, dtype=np.int16), None, prompt)
                                   for i, prompt in enumerate(prompts)])


def sequence(batch_id: str, *items: Tuple[str, str, bytes, bool, Dict[str, Any]]) -> SequenceWork:
    """items: (sessionId, stateIn, attached state, isLast, options); each item's audio is [1, 2, 3]."""
    return SequenceWork(1, batch_id, [
        SequenceWorkItem(f'{batch_id}-{i}', session, 0, np.array([1, 2, 3], dtype=np.int16), state_in,  # type: ignore[arg-type]
                         attached, is_last, options)
        for i, (session, state_in, attached, is_last, options) in enumerate(items)])


def stream(stream_id: str, credit: int, resource: Optional[str] = None, **params: Any) -> StreamWork:
    return StreamWork(1, StreamRequest(stream_id, f'r-{stream_id}', resource, params, b''), credit)


# -- work kinds ------------------------------------------------------------------------------


def test_work_kinds_are_checked_against_the_interfaces() -> None:
    kinds = work_kinds_of(Counting())
    assert (kinds.names, kinds.batch, kinds.sequence) == (('stream',), None, None)
    assert kinds.stream is not None and kinds.resources is not None
    assert work_kinds_of(EchoBatch()).resources is None

    class Liar(Summing):
        work_kinds = ('sequence', 'stream')

    class Nothing(Summing):
        work_kinds = ()

    for adapter in (Liar(), Nothing()):
        with pytest.raises(InstanceError) as caught:
            work_kinds_of(adapter)
        assert caught.value.code == 'load_failed'


def test_work_an_adapter_does_not_serve_is_rejected_with_unsupported_option() -> None:
    running = Running(EchoBatch())
    running.put(sequence('s', ('a', 'new', b'', False, {})), EndSessionsWork(1, ('a',)), stream('st', 1),
                LoadResourceWork(1, 'v', 'voice', {}), EvictResourceWork(1, 'v'))
    assert running.sink.wait_for(6)[1:] == [
        ('rejected', name, 'unsupported_option')
        for name in ('RunSequenceBatch', 'EndSessions', 'StartStream', 'LoadResource', 'EvictResource')]
    running.close()


def test_work_before_the_load_is_rejected_with_model_failed() -> None:
    running = Running(EchoBatch(), is_loaded=False)
    running.put(batch('b', None), stream('st', 1), sequence('s', ('a', 'new', b'', False, {})))
    assert running.sink.wait_for(3) == [('rejected', name, 'model_failed')
                                        for name in ('RunBatch', 'StartStream', 'RunSequenceBatch')]
    running.close()


# -- batch -----------------------------------------------------------------------------------


def test_batches_run_on_the_main_thread_and_their_results_come_in_order() -> None:
    adapter = EchoBatch()
    running = Running(adapter)
    running.put(batch('b1', None, None), batch('b2', 'fail', None), batch('b3', None))
    assert running.sink.wait_for(4)[1:] == [('batch', 'b1', ['1', '2']), ('batch', 'b2', ['model_failed', '2']),
                                        ('batch', 'b3', ['1'])]
    assert set(adapter.threads) == {'pipeline-main'}
    running.close()


@pytest.mark.parametrize('prompt, code', [('raise', 'model_failed'), ('oom', 'out_of_memory'),
                                          ('instance-error', 'invalid_audio'), ('short', 'model_failed')])
def test_a_batch_that_raises_fails_every_request_with_its_code(prompt: str, code: str) -> None:
    running = Running(EchoBatch())
    running.put(batch('b', None, prompt), batch('ok', None))
    assert running.sink.wait_for(3)[1:] == [('batch', 'b', [code, code]), ('batch', 'ok', ['1'])]
    running.close()


def test_a_staging_adapter_stages_on_the_stager_and_finishes_on_the_finisher() -> None:
    adapter = StagingBatch()
    running = Running(adapter)
    running.put(batch('b', None))
    assert running.sink.wait_for(2)[1:] == [('batch', 'b', ['b-0'])]
    assert adapter.log == [('stage', 'stager'), ('begin', 'pipeline-main'), ('finish', 'finisher')]
    running.close()


# -- sequence --------------------------------------------------------------------------------


def test_sequence_state_new_resident_attached_and_missing() -> None:
    adapter = Summing()
    running = Running(adapter)
    attached = struct.pack('<q', 100)
    running.put(sequence('q1', ('a', 'new', b'', False, {}), ('b', 'attached', attached, False, {})))
    running.put(sequence('q2', ('a', 'resident', b'', False, {}), ('b', 'resident', b'', True, {}),
                         ('c', 'resident', b'', False, {})))
    events = running.sink.wait_for(3)
    assert events[1:] == [('sequence', 'q1', [{'sum': 6}, {'sum': 106}]),
                          ('sequence', 'q2', [{'sum': 12}, {'sum': 112}, 'session_state_missing'])]
    assert adapter.states_in == [None, attached, struct.pack('<q', 6), struct.pack('<q', 106)]
    # a's state is held; b's went with its last item; c never had one.
    assert running.pipeline.snapshot().sessions == 1
    running.put(EndSessionsWork(1, ('a', 'zzz')))
    assert running.sink.wait_for(4)[3] == ('ended', ('a', 'zzz'))
    assert running.pipeline.snapshot().sessions == 0
    running.close()


class TimedSumming(Summing):
    """Summing that reports 2 ms of 'model' stage time per item in its stats."""

    def __init__(self) -> None:
        super().__init__()
        self.items = 0

    def run_sequence(self, items: Sequence[SequenceInput]) -> List[Union[SequenceOutput, ItemFailure]]:
        self.items += len(items)
        return super().run_sequence(items)

    def stats(self) -> AdapterStats:
        return AdapterStats(stage_ms={'model': 2.0 * self.items})


def test_sequence_batches_log_the_pipeline_with_the_adapters_stage_times_per_window() -> None:
    running = Running(TimedSumming(), options=PipelineOptions(pipeline_log_every=2))
    running.put(sequence('q1', ('a', 'new', b'', False, {}), ('b', 'new', b'', False, {})),
                sequence('q2', ('a', 'resident', b'', False, {})),
                sequence('q3', ('a', 'resident', b'', False, {})),
                sequence('q4', ('a', 'resident', b'', False, {})))
    running.sink.wait_for(5)
    running.close()
    lines = [json.loads(line) for line in running.log.getvalue().splitlines() if '"batch pipeline"' in line]
    assert [(line['batches'], line['stageMs']) for line in lines] == [(2, {'model': 6.0}), (2, {'model': 4.0})]


def test_a_failed_item_keeps_the_state_a_raising_batch_fails_all_and_big_states_are_refused() -> None:
    running = Running(Summing())
    running.put(sequence('q1', ('a', 'new', b'', False, {})))
    running.put(sequence('q2', ('a', 'resident', b'', False, {'fail': True}), ('b', 'new', b'', False, {'big': True})))
    running.put(sequence('q3', ('a', 'resident', b'', False, {}), ('b', 'resident', b'', False, {})))
    running.put(sequence('q4', ('a', 'resident', b'', False, {'raise': True})))
    events = running.sink.wait_for(5)
    assert events[1:] == [
        ('sequence', 'q1', [{'sum': 6}]),
        ('sequence', 'q2', ['model_failed', 'state_too_large']),
        ('sequence', 'q3', [{'sum': 12}, 'session_state_missing']),
        ('sequence', 'q4', ['model_failed']),
    ]
    running.close()


class SplitSumming(_Common):
    """Summing with the model part and the results split (``begin_sequence``): each finish waits until
    ``release`` holds its batch's first session (or is set for all with '*'); option 'raiseInFinish'."""

    work_kinds: ClassVar[Tuple[str, ...]] = ('sequence',)

    def __init__(self) -> None:
        self.log: List[Tuple[str, str, str]] = []
        self.released: set[str] = set()
        self.changed = threading.Condition()

    def release(self, session: str) -> None:
        with self.changed:
            self.released.add(session)
            self.changed.notify_all()

    def begin_sequence(self, items: Sequence[SequenceInput]) -> SequenceFinish:
        first = items[0].session_id
        self.log.append(('begin', first, threading.current_thread().name))
        totals = [(0 if i.state is None else struct.unpack('<q', i.state)[0]) + int(i.audio.sum()) for i in items]

        def finish() -> List[SequenceResultItem]:
            with self.changed:
                assert self.changed.wait_for(lambda: first in self.released or '*' in self.released, WAIT_S)
            self.log.append(('finish', first, threading.current_thread().name))
            if any(i.options.get('raiseInFinish') for i in items):
                raise RuntimeError('asked to raise in finish')
            return [SequenceOutput({'sum': t}, struct.pack('<q', t)) for t in totals]

        return finish


def test_a_sequence_batch_finishes_on_the_finisher_while_the_next_one_begins() -> None:
    adapter = SplitSumming()
    running = Running(adapter)
    running.put(sequence('q1', ('a', 'new', b'', False, {})), sequence('q2', ('b', 'new', b'', False, {})))
    deadline = time.monotonic() + WAIT_S
    while ('begin', 'b', 'pipeline-main') not in adapter.log and time.monotonic() < deadline:
        time.sleep(0.005)
    # q2 began on the main thread while q1's finish still waited: they overlap.
    assert adapter.log == [('begin', 'a', 'pipeline-main'), ('begin', 'b', 'pipeline-main')]
    adapter.release('*')
    events = running.sink.wait_for(3)
    assert events[1:] == [('sequence', 'q1', [{'sum': 6}]), ('sequence', 'q2', [{'sum': 6}])]
    assert [entry for entry in adapter.log if entry[0] == 'finish'] == [('finish', 'a', 'finisher'),
                                                                       ('finish', 'b', 'finisher')]
    running.close()


def test_a_sessions_next_item_and_its_end_wait_for_its_previous_finish() -> None:
    adapter = SplitSumming()
    running = Running(adapter)
    running.put(sequence('q1', ('a', 'new', b'', False, {})), sequence('q2', ('a', 'resident', b'', False, {})),
                EndSessionsWork(1, ('a',)))
    time.sleep(0.1)
    assert adapter.log == [('begin', 'a', 'pipeline-main')]  # q2 waits for the state q1's finish stores
    adapter.release('a')
    events = running.sink.wait_for(4)
    assert events[1:] == [('sequence', 'q1', [{'sum': 6}]), ('sequence', 'q2', [{'sum': 12}]), ('ended', ('a',))]
    assert [entry[0] for entry in adapter.log] == ['begin', 'finish', 'begin', 'finish']
    assert running.pipeline.snapshot().sessions == 0  # the EndSessions came after q2's state was stored
    running.close()


def test_a_finish_that_raises_fails_every_item_and_keeps_the_resident_states() -> None:
    adapter = SplitSumming()
    adapter.release('*')
    running = Running(adapter)
    running.put(sequence('q1', ('a', 'new', b'', False, {})),
                sequence('q2', ('a', 'resident', b'', False, {'raiseInFinish': True}), ('b', 'new', b'', False, {})),
                sequence('q3', ('a', 'resident', b'', False, {})))
    events = running.sink.wait_for(4)
    assert events[1:] == [('sequence', 'q1', [{'sum': 6}]), ('sequence', 'q2', ['model_failed', 'model_failed']),
                          ('sequence', 'q3', [{'sum': 12}])]
    running.close()


# -- streams ---------------------------------------------------------------------------------


def _chunks(events: List[Tuple[Any, ...]], stream_id: str) -> List[int]:
    return [e[2] for e in events if e[0] == 'chunk' and e[1] == stream_id]


def test_a_stream_sends_only_as_many_chunks_as_it_has_credit() -> None:
    running = Running(Counting())
    running.put(stream('s', 2, chunks=5))
    running.sink.wait_for(3)  # the bind, then two chunks
    time.sleep(0.1)
    assert _chunks(running.sink.events, 's') == [0, 1]
    running.pipeline.grant('s', 2)
    running.sink.wait_for(5)
    time.sleep(0.1)
    assert _chunks(running.sink.events, 's') == [0, 1, 2, 3]
    running.pipeline.grant('s', 5)  # the step that finds the end needs credit too
    events = running.sink.wait_for(7)
    assert events[-1] == ('end', 's', 5, {'chunks': 5}, None)
    assert running.pipeline.snapshot().streams == 0
    running.close()


def test_streams_interleave_one_step_each() -> None:
    running = Running(Counting())
    running.put(stream('a', 10, chunks=8, delayMs=1), stream('b', 10, chunks=4))
    events = running.sink.wait_for(1 + 12 + 2)
    chunks = [e[1] for e in events if e[0] == 'chunk']
    first_b = chunks.index('b')
    assert first_b <= 3  # b opened at most a few steps after a
    assert chunks[first_b - 1:first_b + 7] == ['a', 'b'] * 4
    running.close()


def test_frames_and_stream_steps_alternate() -> None:
    running = Running(Counting())
    running.put(stream('s', 101, chunks=100, delayMs=2))
    running.sink.wait_for(3)
    running.put(batch('b', None))  # the pipeline has no batch adapter: rejected, between two steps
    events = running.sink.wait_for(1 + 100 + 2)
    rejected_at = events.index(('rejected', 'RunBatch', 'unsupported_option'))
    assert rejected_at < 60  # not after the stream
    running.close()


def test_a_cancel_closes_the_generator_and_ends_the_stream_before_its_next_step() -> None:
    adapter = Counting()
    running = Running(adapter)
    running.put(stream('a', 1000, chunks=1000, delayMs=5), stream('b', 1000, chunks=1000, delayMs=5))
    running.sink.wait_for(6)
    sent = time.monotonic()
    running.pipeline.cancel('a')
    with running.sink._changed:
        assert running.sink._changed.wait_for(lambda: any(e[0] == 'end' for e in running.sink.events), WAIT_S)
        ended_after_s = time.monotonic() - sent
        events = list(running.sink.events)
    end = [e for e in events if e[0] == 'end'][0]
    assert end == ('end', 'a', len(_chunks(events, 'a')), None, 'stream_cancelled')
    assert ended_after_s < 0.05
    assert adapter.closed == ['a']
    running.pipeline.cancel('a')  # ended already: nothing more
    running.pipeline.cancel('b')
    final = running.sink.wait_for(len(events) + 1)
    assert [e for e in final if e[0] == 'end'][1][1:] == ('b', len(_chunks(final, 'b')), None, 'stream_cancelled')
    running.close()


def test_a_stream_cancelled_before_it_opens_ends_with_no_chunks() -> None:
    adapter = Counting()
    running = Running(adapter)
    running.put(CallWork(1, lambda: time.sleep(0.3)), stream('a', 5))
    deadline = time.monotonic() + WAIT_S
    while not running.pipeline.controls.cancel('a'):  # once the reader has registered it
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert running.sink.wait_for(2)[1] == ('end', 'a', 0, None, 'stream_cancelled')
    assert adapter.closed == []
    running.close()


def test_a_second_start_of_a_running_stream_is_rejected() -> None:
    running = Running(Counting())
    running.put(stream('a', 0), stream('a', 0))
    assert running.sink.wait_for(2)[1] == ('rejected', 'StartStream', 'model_failed')
    running.close()


def test_a_stream_that_raises_ends_with_model_failed_and_close_cancels_open_streams() -> None:
    running = Running(Counting())
    running.put(stream('bad', 10, chunks=5, failAt=2), stream('open', 1, chunks=5))
    events = running.sink.wait_for(1 + 2 + 1 + 1)
    assert ('end', 'bad', 2, None, 'model_failed') in events
    running.close()
    assert running.sink.events[-2:] == [('end', 'open', 1, None, 'stream_cancelled'), ('stopped', True)]


# -- resources -------------------------------------------------------------------------------


def test_resources_load_evict_and_reload_for_a_stream() -> None:
    adapter = Counting()
    running = Running(adapter)
    running.put(LoadResourceWork(1, 'v', 'voice', {'bytes': 10}), LoadResourceWork(1, 'v', 'voice', {'bytes': 10}),
                LoadResourceWork(1, 'x', 'voice', {'fail': True}))
    assert running.sink.wait_for(4)[1:] == [('loaded', 'v', 'disk', 10), ('loaded', 'v', 'resident', 10),
                                            ('rejected', 'LoadResource', 'out_of_memory')]
    running.put(EvictResourceWork(1, 'v'), EvictResourceWork(1, 'v'))
    assert running.sink.wait_for(6)[4:] == [('evicted', 'v', 10), ('evicted', 'v', 0)]
    # Not resident, but loaded once: the stream loads it again from the same source.
    running.put(stream('s', 5, resource='v', chunks=1), stream('t', 5, resource='never', chunks=1))
    events = running.sink.wait_for(9)
    assert ('end', 's', 1, {'chunks': 1}, None) in events
    assert ('end', 't', 0, None, 'resource_not_found') in events
    assert adapter.loads == ['v', 'v']
    running.close()


def test_a_stream_resource_the_host_never_loaded_is_asked_of_the_adapter_by_name() -> None:
    adapter = Counting()
    running = Running(adapter)
    # 'known' is in the adapter's catalogue: loaded by name, then resident for the next stream.
    running.put(stream('a', 5, resource='known', chunks=1), stream('b', 5, resource='known', chunks=1),
                stream('c', 5, resource='unknown', chunks=1))
    events = running.sink.wait_for(1 + 3 + 2)
    assert ('end', 'a', 1, {'chunks': 1}, None) in events
    assert ('end', 'b', 1, {'chunks': 1}, None) in events
    assert ('end', 'c', 0, None, 'resource_not_found') in events
    assert adapter.asked == [('known', 'voice', {}), ('unknown', 'voice', {})]
    assert adapter.held == {'known': 7}
    running.close()


def test_the_snapshot_never_reports_a_negative_busy_time() -> None:
    """Work that began after the clock was read (another thread, between the read and the lock) counts as
    just begun: a negative busyMs would be a bad heartbeat frame, and the supervisor would kill the instance."""
    times = iter([100.0, 100.0])
    pipeline = Pipeline(PipelineOptions(), PipelineDeps(receive=lambda: None, sink=Recorder(), log=Logger(io.StringIO()),
                                                        exit=_exit, clock=lambda: next(times)))
    pipeline._work_started = 100.005  # begun "after" the clock's reading
    assert pipeline.snapshot().busy_ms == 0


class Unsendable(Recorder):
    """A sink whose first result of each kind cannot be put in a frame (as an adapter's numpy number in a
    result's metadata cannot): the host's encoder raises ProtocolError."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: Set[str] = set()

    def _refuse_once(self, kind: str) -> None:
        if kind not in self.refused:
            self.refused.add(kind)
            raise ProtocolError(f'Expected JSON-encodable metadata: got a numpy value in a {kind}')

    def batch_done(self, work: BatchWork, outputs: Sequence[BatchOutput], compute_ms: float) -> None:
        if all(isinstance(o, Transcript) for o in outputs):
            self._refuse_once('batch')
        super().batch_done(work, outputs, compute_ms)

    def sequence_done(self, work: SequenceWork, outputs: Sequence[SequenceResultItem], compute_ms: float) -> None:
        if all(isinstance(o, SequenceOutput) for o in outputs):
            self._refuse_once('sequence')
        super().sequence_done(work, outputs, compute_ms)

    def stream_chunk(self, work: StreamWork, index: int, piece: StreamPiece) -> None:
        self._refuse_once('chunk')
        super().stream_chunk(work, index, piece)


def test_a_result_the_protocol_cannot_carry_fails_its_work_and_the_host_goes_on() -> None:
    running = Running(EchoBatch())
    running.sink = running.pipeline._sink = Unsendable()
    running.put(batch('b1', None, None), batch('b2', None))
    assert running.sink.wait_for(2) == [('batch', 'b1', ['model_failed', 'model_failed']), ('batch', 'b2', ['1'])]
    running.close()
    summing = Running(Summing())
    summing.sink = summing.pipeline._sink = Unsendable()
    summing.put(sequence('q1', ('a', 'new', b'', False, {})))
    assert summing.sink.wait_for(1) == [('sequence', 'q1', ['model_failed'])]
    # The state made for the failed item is not kept: the next item is asked for its checkpoint.
    assert summing.pipeline.snapshot().sessions == 0
    summing.put(sequence('q2', ('a', 'resident', b'', False, {})))
    assert summing.sink.wait_for(2)[1] == ('sequence', 'q2', ['session_state_missing'])
    summing.close()
    counting = Running(Counting())
    counting.sink = counting.pipeline._sink = Unsendable()
    counting.put(stream('s', 2, chunks=3))
    assert counting.sink.wait_for(1) == [('end', 's', 0, None, 'model_failed')]
    assert counting.pipeline.snapshot().streams == 0
    counting.close()


class BlockingFinish(_Common):
    """A batch adapter whose results wait (on the finisher thread) until ``release`` is set, as a GPU copy
    that has not arrived would."""

    work_kinds: ClassVar[Tuple[str, ...]] = ('batch',)

    def __init__(self) -> None:
        self.release = threading.Event()
        self.finishing = threading.Event()

    def stage(self, inputs: Sequence[BatchInput]) -> Optional[StagedBatch]:
        return None

    def begin(self, inputs: Sequence[BatchInput], staged: Optional[StagedBatch]) -> BatchFinish:
        def finish() -> List[BatchOutput]:
            self.finishing.set()
            assert self.release.wait(WAIT_S)
            return [transcript(i.request_id) for i in inputs]

        return finish


def test_a_batch_whose_results_are_still_being_built_counts_as_busy() -> None:
    """The model part has returned, but the finisher still waits for the results: the heartbeat says busy,
    with the batch's age, until the results go out; then idle."""
    adapter = BlockingFinish()
    running = Running(adapter)
    running.put(batch('b', None))
    assert adapter.finishing.wait(WAIT_S)
    time.sleep(0.05)
    busy = running.pipeline.snapshot().busy_ms
    assert busy is not None and busy >= 50
    adapter.release.set()
    running.sink.wait_for(2)
    assert running.pipeline.snapshot().busy_ms is None
    running.close()


def test_a_sequence_batch_whose_results_are_still_being_built_counts_as_busy() -> None:
    adapter = SplitSumming()
    running = Running(adapter)
    running.put(sequence('q', ('s', 'new', b'', False, {})))
    deadline = time.monotonic() + WAIT_S
    while not adapter.log and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)
    busy = running.pipeline.snapshot().busy_ms
    assert busy is not None and busy >= 50
    adapter.release('*')
    running.sink.wait_for(2)
    assert running.pipeline.snapshot().busy_ms is None
    running.close()
