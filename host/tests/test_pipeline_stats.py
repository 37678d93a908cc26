"""PipelineStats: the main thread's batch timings, summarised (a fake clock, no threads)."""
from __future__ import annotations

from voxmux_host.pipeline_stats import PipelineStats


def test_back_to_back_batches_count_their_gaps_and_a_full_ready_share() -> None:
    stats = PipelineStats(every=3)
    t = 10.0
    for k in range(3):
        stats.began(t)
        t += 0.100  # 100 ms of model work
        summary = stats.ended(t, next_is_ready=True)
        assert (summary is None) == (k < 2)
        t += 0.002  # 2 ms on the main thread before the next batch starts
    assert summary is not None
    assert summary["batches"] == 3 and summary["modelMsP50"] == 100.0
    assert summary["gapMsP50"] == 2.0 and summary["gapMsTotal"] == 4.0  # the first batch has no predecessor
    assert summary["readyShare"] == 1.0 and summary["waitMsTotal"] == 0.0


def test_waiting_for_a_batch_that_had_not_arrived_is_a_wait_not_a_gap() -> None:
    stats = PipelineStats(every=4)
    t = 0.0
    readiness = [True, False, True, True]
    summary = None
    for ready in readiness:
        stats.began(t)
        t += 0.050
        summary = stats.ended(t, next_is_ready=ready)
        t += 0.001 if ready else 0.030
    assert summary is not None
    # Batch 2 began after a gap (1 ms), batch 3 after a wait (30 ms), batch 4 after a gap (1 ms).
    assert summary["gapMsTotal"] == 2.0 and summary["waitMsTotal"] == 30.0
    assert summary["readyShare"] == round(2 / 3, 3)


def test_each_summary_covers_its_own_window() -> None:
    stats = PipelineStats(every=2)
    t = 0.0
    summaries = []
    for model_s in (0.010, 0.010, 0.040, 0.040):
        stats.began(t)
        t += model_s
        summaries.append(stats.ended(t, next_is_ready=True))
    assert [s["modelMsP50"] if s else None for s in summaries] == [None, 10.0, None, 40.0]
    second = summaries[3]
    assert second is not None and second["batches"] == 2 and second["readyShare"] == 1.0


def test_an_end_without_a_beginning_is_ignored() -> None:
    stats = PipelineStats(every=1)
    assert stats.ended(1.0, next_is_ready=True) is None


def test_a_window_also_ends_after_its_interval_and_counts_clips_per_batch() -> None:
    stats = PipelineStats(every=1000, interval_s=1.0)
    t = 0.0
    summaries = []
    for clips in (32, 16, 32):
        stats.began(t, clips)
        t += 0.4
        summaries.append(stats.ended(t, next_is_ready=True))
    # The third batch ends 1.2 s after the first began: the window closes there.
    assert summaries[:2] == [None, None]
    third = summaries[2]
    assert third is not None and third["batches"] == 3 and third["clipsPerBatch"] == round(80 / 3, 2)
    assert third["windowS"] == 1.2
    # The next window starts with the next batch.
    stats.began(t + 5.0, 8)
    last = stats.ended(t + 6.5, next_is_ready=False)
    assert last is not None and last["batches"] == 1 and last["clipsPerBatch"] == 8.0 and last["windowS"] == 1.5
