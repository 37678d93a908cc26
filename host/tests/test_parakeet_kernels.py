"""The encoder's Triton kernels on the CPU: the experimentalKernels option's checks, and the PyTorch references the
kernels are tested against on a GPU (tests/gpu), each against the encoder's own PyTorch path here, so
that what the kernels must equal is itself checked in every run."""
from __future__ import annotations

from typing import Any, Dict

import pytest
import torch

from voxmux_host.errors import InstanceError
from voxmux_host.model_api import LoadContext
from voxmux_host.models.parakeet.adapter import ParakeetAdapter
from voxmux_host.models.parakeet.config import TINY
from voxmux_host.models.parakeet.encoder import (
    MASK_SCORE,
    ConformerConvolution,
    ConformerEncoder,
    rel_shift,
    time_mask,
)
from voxmux_host.models.parakeet.kernels import (
    KERNELS_AVAILABLE,
    KERNELS_UNAVAILABLE_REASON,
    glu_depthwise_silu_reference,
    masked_rel_shift_reference,
)


def _load_problems(options: Dict[str, Any]) -> str:
    adapter = ParakeetAdapter()
    with pytest.raises(InstanceError) as info:
        adapter.load(LoadContext("i0", "parakeet", {"config": "tiny", "device": "cpu", **options}))
    assert info.value.code == "load_failed"
    return info.value.message


def test_experimental_kernels_option_takes_torch_or_triton() -> None:
    message = _load_problems({"experimentalKernels": "cuda"})
    assert "Expected experimentalKernels to be torch or triton: got 'cuda'" in message


def test_triton_kernels_need_a_cuda_device_and_triton() -> None:
    message = _load_problems({"experimentalKernels": "triton"})
    assert "experimentalKernels triton needs a CUDA device: got device 'cpu'" in message
    if not KERNELS_AVAILABLE:
        assert f"experimentalKernels triton is not available: {KERNELS_UNAVAILABLE_REASON}" in message


def test_the_kernels_option_before_it_became_experimental_fails_the_load() -> None:
    assert "Unknown parakeet option(s): kernels" in _load_problems({"kernels": "triton"})


@pytest.mark.skipif(KERNELS_AVAILABLE, reason="this torch has the kernels")
def test_the_encoder_refuses_triton_kernels_it_does_not_have() -> None:
    encoder = ConformerEncoder(TINY)
    with pytest.raises(ValueError, match="kernels triton is not available"):
        encoder.set_kernels("triton")
    with pytest.raises(ValueError, match="Expected kernels to be one of"):
        encoder.set_kernels("fast")


def test_masked_rel_shift_reference_equals_the_attention_s_torch_path() -> None:
    gen = torch.Generator().manual_seed(1)
    b, h, t = 3, 2, 11
    r = 24  # 2T-1 = 21, aligned up to 8 as the position table is
    bd = torch.randn(h, b * t, r, generator=gen).view(h, b, t, r).transpose(0, 1)
    key_pad = time_mask(torch.tensor([11, 6, 1]), t)
    expected = rel_shift(bd, t).masked_fill(key_pad[:, None, None, :], MASK_SCORE)
    got = masked_rel_shift_reference(bd, key_pad, MASK_SCORE)
    assert torch.equal(got, expected)
    # Row i, key j: relative position i - j sits at column T-1-i+j.
    assert got[1, 0, 4, 2] == bd[1, 0, 4, t - 1 - 4 + 2]
    assert got[1, 0, 4, 6] == MASK_SCORE


def test_glu_depthwise_silu_reference_with_folded_batch_norm_equals_the_module() -> None:
    """What the convolution kernel computes (its reference, fed by folded_depthwise) equals the module's
    GLU, padding mask, depthwise convolution, eval-mode BatchNorm and SiLU, with a bias and non-trivial
    statistics."""
    torch.manual_seed(2)
    config = TINY
    module = ConformerConvolution(config).eval()
    with torch.no_grad():
        module.batch_norm.running_mean.normal_(0.0, 0.5)  # type: ignore[union-attr]
        module.batch_norm.running_var.uniform_(0.5, 2.0)  # type: ignore[union-attr]
        module.batch_norm.weight.normal_(1.0, 0.2)
        module.batch_norm.bias.normal_(0.0, 0.2)
        if module.depthwise_conv.bias is not None:
            module.depthwise_conv.bias.normal_(0.0, 0.2)
    x = torch.randn(2, 40, config.d_model)
    pad = time_mask(torch.tensor([40, 23]), 40)
    with torch.no_grad():
        expected = module(x, pad)
        y = torch.nn.functional.linear(x, module.pointwise_conv1.weight.squeeze(-1), module.pointwise_conv1.bias)
        weight, bias = module.folded_depthwise()
        mid = glu_depthwise_silu_reference(y, pad, weight, bias)
        got = torch.nn.functional.linear(mid, module.pointwise_conv2.weight.squeeze(-1), module.pointwise_conv2.bias)
    for i, n in enumerate([40, 23]):
        torch.testing.assert_close(got[i, :n], expected[i, :n], atol=1e-5, rtol=1e-5)


def test_the_encoder_refuses_triton_kernels_for_another_convolution_kernel_size(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from voxmux_host.models.parakeet import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "KERNELS_AVAILABLE", True)  # as on a GPU machine with Triton
    encoder = ConformerEncoder(replace(TINY, conv_kernel_size=31))
    with pytest.raises(ValueError, match="kernels triton needs a convolution kernel size of 9: this model's is 31"):
        encoder.set_kernels("triton")
    ConformerEncoder(TINY).set_kernels("triton")  # size 9: accepted
