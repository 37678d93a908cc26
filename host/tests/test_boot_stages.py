"""StageTimer: the one way an adapter reports the parts of its boot (#20)."""
from __future__ import annotations

from typing import List

import pytest

from voxmux_host.boot_stages import StageTimer
from voxmux_host.messages import BootStage


def fake_clock(readings: List[float]):  # type: ignore[no-untyped-def]
    return lambda: readings.pop(0)


def test_times_blocks_in_order_with_their_bytes_and_take_forgets_them() -> None:
    timer = StageTimer(fake_clock([10.0, 10.5, 11.0, 11.25]))
    with timer.stage('weight_read') as part:
        part.bytes = 1 << 30
    with timer.stage('device_upload'):
        pass
    timer.record('graph_capture', 12.3456)
    assert timer.take() == (
        BootStage('weight_read', 500.0, 1 << 30),
        BootStage('device_upload', 250.0, 0),
        BootStage('graph_capture', 12.346, 0),
    )
    assert timer.take() == ()


def test_a_block_that_raises_records_nothing() -> None:
    timer = StageTimer(fake_clock([0.0, 1.0]))
    with pytest.raises(RuntimeError):
        with timer.stage('compile'):
            raise RuntimeError('no compiler')
    assert timer.take() == ()


def test_unknown_stages_and_negative_values_are_refused() -> None:
    timer = StageTimer()
    with pytest.raises(ValueError, match='boot stage'):
        timer.record('loading', 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='boot stage'):
        with timer.stage('loading'):  # type: ignore[arg-type]
            pass
    with pytest.raises(ValueError, match='non-negative'):
        timer.record('warmup', -1.0)
