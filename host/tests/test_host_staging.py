"""The host's stager thread, in process: what a staging adapter is handed, and on which thread; and the
main thread's 'batch pipeline' log lines."""
from __future__ import annotations

import io
import json
import os
import threading
import time
from typing import Any, BinaryIO, ClassVar, List, NoReturn, Optional, Sequence, Tuple

import numpy as np

from voxmux_host.host import HostDeps, HostOptions, InstanceHost
from voxmux_host.log import Logger
from voxmux_host.model_api import (
    AdapterStats,
    BatchFinish,
    BatchInput,
    BatchOutput,
    LoadContext,
    LoadInfo,
    StagedBatch,
    Transcript,
    WarmupInfo,
)
from voxmux_host.messages import (
    BatchItem,
    BatchResult,
    Close,
    Closed,
    Hello,
    LoadRequest,
    LoadResult,
    Message,
    RunBatch,
)
from voxmux_host.protocol import encode_message, from_frame, read_frame


class _Staged:
    def __init__(self, batch_ids: List[str], thread: str) -> None:
        self.batch_ids = batch_ids
        self.thread = thread
        self.releases = 0

    def release(self) -> None:
        self.releases += 1


class RecordingAdapter:
    """Stages by remembering the request ids; ``stageDelayMs`` and ``failStage`` come from the load options."""

    work_kinds: ClassVar[Tuple[str, ...]] = ('batch',)

    def __init__(self) -> None:
        self.staged: List[_Staged] = []
        self.begun: List[Tuple[List[str], Optional[_Staged], str]] = []
        self.stage_delay_s = 0.0
        self.fail_stage = False

    def load(self, ctx: LoadContext) -> LoadInfo:
        self.stage_delay_s = float(ctx.options.get('stageDelayMs', 0)) / 1000
        self.fail_stage = bool(ctx.options.get('failStage', False))
        return LoadInfo(device='cpu')

    def warmup(self) -> WarmupInfo:
        return WarmupInfo()

    def stage(self, batch: Sequence[BatchInput]) -> _Staged:
        time.sleep(self.stage_delay_s)
        if self.fail_stage:
            raise RuntimeError('staging failed on purpose')
        staged = _Staged([r.request_id for r in batch], threading.current_thread().name)
        self.staged.append(staged)
        return staged

    def begin(self, batch: Sequence[BatchInput], staged: Optional[StagedBatch]) -> BatchFinish:
        assert staged is None or isinstance(staged, _Staged)
        self.begun.append(([r.request_id for r in batch], staged, threading.current_thread().name))
        if staged is not None:
            staged.release()
        outputs: List[BatchOutput] = [Transcript(f'{r.audio.shape[0]} samples', 'en', 0.0, None, None) for r in batch]
        return lambda: outputs

    def stats(self) -> AdapterStats:
        return AdapterStats()

    def probe(self) -> bool:
        return True

    def close(self) -> None:
        pass


class _Exited(Exception):
    pass


def _exit(code: int) -> NoReturn:
    raise _Exited(code)


class InProcessHost:
    """An InstanceHost on its own thread, with pipes for fd 3 and fd 4."""

    def __init__(self, adapter: RecordingAdapter, pipeline_log_every: int = 200) -> None:
        down_r, down_w = os.pipe()
        up_r, self._up_w = os.pipe()
        self._down: Optional[BinaryIO] = os.fdopen(down_w, 'wb', buffering=0)
        self._up = os.fdopen(up_r, 'rb')
        self.log = io.StringIO()
        deps = HostDeps(input=os.fdopen(down_r, 'rb'), output_fd=self._up_w, log=Logger(self.log),
                        registry={'recording': lambda: adapter}, exit=_exit)
        options = HostOptions(adapter='recording', probe_interval_ms=0, pipeline_log_every=pipeline_log_every)
        self._host = InstanceHost(options, deps)
        self.exit_code: Optional[int] = None
        self._thread = threading.Thread(target=self._run, name='host-main', daemon=True)
        self._thread.start()
        assert isinstance(self.receive(), Hello)

    def _run(self) -> None:
        self.exit_code = self._host.run()
        os.close(self._up_w)

    def send(self, message: Message, correlation_id: int) -> None:
        assert self._down is not None
        self._down.write(encode_message(message, correlation_id))

    def close_input(self) -> None:
        assert self._down is not None
        self._down.close()
        self._down = None

    def receive(self) -> Optional[Message]:
        frame = read_frame(self._up)
        return None if frame is None else from_frame(frame)

    def join(self) -> None:
        self._thread.join(10)
        assert not self._thread.is_alive()


def _batch(batch_id: str, *request_ids: str) -> RunBatch:
    requests = tuple(BatchItem(rid, 4, None, None, False, 'transcribe', 0.0, False) for rid in request_ids)
    return RunBatch(batch_id, requests, np.zeros(4 * len(requests), dtype='<i2').tobytes())


def _close(host: InProcessHost) -> None:
    """Close, then end the input: the host finishes what it runs and exits 0 (ending the input
    alone while the main thread is still busy would end it at once)."""
    host.send(Close(), 99)
    assert isinstance(host.receive(), Closed)
    host.close_input()
    host.join()
    assert host.exit_code == 0


def _loaded(options: dict[str, Any], pipeline_log_every: int = 200) -> Tuple[InProcessHost, RecordingAdapter]:
    adapter = RecordingAdapter()
    host = InProcessHost(adapter, pipeline_log_every)
    host.send(LoadRequest('rec-0', 'rec', 'recording', options, None), 1)
    assert isinstance(host.receive(), LoadResult)
    return host, adapter


def test_each_batch_is_staged_on_the_stager_thread_and_begun_with_its_own_staging() -> None:
    host, adapter = _loaded({})
    host.send(_batch('b-1', 'r-1', 'r-2'), 2)
    host.send(_batch('b-2', 'r-3'), 3)
    results = [host.receive(), host.receive()]
    assert [r.batch_id for r in results if isinstance(r, BatchResult)] == ['b-1', 'b-2']
    assert [(ids, staged.batch_ids if staged else None, thread) for ids, staged, thread in adapter.begun] == [
        (['r-1', 'r-2'], ['r-1', 'r-2'], 'host-main'),
        (['r-3'], ['r-3'], 'host-main'),
    ]
    assert {s.thread for s in adapter.staged} == {'stager'}
    assert all(s.releases == 1 for s in adapter.staged)
    _close(host)
    assert host.exit_code == 0


def test_a_batch_dropped_after_staging_is_released_and_never_begun() -> None:
    # The batch is still being staged when the input ends without a Close: the supervisor is gone,
    # so the main thread drops the batch; what was staged for it is given back.
    host, adapter = _loaded({'stageDelayMs': 300})
    host.send(_batch('b-1', 'r-1'), 2)
    time.sleep(0.1)
    host.close_input()
    assert host.receive() is None  # no BatchResult: the host exits
    host.join()
    assert host.exit_code == 0
    assert adapter.begun == []
    assert [(s.batch_ids, s.releases) for s in adapter.staged] == [(['r-1'], 1)]


def test_a_batch_whose_staging_fails_runs_unstaged() -> None:
    host, adapter = _loaded({'failStage': True})
    host.send(_batch('b-1', 'r-1'), 2)
    result = host.receive()
    assert isinstance(result, BatchResult)
    assert [r.error for r in result.results] == [None]
    assert [(ids, staged) for ids, staged, _ in adapter.begun] == [(['r-1'], None)]
    _close(host)


def test_the_main_thread_logs_where_its_time_went_every_n_batches() -> None:
    host, _ = _loaded({}, pipeline_log_every=2)
    for k in range(4):
        host.send(_batch(f'b-{k}', f'r-{k}'), 2 + k)
    assert [isinstance(host.receive(), BatchResult) for _ in range(4)] == [True] * 4
    _close(host)  # Close runs after the batches, in order: the main thread has logged by then
    lines = [json.loads(line) for line in host.log.getvalue().splitlines()]
    summaries = [line for line in lines if line['msg'] == 'batch pipeline']
    assert [s['batches'] for s in summaries] == [2, 2]
    for summary in summaries:
        assert summary['level'] == 'info' and summary['modelMsP50'] >= 0
        assert 0 <= summary['readyShare'] <= 1 and summary['waitMsTotal'] >= 0
