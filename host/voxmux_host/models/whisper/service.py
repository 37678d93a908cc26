"""The Whisper engine's decoding on a thread of its own, so that requests join a running decode.

The host runs a batch adapter's ``begin`` on its main thread and the returned ``finish`` on its finisher
thread, in order. The adapter's ``begin`` only submits the batch here and returns; this thread takes
each submitted batch into the engine's queue at its next step (:meth:`WhisperEngine.submit`) and steps
the engine (:meth:`WhisperEngine.tick`) while anything waits or decodes. A batch that the host sends
while another decodes (the scheduler's ``maxRunningBatchesPerInstance`` above 1) so joins free cache
slots at once instead of waiting for the running batch to end. Every GPU call of decoding is made on
this one thread. A failed step fails every batch that was in the engine, and the engine starts empty.
:meth:`DecodeService.call` runs other GPU work on this thread between steps (warmup): libraries keep some
state per thread (torch's cache of cuDNN attention graphs, one per shape; cuBLAS handles), so a call that
is to spare serving a first-time cost must be made on the thread that serves.
"""
from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Deque, List, Sequence, Tuple, TypeVar

import torch

from .decoding import DecodeBatch, RequestOptions, Transcription, WhisperEngine

#: How long close() waits for the thread, in seconds.
CLOSE_TIMEOUT_S = 10.0

_Submission = Tuple[Sequence[torch.Tensor], Sequence[RequestOptions], "Future[List[Transcription]]"]
_Call = Tuple[Callable[[], Any], "Future[Any]"]
_T = TypeVar("_T")


class DecodeService:
    def __init__(self, engine: WhisperEngine) -> None:
        self._engine = engine
        self._changed = threading.Condition()
        self._incoming: Deque[_Submission] = deque()
        self._calls: Deque[_Call] = deque()
        self._is_closed = False
        self._thread = threading.Thread(target=self._run, name="whisper-decode", daemon=True)
        self._thread.start()

    def submit(self, audios: Sequence[torch.Tensor], requests: Sequence[RequestOptions]) -> "Future[List[Transcription]]":
        """Queues a batch; the future holds its transcriptions, in order, or the error that failed it."""
        future: "Future[List[Transcription]]" = Future()
        with self._changed:
            if self._is_closed:
                future.set_exception(RuntimeError("The whisper decoder is closed"))
                return future
            self._incoming.append((audios, requests, future))
            self._changed.notify()
        return future

    def call(self, fn: Callable[[], _T]) -> "Future[_T]":
        """Runs ``fn`` on the decoding thread before its next step; the future holds its value or error."""
        future: "Future[_T]" = Future()
        with self._changed:
            if self._is_closed:
                future.set_exception(RuntimeError("The whisper decoder is closed"))
                return future
            self._calls.append((fn, future))
            self._changed.notify()
        return future

    def close(self) -> None:
        """Stops the thread; batches not done fail."""
        with self._changed:
            self._is_closed = True
            self._changed.notify()
        self._thread.join(CLOSE_TIMEOUT_S)

    def _run(self) -> None:
        engine = self._engine
        if engine.device.type == "cuda":
            torch.cuda.set_device(engine.device)
        running: List[Tuple[DecodeBatch, "Future[List[Transcription]]"]] = []
        while True:
            with self._changed:
                while not self._incoming and not self._calls and engine.is_idle and not self._is_closed:
                    self._changed.wait()
                if self._is_closed:
                    closed = RuntimeError("The whisper decoder closed before the batch was done")
                    for _, future in running:
                        future.set_exception(closed)
                    for _, _, future in self._incoming:
                        future.set_exception(closed)
                    for _, call_future in self._calls:
                        call_future.set_exception(closed)
                    return
                new = list(self._incoming)
                self._incoming.clear()
                calls = list(self._calls)
                self._calls.clear()
            for fn, call_future in calls:
                try:
                    call_future.set_result(fn())
                except BaseException as err:  # noqa: BLE001 - the caller's error, not the decoding's
                    call_future.set_exception(err)
            try:
                for audios, requests, future in new:
                    running.append((engine.submit(audios, requests), future))
                engine.tick()
            except BaseException as err:  # noqa: BLE001 - the batches in the engine fail with it; the thread goes on
                engine.abort()
                failed = {id(f) for _, f in running}
                for _, future in running:
                    future.set_exception(err)
                for _, _, future in new:
                    if id(future) not in failed:
                        future.set_exception(err)
                running = []
                continue
            still: List[Tuple[DecodeBatch, "Future[List[Transcription]]"]] = []
            for batch, future in running:
                if batch.done:
                    future.set_result(engine.results(batch))
                else:
                    still.append((batch, future))
            running = still
