"""Load a streaming Sortformer ``.nemo`` archive (``model_config.yaml`` + ``model_weights.ckpt``) by NeMo's
parameter names, without NeMo.

The archive is read by the Parakeet reader (same layout). The config is mapped to a
:class:`SortformerConfig`, listing every value this implementation cannot honour; the state dict is
checked against the module tree and every missing, unexpected or wrongly shaped tensor is named in one
``InstanceError('load_failed', ...)``. The streaming lengths in ``sortformer_modules`` become the
default latency settings (the adapter's options override them); its speaker-cache settings
(``spkcache_sil_frames_per_spk``, ``pred_score_threshold``, ``scores_boost_latest``, ``sil_threshold``,
``strong_boost_rate``, ``weak_boost_rate``, ``min_pos_scores_rate``) belong to the trained model and apply
whatever the lengths.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

from voxmux_host.errors import InstanceError

from ..parakeet.nemo import MAX_LISTED, read_nemo
from .config import FULL, SortformerConfig, StreamingParams
from .model import SortformerModel, build_model


def _fail(message: str) -> InstanceError:
    return InstanceError("load_failed", message)


def _get(section: Any, key: str, default: Any = None) -> Any:
    return section.get(key, default) if isinstance(section, dict) else default


def config_from_nemo(cfg: Dict[str, Any]) -> Tuple[SortformerConfig, Optional[StreamingParams]]:
    """NeMo's model config as (shapes, streaming parameters or None); load_failed listing every
    unsupported value. Absent keys take NeMo's class defaults."""
    problems: List[str] = []

    def expect(name: str, value: Any, allowed: Tuple[Any, ...]) -> None:
        if value not in allowed:
            problems.append(f"{name} is {value!r}, supported: {', '.join(repr(a) for a in allowed)}")

    pre, enc = cfg.get("preprocessor"), cfg.get("encoder")
    tf, mods = cfg.get("transformer_encoder"), cfg.get("sortformer_modules")
    for name, section in (("preprocessor", pre), ("encoder", enc), ("transformer_encoder", tf),
                          ("sortformer_modules", mods)):
        if not isinstance(section, dict):
            problems.append(f"the config has no {name} section")
    if problems:
        raise _fail("Unsupported .nemo model config: " + "; ".join(problems))

    sample_rate = int(_get(pre, "sample_rate", 16000))
    expect("preprocessor.normalize", str(_get(pre, "normalize", "NA")), ("NA", "None"))
    expect("preprocessor.window", _get(pre, "window", "hann"), ("hann",))
    expect("preprocessor.frame_splicing", _get(pre, "frame_splicing", 1), (1,))
    expect("preprocessor.log", _get(pre, "log", True), (True,))
    expect("preprocessor.mag_power", float(_get(pre, "mag_power", 2.0)), (2.0,))
    win_length = int(float(_get(pre, "window_size", 0.025)) * sample_rate)
    hop_length = int(float(_get(pre, "window_stride", 0.01)) * sample_rate)
    n_fft = _get(pre, "n_fft")
    n_fft = int(n_fft) if n_fft else 2 ** (win_length - 1).bit_length()
    n_mels = int(_get(pre, "features", _get(pre, "nfilt", 64)))
    expect("preprocessor.log_zero_guard_type", _get(pre, "log_zero_guard_type", "add"), ("add",))
    guard = _get(pre, "log_zero_guard_value", 2.0**-24)
    if isinstance(guard, bool) or not isinstance(guard, (int, float)):
        problems.append(f"preprocessor.log_zero_guard_value is {guard!r}, supported: a number")
        guard = 2.0**-24

    expect("encoder.subsampling", _get(enc, "subsampling", "dw_striding"), ("dw_striding",))
    expect("encoder.subsampling_factor", int(_get(enc, "subsampling_factor", 8)), (8,))
    expect("encoder.self_attention_model", _get(enc, "self_attention_model", "rel_pos"), ("rel_pos",))
    expect("encoder.untie_biases", _get(enc, "untie_biases", True), (True,))
    expect("encoder.conv_norm_type", _get(enc, "conv_norm_type", "batch_norm"), ("batch_norm",))
    expect("encoder.use_bias", _get(enc, "use_bias", True), (True,))
    expect("encoder.xscaling", _get(enc, "xscaling", True), (True,))
    expect("encoder.causal_downsampling", _get(enc, "causal_downsampling", False), (False,))
    feat_in = int(_get(enc, "feat_in", n_mels))
    if feat_in != n_mels:
        problems.append(f"encoder.feat_in is {feat_in}, but the preprocessor makes {n_mels} features")
    d_model = int(_get(enc, "d_model", 512))
    channels = int(_get(enc, "subsampling_conv_channels", -1))

    expect("transformer_encoder.pre_ln", _get(tf, "pre_ln", False), (False,))
    expect("transformer_encoder.hidden_act", _get(tf, "hidden_act", "relu"), ("relu",))
    tf_hidden = int(_get(tf, "hidden_size", 192))
    fc_d_model = int(_get(mods, "fc_d_model", d_model))
    if fc_d_model != d_model:
        problems.append(f"sortformer_modules.fc_d_model is {fc_d_model}, but encoder.d_model is {d_model}")
    tf_d_model = int(_get(mods, "tf_d_model", tf_hidden))
    if tf_d_model != tf_hidden:
        problems.append(f"sortformer_modules.tf_d_model is {tf_d_model}, but transformer_encoder.hidden_size is {tf_hidden}")
    n_spk = int(_get(mods, "num_spks", cfg.get("max_num_of_spks", 4)))
    if problems:
        raise _fail("Unsupported .nemo model config: " + "; ".join(problems))
    try:
        config = SortformerConfig(
            sample_rate_hz=sample_rate, n_mels=n_mels, n_fft=n_fft, win_length=win_length, hop_length=hop_length,
            preemph=float(_get(pre, "preemph", 0.97) or 0.0),
            log_zero_guard=float(guard),
            fc_d_model=d_model, fc_layers=int(_get(enc, "n_layers", FULL.fc_layers)),
            fc_heads=int(_get(enc, "n_heads", FULL.fc_heads)),
            ff_expansion=int(_get(enc, "ff_expansion_factor", 4)),
            subsampling_channels=channels if channels > 0 else d_model,
            conv_kernel_size=int(_get(enc, "conv_kernel_size", 9)),
            tf_d_model=tf_hidden, tf_layers=int(_get(tf, "num_layers", FULL.tf_layers)),
            tf_heads=int(_get(tf, "num_attention_heads", FULL.tf_heads)),
            tf_inner=int(_get(tf, "inner_size", FULL.tf_inner)), n_speakers=n_spk,
        )
    except ValueError as exc:
        raise _fail(f"Unsupported .nemo model config: {exc}") from exc
    params: Optional[StreamingParams] = None
    assert isinstance(mods, dict)
    settings = {name: _number(mods, key, name) for key, name in _CACHE_KEYS.items() if key in mods}
    if all(key in mods for key in ("chunk_len", "spkcache_len")):
        period = _get(mods, "spkcache_update_period", _get(mods, "spkcache_refresh_rate", mods["chunk_len"]))
        params = StreamingParams(
            chunk_len=int(mods["chunk_len"]),
            left_context=int(_get(mods, "chunk_left_context", 1)),
            right_context=int(_get(mods, "chunk_right_context", 1)),
            fifo_len=int(_get(mods, "fifo_len", 0)),
            spkcache_len=int(mods["spkcache_len"]),
            update_period=int(period),
        ).replace(**settings)
    elif settings:
        # They would otherwise be dropped silently: with no lengths the preset's settings would run.
        raise _fail("Unsupported .nemo model config: sortformer_modules sets "
                    f"{', '.join(sorted(k for k in _CACHE_KEYS if k in mods))} without chunk_len and spkcache_len")
    return config, params


#: NeMo's sortformer_modules keys of the speaker-cache settings -> StreamingParams fields.
_CACHE_KEYS = {
    "spkcache_sil_frames_per_spk": "sil_frames_per_spk",
    "pred_score_threshold": "pred_score_threshold",
    "scores_boost_latest": "scores_boost_latest",
    "sil_threshold": "sil_threshold",
    "strong_boost_rate": "strong_boost_rate",
    "weak_boost_rate": "weak_boost_rate",
    "min_pos_scores_rate": "min_pos_scores_rate",
}


def _number(section: Dict[str, Any], key: str, name: str) -> float:
    value = section[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(f"Unsupported .nemo model config: sortformer_modules.{key} is {value!r}, supported: a number")
    return int(value) if name == "sil_frames_per_spk" else float(value)


def check_state_dict(model: torch.nn.Module, state_dict: Mapping[str, Any]) -> None:
    """Raise load_failed naming every missing, unexpected and wrongly shaped tensor."""
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    given = {name: tuple(t.shape) for name, t in state_dict.items() if isinstance(t, torch.Tensor)}
    not_tensors = sorted(name for name, t in state_dict.items() if not isinstance(t, torch.Tensor))
    missing = sorted(set(expected) - set(given) - set(not_tensors))
    unexpected = sorted(set(given) - set(expected))
    mismatched = sorted(
        f"{name} (got {list(given[name])}, expected {list(expected[name])})"
        for name in set(expected) & set(given)
        if given[name] != expected[name]
    )
    parts = []
    for label, names in (("missing", missing), ("unexpected", unexpected), ("with a different shape", mismatched),
                         ("not tensors", not_tensors)):
        if names:
            more = f", ... ({len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else ""
            parts.append(f"{len(names)} {label}: {', '.join(names[:MAX_LISTED])}{more}")
    if parts:
        raise _fail("The checkpoint does not match the model: " + "; ".join(parts))


def load_nemo_model(path: str, extract_dir: Optional[str] = None
                    ) -> Tuple[SortformerModel, SortformerConfig, Optional[StreamingParams]]:
    """Build the model the archive describes and load its weights (CPU, fp32)."""
    archive = read_nemo(path, extract_dir)
    try:
        config, params = config_from_nemo(archive.config)
    except (TypeError, ValueError, AttributeError) as exc:  # a value of the wrong type in the YAML
        raise _fail(f"Unsupported .nemo model config: {type(exc).__name__}: {exc}") from exc
    model = build_model(config, seed=None)
    check_state_dict(model, archive.state_dict)
    model.load_state_dict(archive.state_dict, strict=True)
    model.eval()
    return model, config, params
