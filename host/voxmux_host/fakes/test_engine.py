"""The ``test`` adapter: a deterministic test double whose behaviour the tests control.

Load options (all optional; unknown keys fail the load so that typos surface):

| option | type | effect |
| --- | --- | --- |
| ``mode`` | ``'echo'`` or ``'slow'`` | ``slow`` is ``echo`` with ``batchDelayMs`` defaulting to 500 |
| ``batchDelayMs`` | int | sleep this long once per batch |
| ``itemDelayMs`` | int | sleep this long per request |
| ``finishDelayMs`` | int | sleep this long while building a batch's results (on the host's finisher thread) |
| ``stageDelayMs`` | int | sleep this long while staging a batch (on the host's stager thread) |
| ``loadDelayMs`` | int | sleep this long inside ``load`` (to observe the load lock) |
| ``probeDelayMs`` | int | sleep this long inside ``probe`` (to trip the probe timeout) |
| ``crashOnLoad`` | bool | ``os._exit(70)`` inside ``load`` |
| ``failLoad`` | bool | ``load`` raises ``InstanceError('load_failed')`` |
| ``crashAfterBatches`` | int | ``os._exit(70)`` when a batch starts after this many batches ran |
| ``wedgeProbe`` | bool | ``probe`` returns False |

A request's text is ``echo samples=<n> crc=<crc32 of its int16 LE bytes, 8 hex digits>``,
so a result identifies its input exactly. A request prompt may hold a command:

| prompt | effect |
| --- | --- |
| ``voxmux-test:crash`` | ``os._exit(70)`` when the batch reaches that request |
| ``voxmux-test:hang`` | ``run_batch`` never returns |
| ``voxmux-test:fail`` | that request fails with ``model_failed``; the others succeed |
| ``voxmux-test:bad-audio`` | that request fails with ``invalid_audio`` |
| ``voxmux-test:fail-finish`` | building the batch's results raises: every request of it fails |

The adapter splits each batch (``begin_batch``): the sleeps, crashes and hangs above happen in the
model's part, on the host's main thread; the results are built, after ``finishDelayMs``, by the
function it returns. It also stages each batch (``stage_batch``, on the host's stager thread, after
``stageDelayMs``): it copies the requests' audio, and the echo then reads those copies.
"""
from __future__ import annotations

import os
import threading
import time
import zlib
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
from numpy.typing import NDArray

from ..errors import InstanceError
from ..model_api import (
    AdapterStats,
    BatchFinish,
    LoadContext,
    LoadInfo,
    RequestFailure,
    RequestInput,
    RequestOutput,
    Segment,
    WarmupInfo,
    Word,
)

SAMPLE_RATE_HZ = 16000
CRASH_EXIT_CODE = 70
SLOW_BATCH_DELAY_MS = 500

PROMPT_CRASH = 'voxmux-test:crash'
PROMPT_HANG = 'voxmux-test:hang'
PROMPT_FAIL = 'voxmux-test:fail'
PROMPT_BAD_AUDIO = 'voxmux-test:bad-audio'
PROMPT_FAIL_FINISH = 'voxmux-test:fail-finish'

_INT_OPTIONS = ('batchDelayMs', 'itemDelayMs', 'finishDelayMs', 'stageDelayMs', 'loadDelayMs', 'probeDelayMs',
                'crashAfterBatches')
_BOOL_OPTIONS = ('crashOnLoad', 'failLoad', 'wedgeProbe')


def echo_text(audio: NDArray[np.int16]) -> str:
    """``echo samples=<n> crc=<crc32 of the int16 LE bytes>``: the bytes as they crossed the wire."""
    data = np.ascontiguousarray(audio, dtype='<i2').tobytes()
    return f'echo samples={audio.shape[0]} crc={zlib.crc32(data):08x}'


class _StagedAudio:
    """Copies of a batch's audio, made on the stager thread."""

    def __init__(self, audio: List[NDArray[np.int16]]) -> None:
        self.audio = audio
        self.released = False

    def release(self) -> None:
        self.released = True


class TestEngineAdapter:
    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self._options: Dict[str, Any] = {}
        self._batches_run = 0
        self._is_loaded = False

    def load(self, ctx: LoadContext) -> LoadInfo:
        self._options = _parse_options(ctx.options)
        if self._options['loadDelayMs'] > 0:
            time.sleep(self._options['loadDelayMs'] / 1000)
        if self._options['crashOnLoad']:
            os._exit(CRASH_EXIT_CODE)
        if self._options['failLoad']:
            raise InstanceError('load_failed', 'The test adapter was asked to fail its load (failLoad)')
        self._is_loaded = True
        return LoadInfo(device='cpu', parameters=0, memory_bytes=0)

    def warmup(self) -> WarmupInfo:
        return WarmupInfo(graphs_captured=0)

    def run_batch(self, batch: Sequence[RequestInput]) -> List[Union[RequestOutput, RequestFailure]]:
        return self.begin_batch(batch)()

    def stage_batch(self, batch: Sequence[RequestInput]) -> _StagedAudio:
        if self._options['stageDelayMs'] > 0:
            time.sleep(self._options['stageDelayMs'] / 1000)
        return _StagedAudio([request.audio.copy() for request in batch])

    def begin_batch(self, batch: Sequence[RequestInput], staged: Optional[_StagedAudio] = None) -> BatchFinish:
        if staged is not None:
            if staged.released or len(staged.audio) != len(batch):
                raise RuntimeError('The test adapter got staged audio that is released or of another batch')
            batch = [replace(request, audio=audio) for request, audio in zip(batch, staged.audio)]
            staged.release()
        crash_after = self._options['crashAfterBatches']
        if crash_after is not None and self._batches_run >= crash_after:
            os._exit(CRASH_EXIT_CODE)
        if self._options['batchDelayMs'] > 0:
            time.sleep(self._options['batchDelayMs'] / 1000)
        results: List[Union[RequestOutput, RequestFailure]] = []
        for request in batch:
            if self._options['itemDelayMs'] > 0:
                time.sleep(self._options['itemDelayMs'] / 1000)
            results.append(self._run_one(request))
        self._batches_run += 1
        finish_delay_s = self._options['finishDelayMs'] / 1000
        must_fail = any(request.prompt == PROMPT_FAIL_FINISH for request in batch)

        def finish() -> List[Union[RequestOutput, RequestFailure]]:
            if finish_delay_s > 0:
                time.sleep(finish_delay_s)
            if must_fail:
                raise RuntimeError('The test adapter was asked to fail building this batch (fail-finish)')
            return results

        return finish

    def _run_one(self, request: RequestInput) -> Union[RequestOutput, RequestFailure]:
        if request.prompt == PROMPT_CRASH:
            os._exit(CRASH_EXIT_CODE)
        if request.prompt == PROMPT_HANG:
            threading.Event().wait()  # never set: the batch never returns
        if request.prompt == PROMPT_FAIL:
            return RequestFailure(request.request_id, 'model_failed', 'The test adapter was asked to fail this request')
        if request.prompt == PROMPT_BAD_AUDIO:
            return RequestFailure(request.request_id, 'invalid_audio',
                                  'The test adapter was asked to reject this audio')
        text = echo_text(request.audio)
        duration_s = request.audio.shape[0] / SAMPLE_RATE_HZ
        tokens = text.split(' ')
        step = duration_s / len(tokens)
        words = [Word(token, i * step, (i + 1) * step) for i, token in enumerate(tokens)]
        return RequestOutput(
            request_id=request.request_id,
            text=text,
            language=request.language or 'en',
            duration_s=duration_s,
            segments=[Segment(0.0, duration_s, text)],
            words=words if request.word_timestamps else None,
        )

    def stats(self) -> AdapterStats:
        return AdapterStats(memory_bytes=0, eager_batches=self._batches_run, graph_replays=0)

    def probe(self) -> bool:
        if self._options.get('probeDelayMs', 0) > 0:
            time.sleep(self._options['probeDelayMs'] / 1000)
        return not self._options.get('wedgeProbe', False)

    def close(self) -> None:
        self._is_loaded = False


def _parse_options(options: Dict[str, Any]) -> Dict[str, Any]:
    parsed: Dict[str, Any] = {
        'mode': 'echo', 'batchDelayMs': None, 'itemDelayMs': 0, 'finishDelayMs': 0, 'stageDelayMs': 0, 'loadDelayMs': 0,
        'probeDelayMs': 0,
        'crashAfterBatches': None, 'crashOnLoad': False, 'failLoad': False, 'wedgeProbe': False,
    }
    for key, value in options.items():
        if key == 'mode':
            if value not in ('echo', 'slow'):
                raise InstanceError('load_failed', f"Expected option mode to be 'echo' or 'slow': got {value!r}")
        elif key in _INT_OPTIONS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InstanceError('load_failed', f'Expected option {key} to be a non-negative integer: got {value!r}')
        elif key in _BOOL_OPTIONS:
            if not isinstance(value, bool):
                raise InstanceError('load_failed', f'Expected option {key} to be a boolean: got {value!r}')
        else:
            known = ', '.join(['mode', *_INT_OPTIONS, *_BOOL_OPTIONS])
            raise InstanceError('load_failed', f'Expected an option of the test adapter ({known}): got {key!r}')
        parsed[key] = value
    if parsed['batchDelayMs'] is None:
        parsed['batchDelayMs'] = SLOW_BATCH_DELAY_MS if parsed['mode'] == 'slow' else 0
    return parsed
