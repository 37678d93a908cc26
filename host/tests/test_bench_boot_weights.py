"""The boot benchmark's weight helper (bench/gpu/boot-weights.py) on the CPU (#20): the synthetic
archive is read back as the model it describes, both read paths load it equal, and the summary
collects a run's boot breakdowns."""
from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path
from types import ModuleType

import pytest
import torch

from voxmux_host.models.parakeet.config import FULL, TINY
from voxmux_host.models.parakeet.nemo import config_from_nemo, load_nemo_model

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu" / "boot-weights.py"


@pytest.fixture(scope="module")
def boot_weights() -> ModuleType:
    spec = importlib.util.spec_from_file_location("boot_weights", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_nemo_config_written_describes_the_same_model(boot_weights: ModuleType) -> None:
    assert config_from_nemo(boot_weights.nemo_config_for(FULL)) == FULL
    assert config_from_nemo(boot_weights.nemo_config_for(TINY)) == TINY


def test_writes_a_plain_tar_in_the_nemo_layout_that_loads_its_seeded_weights(
    boot_weights: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "tiny.nemo"
    written = boot_weights.write_nemo(path, "tiny", 7)
    with tarfile.open(path, "r:") as tar:
        assert [m.name for m in tar.getmembers()] == ["./model_config.yaml", "./model_weights.ckpt"]
    assert written["weightsBytes"] > 0 and written["parameters"] > 0
    model, tokenizer, config = load_nemo_model(str(path))
    assert config == TINY and tokenizer is None
    from voxmux_host.models.parakeet.model import build_model

    expected = build_model(TINY, seed=7).state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, expected[name]), name


def test_read_compare_reads_both_ways_and_summarize_collects_the_runs(boot_weights: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "tiny.nemo"
    boot_weights.write_nemo(path, "tiny", 0)
    report = boot_weights.read_compare(path, 2, [2])
    assert set(report["summary"]) == {"stream", "parallel-2"}
    assert len(report["runs"]) == 4 and all(r["bytes"] > 0 for r in report["runs"])
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    boot = {"processStartMs": 900, "loadMs": 5000, "warmupWaitMs": 0, "warmupMs": 2000, "totalMs": 7900,
            "stages": [{"stage": "weight_read", "ms": 1000.0, "bytes": 2_000_000_000},
                       {"stage": "graph_capture", "ms": 1900.0, "bytes": 0}],
            "weightReadBytes": 2_000_000_000, "weightReadBytesPerSecond": 2_000_000_000}
    ready = {"models": {"parakeet": {"instances": [{"state": "ready", "boot": boot}]}}}
    (out / "runs" / "parallel-round1.ready.json").write_text(json.dumps(ready))
    (out / "runs" / "parallel-round1.timing.json").write_text(json.dumps(
        {"config": "parallel", "round": 1, "ok": True, "serverStartToReadyMs": 8400, "firstAnswerMs": 120}))
    (out / "read-compare.json").write_text(json.dumps(report))
    results = boot_weights.summarize(out, "bash bench/gpu/boot.sh out", "abc123")
    assert results["commit"] == "abc123" and results["command"] == "bash bench/gpu/boot.sh out"
    assert "date" in results and "machine" in results and "read-compare" in results
    summary = results["summary"]["parallel"]
    assert summary["runs"] == 1 and summary["instanceSpawnToReadyMsMedian"] == 7900
    assert summary["stageMsMedian"]["weight_read"] == 1000 and summary["weightReadMBPerSMedian"] == 2000
