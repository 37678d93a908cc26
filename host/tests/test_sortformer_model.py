"""The Sortformer module tree: NeMo's parameter names and shapes for the full configuration (against the
reference key list), the parameter count, seeded weights, and loading ``.nemo`` archives that the tests
write (good, gzip, and with missing, unexpected and wrongly shaped tensors)."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any, Dict

import pytest
import torch
import yaml

from voxmux_host.errors import InstanceError
from voxmux_host.model_api import LoadContext
from voxmux_host.models.sortformer.adapter import SortformerAdapter
from voxmux_host.models.sortformer.config import FULL, FULL_PARAMETER_COUNT, TINY, SortformerConfig
from voxmux_host.models.sortformer.model import SortformerModel, build_model, count_module_parameters
from voxmux_host.models.sortformer.nemo import config_from_nemo, load_nemo_model

KEYS = Path(__file__).resolve().parent / "fixtures" / "sortformer-keys.txt"


def test_full_config_has_every_nemo_name_and_shape() -> None:
    expected = {}
    for line in KEYS.read_text(encoding="utf-8").splitlines():
        name, shape = line.split("\t")
        expected[name] = [int(x) for x in shape.strip("[]").split(",") if x.strip()]
    model = SortformerModel(FULL, device="meta")
    got = {name: list(t.shape) for name, t in model.state_dict().items()}
    assert len(expected) == 990
    assert got == expected


def test_full_config_parameter_count() -> None:
    assert count_module_parameters(FULL) == FULL_PARAMETER_COUNT == 117_693_960


def test_random_weights_are_seeded() -> None:
    a = build_model(TINY, seed=3).state_dict()
    b = build_model(TINY, seed=3).state_dict()
    c = build_model(TINY, seed=4).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["encoder.layers.0.feed_forward1.linear1.weight"],
                           c["encoder.layers.0.feed_forward1.linear1.weight"])


def _nemo_config(config: SortformerConfig) -> Dict[str, Any]:
    return {
        "target": "nemo.collections.asr.models.sortformer_diar_models.SortformerEncLabelModel",
        "max_num_of_spks": config.n_speakers,
        "streaming_mode": True,
        "preprocessor": {"sample_rate": 16000, "normalize": "NA", "window_size": 0.025, "window_stride": 0.01,
                         "window": "hann", "features": config.n_mels, "n_fft": 512, "frame_splicing": 1,
                         "dither": 1e-5},
        "encoder": {"feat_in": config.n_mels, "n_layers": config.fc_layers, "d_model": config.fc_d_model,
                    "subsampling": "dw_striding", "subsampling_factor": 8,
                    "subsampling_conv_channels": config.subsampling_channels, "ff_expansion_factor": 4,
                    "self_attention_model": "rel_pos", "n_heads": config.fc_heads, "att_context_size": [-1, -1],
                    "xscaling": True, "untie_biases": True, "pos_emb_max_len": 5000, "conv_kernel_size": 9,
                    "conv_norm_type": "batch_norm"},
        "transformer_encoder": {"num_layers": config.tf_layers, "hidden_size": config.tf_d_model,
                                "inner_size": config.tf_inner, "num_attention_heads": config.tf_heads,
                                "hidden_act": "relu", "pre_ln": False},
        "sortformer_modules": {"num_spks": config.n_speakers, "fc_d_model": config.fc_d_model,
                               "tf_d_model": config.tf_d_model, "chunk_len": 6, "chunk_left_context": 1,
                               "chunk_right_context": 2, "fifo_len": 8, "spkcache_len": 16,
                               "spkcache_update_period": 4},
    }


def _write_nemo(path: Path, state: Dict[str, Any], config: Dict[str, Any], mode: str = "w:") -> Path:
    def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(f"./{name}")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    weights = io.BytesIO()
    torch.save(state, weights)
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        add(tar, "model_config.yaml", yaml.safe_dump(config).encode())
        add(tar, "model_weights.ckpt", weights.getvalue())
    return path


@pytest.mark.parametrize("mode", ["w:", "w:gz"])
def test_loads_a_nemo_archive_by_name(tmp_path: Path, mode: str) -> None:
    state = build_model(TINY, seed=7).state_dict()
    path = _write_nemo(tmp_path / "tiny.nemo", state, _nemo_config(TINY), mode)
    model, config, params = load_nemo_model(str(path))
    assert config == TINY
    assert params is not None and (params.chunk_len, params.fifo_len, params.update_period) == (6, 8, 4)
    loaded = model.state_dict()
    assert all(torch.equal(loaded[k], state[k]) for k in state)


def test_adapter_loads_a_checkpoint_with_its_streaming_parameters(tmp_path: Path) -> None:
    path = _write_nemo(tmp_path / "tiny.nemo", build_model(TINY, seed=7).state_dict(), _nemo_config(TINY))
    adapter = SortformerAdapter()
    info = adapter.load(LoadContext("i0", "diar", {"checkpoint": str(path), "device": "cpu"}))
    assert getattr(info, "weights") == str(path)
    assert getattr(info, "config") == "nemo"
    assert adapter._params is not None and adapter._params.chunk_len == 6


def test_every_missing_unexpected_and_mismatched_tensor_is_named(tmp_path: Path) -> None:
    state = dict(build_model(TINY, seed=7).state_dict())
    del state["sortformer_modules.hidden_to_spks.weight"]
    del state["transformer_encoder.layers.1.layer_norm_2.bias"]
    state["sortformer_modules.extra.weight"] = torch.zeros(2)
    state["encoder.layers.0.self_attn.pos_bias_u"] = torch.zeros(3, 3)
    path = _write_nemo(tmp_path / "bad.nemo", state, _nemo_config(TINY))
    with pytest.raises(InstanceError) as caught:
        load_nemo_model(str(path))
    message = caught.value.message
    assert caught.value.code == "load_failed"
    assert "2 missing: sortformer_modules.hidden_to_spks.weight, transformer_encoder.layers.1.layer_norm_2.bias" in message
    assert "1 unexpected: sortformer_modules.extra.weight" in message
    assert "encoder.layers.0.self_attn.pos_bias_u (got [3, 3], expected [2, 16])" in message
    with pytest.raises(InstanceError, match="missing"):
        SortformerAdapter().load(LoadContext("i0", "diar", {"checkpoint": str(path), "device": "cpu"}))


def test_unsupported_config_lists_every_problem() -> None:
    cfg = _nemo_config(TINY)
    cfg["preprocessor"]["normalize"] = "per_feature"
    cfg["encoder"]["xscaling"] = False
    cfg["transformer_encoder"]["pre_ln"] = True
    cfg["preprocessor"]["log_zero_guard_value"] = "tiny"
    with pytest.raises(InstanceError) as caught:
        config_from_nemo(cfg)
    message = caught.value.message
    assert "preprocessor.normalize is 'per_feature'" in message
    assert "encoder.xscaling is False" in message
    assert "transformer_encoder.pre_ln is True" in message
    assert "preprocessor.log_zero_guard_value is 'tiny'" in message


def test_a_value_of_the_wrong_type_fails_the_load(tmp_path: Path) -> None:
    cfg = _nemo_config(TINY)
    cfg["encoder"]["n_layers"] = "many"
    path = _write_nemo(tmp_path / "odd.nemo", build_model(TINY, seed=7).state_dict(), cfg)
    with pytest.raises(InstanceError, match="Unsupported .nemo model config: .*invalid literal"):
        load_nemo_model(str(path))


def test_not_an_archive_and_missing_file_fail_the_load(tmp_path: Path) -> None:
    junk = tmp_path / "junk.nemo"
    junk.write_bytes(b"not a tar")
    with pytest.raises(InstanceError, match="tar"):
        load_nemo_model(str(junk))
    with pytest.raises(InstanceError, match="no such file"):
        load_nemo_model(str(tmp_path / "absent.nemo"))


def test_the_speaker_cache_settings_of_the_checkpoint_are_honoured() -> None:
    """NeMo's streaming Sortformer YAML carries, besides the lengths, the speaker-cache update
    settings of sortformer_modules (pred_score_threshold, scores_boost_latest, sil_threshold,
    strong_boost_rate, weak_boost_rate, min_pos_scores_rate; SortformerModules.__init__ takes them all).
    A checkpoint with other values than the class defaults runs with its own."""
    cfg = _nemo_config(TINY)
    custom = {"pred_score_threshold": 0.2, "scores_boost_latest": 0.1, "sil_threshold": 0.3,
              "strong_boost_rate": 0.5, "weak_boost_rate": 1.0, "min_pos_scores_rate": 0.25}
    cfg["sortformer_modules"].update(custom)
    _, params = config_from_nemo(cfg)
    assert params is not None
    assert {key: getattr(params, key) for key in custom} == custom


def test_the_checkpoint_keeps_its_speaker_cache_settings_under_another_latency_preset(tmp_path: Path) -> None:
    cfg = _nemo_config(TINY)
    cfg["sortformer_modules"].update({"pred_score_threshold": 0.2, "spkcache_sil_frames_per_spk": 2})
    path = _write_nemo(tmp_path / "tiny.nemo", build_model(TINY, seed=7).state_dict(), cfg)
    adapter = SortformerAdapter()
    adapter.load(LoadContext("i0", "diar", {"checkpoint": str(path), "device": "cpu", "preset": "low"}))
    params = adapter._params
    assert params is not None and params.chunk_len == 6 and params.fifo_len == 188
    assert (params.pred_score_threshold, params.sil_frames_per_spk) == (0.2, 2)


def test_speaker_cache_settings_without_lengths_fail_the_load() -> None:
    cfg = _nemo_config(TINY)
    for key in ("chunk_len", "spkcache_len"):
        del cfg["sortformer_modules"][key]
    assert config_from_nemo(cfg)[1] is None
    cfg["sortformer_modules"]["sil_threshold"] = 0.3
    with pytest.raises(InstanceError, match="sil_threshold without chunk_len"):
        config_from_nemo(cfg)
    cfg["sortformer_modules"]["sil_threshold"] = "low"
    with pytest.raises(InstanceError, match="a number"):
        config_from_nemo(cfg)
