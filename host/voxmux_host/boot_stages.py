"""The one way an adapter reports the parts of its boot: a :class:`StageTimer`.

An adapter times the parts of its ``load`` and ``warmup`` it can tell apart (reading weights,
building the model, uploading it to the device, compiling, first runs, CUDA graph capture; the
names are the protocol's ``BOOT_STAGE_STAGE_VALUES``) and returns them in ``LoadInfo.stages`` and
``WarmupInfo.stages``; the host sends them in LoadResult and WarmupResult (docs/protocol.md). The
supervisor adds the process start and turns them into metrics, the instance's startup log line and
its facts in the readiness snapshot.

Example::

    timer = StageTimer()
    with timer.stage('weight_read') as part:
        data = read_weights(path)
        part.bytes = len(data)
    with timer.stage('device_upload'):
        model.to('cuda')
    return LoadInfo(device='cuda:0', stages=timer.take())
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, List, Tuple

from .messages import BOOT_STAGE_STAGE_VALUES, BootStage, BootStageStage

__all__ = ['BOOT_STAGE_STAGE_VALUES', 'BootStage', 'StagePart', 'StageTimer']


@dataclass
class StagePart:
    """A stage being timed: set ``bytes`` to what it read or uploaded."""

    bytes: int = 0


class StageTimer:
    """Collects timed boot stages in the order they ran. Not thread-safe: one per load or warmup."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._stages: List[BootStage] = []

    @contextmanager
    def stage(self, name: BootStageStage) -> Iterator[StagePart]:
        """Times the block as stage ``name``; a block that raises records nothing."""
        _check(name)
        part = StagePart()
        started = self._clock()
        yield part
        self.record(name, (self._clock() - started) * 1000, part.bytes)

    def record(self, name: BootStageStage, ms: float, bytes: int = 0) -> None:
        """Adds a stage timed elsewhere (``ms`` milliseconds, ``bytes`` moved)."""
        _check(name)
        if ms < 0 or bytes < 0:
            raise ValueError(f'Expected a non-negative duration and byte count for stage {name}: got {ms} ms, {bytes} bytes')
        self._stages.append(BootStage(name, round(float(ms), 3), int(bytes)))

    def take(self) -> Tuple[BootStage, ...]:
        """The stages recorded so far, and forgets them."""
        stages, self._stages = tuple(self._stages), []
        return stages


def _check(name: str) -> None:
    if name not in BOOT_STAGE_STAGE_VALUES:
        raise ValueError(f"Expected a boot stage ({', '.join(BOOT_STAGE_STAGE_VALUES)}): got {name!r}")
