"""bench_sequence_pipeline.py on the tiny configuration: every level answers every batch without errors,
the time per batch is at least the device wait, and the JSON line names the side."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_sequence_pipeline  # noqa: E402


def test_dry_run_keeps_each_level_in_flight_and_reports_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pipeline.jsonl"
    threads, interval = torch.get_num_threads(), sys.getswitchinterval()
    torch.set_num_threads(3)
    sys.setswitchinterval(0.0123)
    try:
        status = bench_sequence_pipeline.main(["--config", "tiny", "--dtype", "fp32", "--batch-size", "3",
                                               "--batches", "4", "--in-flight", "1,2", "--forward-ms-base", "5",
                                               "--forward-ms-per-session", "1", "--label", "candidate round 1",
                                               "--out", str(out)])
        # The instance's settings hold for the bench only: the caller keeps its own.
        assert (torch.get_num_threads(), sys.getswitchinterval()) == (3, 0.0123)
    finally:
        torch.set_num_threads(threads)
        sys.setswitchinterval(interval)
    assert status == 0
    result = json.loads(out.read_text().strip())
    assert result["label"] == "candidate round 1" and result["batchSize"] == 3
    assert [level["inFlight"] for level in result["levels"]] == [1, 2]
    for level in result["levels"]:
        assert level["batches"] == 4 and level["errors"] == 0
        assert level["forwardWaitMs"] == 8.0
        assert level["msPerBatch"] >= 8.0  # each batch waits for its forward pass at least
        assert level["chunksPerSecond"] == pytest.approx(3 * level["batchesPerSecond"], rel=0.01)
        stages = level["stageMsPerChunk"]
        assert {"prepare", "stage", "forward", "update", "finish"} <= set(stages)
        assert stages["forward"] >= 8.0 / 3  # the wait, shared by the batch's 3 chunks
    assert "in flight" in capsys.readouterr().out
