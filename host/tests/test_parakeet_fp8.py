"""FP8 matrix products of the Parakeet encoder on the CPU: the matmul option's checks, set_matmul's effect
on the module (none on its state dict), and, where this torch has float8, the row-wise quantization and
the product it stands for (emulated: torch._scaled_mm itself needs a GPU, see tests/gpu)."""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import numpy.typing as npt
import pytest
import torch
import torch.nn.functional as F

from voxmux_host.errors import InstanceError
from voxmux_host.model_api import LoadContext
from voxmux_host.models.parakeet import encoder as encoder_module
from voxmux_host.models.parakeet.adapter import ParakeetAdapter, ParakeetLoadInfo
from voxmux_host.models.parakeet.config import TINY
from voxmux_host.fp8 import (
    E4M3_MAX,
    FP8_AVAILABLE,
    HAS_FLOAT8,
    MIN_AMAX,
    Fp8Weight,
    dequantize,
    fp8_linear_reference,
    fp8_weight_from,
    quantize_rowwise,
)
from voxmux_host.models.parakeet.model import ParakeetModel, build_model, pad_audio, pcm16_from_float
from voxmux_host.models.parakeet.random_init import speech_like_noise

needs_float8 = pytest.mark.skipif(not HAS_FLOAT8, reason="needs a torch with float8_e4m3fn")
needs_fp8 = pytest.mark.skipif(not FP8_AVAILABLE, reason="needs torch >= 2.5")

#: e4m3 keeps 3 mantissa bits: rounding to nearest is off by at most 2^-4 of the value, or, below the
#: smallest normal (2^-6 of the row's scale), by half the subnormal step (2^-10 of the scale).
E4M3_RELATIVE_ERROR = 2.0**-4
E4M3_SUBNORMAL_ERROR = 2.0**-10
#: Both operands rounded to e4m3: a product of K = 64 loses about 3.5 % (relative Frobenius norm) in
#: a float64 emulation of the rounding; rows keep a cosine similarity above 0.998.
PRODUCT_RELATIVE_ERROR = 0.06
PRODUCT_MIN_COSINE = 0.995
#: The tiny encoder's output frames, every large product in FP8, against the same encoder in bf16.
ENCODER_MIN_COSINE = 0.99


def _load(options: Dict[str, Any]) -> ParakeetAdapter:
    adapter = ParakeetAdapter()
    adapter.load(LoadContext("i0", "parakeet", {"config": "tiny", "device": "cpu", **options}))
    return adapter


def _load_problems(options: Dict[str, Any]) -> str:
    with pytest.raises(InstanceError) as info:
        _load(options)
    assert info.value.code == "load_failed"
    return info.value.message


def _fp8_attributes(model: ParakeetModel) -> List[Any]:
    encoder = model.encoder
    values: List[Any] = [encoder.pre_encode._fp8_out]  # noqa: SLF001
    for layer in encoder.layers:
        values += [
            layer.feed_forward1._fp8_linear1,  # noqa: SLF001
            layer.feed_forward1._fp8_linear2,  # noqa: SLF001
            layer.self_attn._fp8_qkv,  # noqa: SLF001
            layer.self_attn._fp8_out,  # noqa: SLF001
            layer.conv._fp8_pointwise1,  # noqa: SLF001
            layer.conv._fp8_pointwise2,  # noqa: SLF001
            layer.feed_forward2._fp8_linear1,  # noqa: SLF001
            layer.feed_forward2._fp8_linear2,  # noqa: SLF001
        ]
    return values


def _clips(durations_s: List[float], seed: int) -> List[npt.NDArray[np.int16]]:
    return [pcm16_from_float(speech_like_noise(d, seed + i)) for i, d in enumerate(durations_s)]


def _frame_cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(a.double(), b.double(), dim=-1)


# ------------------------------------------------------------------ the adapter option


def test_matmul_option_takes_bf16_or_fp8() -> None:
    message = _load_problems({"matmul": "int8"})
    assert "Expected matmul to be bf16 or fp8: got 'int8'" in message


def test_fp8_matmul_needs_the_compiled_encoder_a_cuda_device_and_a_recent_torch() -> None:
    message = _load_problems({"matmul": "fp8"})
    assert "matmul fp8 needs compileEncoder: true" in message
    assert "matmul fp8 needs a CUDA device: got device 'cpu'" in message
    if not FP8_AVAILABLE:
        expected = f"matmul fp8 needs torch >= 2.5 (float8 and row-wise scaled _scaled_mm): this is torch {torch.__version__}"
        assert expected in message


def test_fp8_matmul_needs_bf16() -> None:
    message = _load_problems({"matmul": "fp8", "dtype": "fp32"})
    assert "matmul fp8 needs dtype bf16: got 'fp32'" in message


def test_load_info_reports_the_matmul_kind() -> None:
    adapter = ParakeetAdapter()
    options = {"config": "tiny", "device": "cpu", "batchSizes": [1], "lengthBucketsMs": [5000]}
    try:
        info = adapter.load(LoadContext("i0", "parakeet", options))
        assert isinstance(info, ParakeetLoadInfo) and info.matmul == "bf16"
    finally:
        adapter.close()


# ------------------------------------------------------------------ the encoder


def test_set_matmul_bf16_changes_nothing() -> None:
    model = build_model(TINY, seed=5)
    model.prepare_for_inference_(torch.device("cpu"), torch.float32)
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    audio, lengths = pad_audio(_clips([1.5, 2.5], seed=30), torch.device("cpu"))
    with torch.inference_mode():  # type: ignore[no-untyped-call]
        before, _ = model.encode(audio, lengths)
        model.encoder.set_matmul("bf16")
        after, _ = model.encode(audio, lengths)
    assert all(value is None for value in _fp8_attributes(model))
    assert list(model.state_dict()) == list(state)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    assert torch.equal(after, before)


def test_set_matmul_refuses_unknown_kinds_and_fp8_where_unavailable() -> None:
    model = build_model(TINY, seed=5)
    with pytest.raises(ValueError, match="Expected a matmul kind of"):
        model.encoder.set_matmul("int8")
    if not FP8_AVAILABLE:
        with pytest.raises(ValueError, match=r"FP8 matrix products need torch >= 2.5"):
            model.encoder.set_matmul("fp8")
    else:
        model.prepare_for_inference_(torch.device("cpu"), torch.float32)
        with pytest.raises(ValueError, match="Expected bf16 weights for FP8 matrix products: got torch.float32"):
            model.encoder.set_matmul("fp8")
    assert all(value is None for value in _fp8_attributes(model))


@needs_fp8
def test_set_matmul_fp8_keeps_the_state_dict_and_moving_drops_the_copies() -> None:
    model = build_model(TINY, seed=5)
    model.prepare_for_inference_(torch.device("cpu"), torch.bfloat16)
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    model.encoder.set_matmul("fp8")
    copies = _fp8_attributes(model)
    assert all(isinstance(value, Fp8Weight) for value in copies)
    assert list(model.state_dict()) == list(state)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    assert not any(name.startswith("_fp8") for name, _ in model.named_buffers())
    qkv = model.encoder.layers[0].self_attn._fp8_qkv  # noqa: SLF001
    assert qkv.weight.shape == (3 * TINY.d_model, TINY.d_model) and qkv.scale.shape == (1, 3 * TINY.d_model)
    assert qkv.bias is not None and qkv.bias.dtype == torch.bfloat16  # pos_bias_u rides in the bias
    model.encoder.set_matmul("bf16")
    assert all(value is None for value in _fp8_attributes(model))
    model.encoder.set_matmul("fp8")
    model.to(torch.float32)
    assert all(value is None for value in _fp8_attributes(model))


@needs_fp8
def test_set_matmul_fp8_needs_fused_attention_and_builds_nothing_without() -> None:
    model = build_model(TINY, seed=5).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"call fuse_qkv_\(\) first"):
        model.encoder.set_matmul("fp8")
    assert all(value is None for value in _fp8_attributes(model))


@needs_fp8
def test_fp8_encoder_follows_the_bf16_encoder_in_an_emulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every large product through the float32 emulation of its FP8 product (the call sites, the
    weights' quantization and the fused q, k, v bias are those of the GPU path)."""

    def emulated(x: torch.Tensor, w: Fp8Weight) -> torch.Tensor:
        return fp8_linear_reference(x, w).to(w.out_dtype)

    monkeypatch.setattr(encoder_module, "fp8_linear", emulated)
    model = build_model(TINY, seed=6)
    model.prepare_for_inference_(torch.device("cpu"), torch.bfloat16)
    audio, lengths = pad_audio(_clips([2.0, 3.0], seed=40), torch.device("cpu"))
    with torch.inference_mode():  # type: ignore[no-untyped-call]
        expected, enc_len = model.encode(audio, lengths)
    model.encoder.set_matmul("fp8")
    with torch.inference_mode():  # type: ignore[no-untyped-call]
        got, _ = model.encode(audio, lengths)
    for i in range(2):
        n = int(enc_len[i])
        cosines = _frame_cosines(got[i, :n], expected[i, :n])
        assert float(cosines.min()) >= ENCODER_MIN_COSINE, cosines


# ------------------------------------------------------------------ quantization and the product


@needs_float8
def test_quantize_rowwise_round_trips_within_e4m3_rounding() -> None:
    generator = torch.Generator().manual_seed(1)
    # Rows of very different magnitudes, one all zero.
    magnitudes = torch.tensor([1e-4, 0.1, 1, 30, 1e3, 0], dtype=torch.float64).view(6, 1)
    x = torch.randn(6, 64, generator=generator, dtype=torch.float64) * magnitudes
    quantized, scale = quantize_rowwise(x)
    assert quantized.dtype == torch.float8_e4m3fn  # type: ignore[attr-defined]
    assert scale.dtype == torch.float32 and scale.shape == (6, 1)
    restored = dequantize(quantized, scale).double()
    bound = torch.maximum(E4M3_RELATIVE_ERROR * x.abs(), E4M3_SUBNORMAL_ERROR * scale.double())
    assert bool(((restored - x).abs() <= bound * (1 + 1e-6)).all())
    # Each row's largest magnitude maps to 448 and back to itself.
    amax = x.abs().amax(dim=-1)
    torch.testing.assert_close(restored.abs().amax(dim=-1)[:5], amax[:5], atol=0.0, rtol=1e-6)
    assert float(scale[5, 0]) == pytest.approx(MIN_AMAX / E4M3_MAX) and not bool(restored[5].any())


@needs_float8
def test_fp8_weight_is_quantized_per_output_channel() -> None:
    generator = torch.Generator().manual_seed(2)
    weight = torch.randn(48, 64, generator=generator) * torch.linspace(0.01, 10, 48).view(48, 1)
    bias = torch.randn(48, generator=generator)
    w = fp8_weight_from(weight.to(torch.bfloat16), bias)
    assert w.weight.shape == (48, 64) and w.weight.is_contiguous()
    assert w.scale.shape == (1, 48) and w.scale.is_contiguous() and w.scale.dtype == torch.float32
    assert w.bias is not None and w.bias.dtype == torch.bfloat16 and w.out_dtype == torch.bfloat16
    assert float(w.weight.float().abs().amax()) == E4M3_MAX
    with pytest.raises(ValueError, match="multiples of 16"):
        fp8_weight_from(torch.randn(40, 64), None)


@needs_float8
def test_fp8_product_follows_the_full_precision_product() -> None:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(3, 5, 64, generator=generator) * torch.exp(2 * torch.randn(3, 5, 1, generator=generator))
    weight = 0.1 * torch.randn(48, 64, generator=generator)
    bias = torch.randn(48, generator=generator)
    w = fp8_weight_from(weight, bias)
    got = fp8_linear_reference(x, w)
    expected = F.linear(x, weight, bias)
    assert got.shape == expected.shape == (3, 5, 48)
    relative = float(((got - expected) ** 2).sum().sqrt() / (expected**2).sum().sqrt())
    assert relative <= PRODUCT_RELATIVE_ERROR
    assert float(_frame_cosines(got - bias, expected - bias).min()) >= PRODUCT_MIN_COSINE
