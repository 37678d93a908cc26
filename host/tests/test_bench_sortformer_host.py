"""bench_sortformer_host.py on the tiny configuration: every stage is timed for every batch size, the
states grow as the sessions go on, and the JSON line names the side."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_sortformer_host  # noqa: E402


def test_dry_run_times_every_stage_per_batch_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        status = bench_sortformer_host.main(["--config", "tiny", "--dtype", "fp32", "--batch-sizes", "1,3",
                                             "--chunks", "4", "--min-steps", "4", "--label", "candidate round 1",
                                             "--out", str(out)])
        assert torch.get_num_threads() == 3  # the bench's one thread held for its duration only
    finally:
        torch.set_num_threads(threads)
    assert status == 0
    result = json.loads(out.read_text().strip())
    assert result["label"] == "candidate round 1" and result["config"] == "tiny"
    assert [row["batchSize"] for row in result["rows"]] == [1, 3]
    one, three = result["rows"]
    assert one["timedSteps"] == 4 and three["timedSteps"] == 6  # chunks after the first two, per session
    for row in result["rows"]:
        assert set(row["msPerSession"]) == set(bench_sortformer_host.STAGES)
        assert all(ms > 0 for ms in row["msPerSession"].values())
        assert row["hostMsPerSession"] == pytest.approx(sum(row["msPerSession"].values()), abs=1e-3)
        assert row["stateBytes"] > 0
    assert "host ms per session" in capsys.readouterr().out
