"""The model-alone benchmark runs end to end on the CPU (tiny config): every reported field is there."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

HOST_DIR = Path(__file__).resolve().parents[1]
if str(HOST_DIR) not in sys.path:
    sys.path.insert(0, str(HOST_DIR))

import bench_parakeet  # noqa: E402
from voxmux_host.host import GIL_SWITCH_INTERVAL_S  # noqa: E402


def test_a_cpu_dry_run_reports_serial_and_pipelined_throughput(tmp_path: Path) -> None:
    torch.set_num_threads(2)
    out = tmp_path / "bench.json"
    argv = ["--device", "cpu", "--config", "tiny", "--clip-seconds", "1", "--iterations", "3",
            "--warmup-iterations", "1", "--batch-sizes", "2", "--modes", "eager", "--out", str(out)]
    assert bench_parakeet.main(argv) == 0
    report = json.loads(out.read_text())
    [mode] = report["modes"]
    [row] = mode["batches"]
    assert mode["mode"] == "eager" and row["batchSize"] == 2 and row["eagerBatches"] == 3
    assert row["clipsPerS"] > 0 and row["pipelinedClipsPerS"] > 0 and row["finishMsP50"] >= 0
    assert row["tokensPerClip"] > 0 and row["encoderMsP50"] is None  # CUDA events only on a GPU
    assert sys.getswitchinterval() != GIL_SWITCH_INTERVAL_S  # restored afterwards


def test_buckets_and_a_profile_on_the_cpu(tmp_path: Path) -> None:
    torch.set_num_threads(2)
    out = tmp_path / "bench.json"
    argv = ["--device", "cpu", "--config", "tiny", "--clip-seconds", "1", "--iterations", "1",
            "--warmup-iterations", "1", "--batch-sizes", "2", "--modes", "eager", "--buckets-ms", "1000,5000",
            "--profile-batch", "2", "--out", str(out)]
    assert bench_parakeet.main(argv) == 0
    report = json.loads(out.read_text())
    assert "--buckets-ms" in report["argv"]
    assert report["profile"]["batchSize"] == 2 and report["profile"]["timeOn"] == "cpu" and report["profile"]["top"]
    assert (tmp_path / "bench.profile.txt").read_text().startswith("one batch without graphs of 2 x 1.0 s clips")


def test_buckets_must_hold_the_clip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        bench_parakeet.main(["--device", "cpu", "--clip-seconds", "2", "--buckets-ms", "1000", "--out", str(tmp_path / "x.json")])
    assert info.value.code == 2
    assert "Expected a bucket of at least the clip's 2.0 s" in capsys.readouterr().err
