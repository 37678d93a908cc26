"""Parakeet's boot on CUDA (#20): a .nemo read with parallel reads and the previous way gives the same
model on the device, and the load and warmup report every stage they time there. Skipped without CUDA."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from voxmux_host.model_api import LoadContext
from voxmux_host.models.parakeet.adapter import ParakeetAdapter

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "gpu" / "boot-weights.py"


def _boot_weights() -> ModuleType:
    spec = importlib.util.spec_from_file_location("boot_weights", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_both_weight_reads_give_the_same_device_model_and_every_stage_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "tiny.nemo"
    _boot_weights().write_nemo(path, "tiny", 3)
    states = {}
    for weight_read in ("stream", "parallel"):
        adapter = ParakeetAdapter()
        options = {"nemoPath": str(path), "device": "cuda", "weightRead": weight_read, "batchSizes": [1],
                   "lengthBucketsMs": [5000]}
        info = adapter.load(LoadContext("i0", "parakeet", options))
        assert [s.stage for s in info.stages] == ["device_init", "weight_read", "model_build", "device_upload", "warmup"]
        warmed = adapter.warmup()
        assert [s.stage for s in warmed.stages] == ["graph_capture"] and warmed.graphs_captured > 0
        assert adapter._model is not None
        states[weight_read] = {k: v.detach().cpu() for k, v in adapter._model.state_dict().items()}
        adapter.close()
    for name, tensor in states["stream"].items():
        assert torch.equal(tensor, states["parallel"][name]), name
