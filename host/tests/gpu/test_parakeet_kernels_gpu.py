"""The encoder's Triton kernels (kernels.py; the experimental option experimentalKernels) on CUDA: each
against its PyTorch reference, the encoder with them against the encoder without, and a graph replay
against eager. Skipped without CUDA or Triton."""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import numpy.typing as npt
import pytest
import torch
import torch.nn.functional as F

from voxmux_host.model_api import LoadContext, BatchInput, Transcript
from voxmux_host.models.parakeet.adapter import ParakeetAdapter
from voxmux_host.models.parakeet.config import FULL, TINY
from voxmux_host.models.parakeet.encoder import MASK_SCORE, ConformerConvolution, time_mask
from voxmux_host.models.parakeet.kernels import (
    KERNELS_AVAILABLE,
    glu_depthwise_silu,
    glu_depthwise_silu_reference,
    masked_rel_shift,
    masked_rel_shift_reference,
)
from voxmux_host.models.parakeet.model import build_model, pad_audio, pcm16_from_float
from voxmux_host.models.parakeet.random_init import speech_like_noise

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and KERNELS_AVAILABLE), reason="needs CUDA and Triton")

CUDA = torch.device("cuda")


def _clips(durations: List[float], seed: int) -> List[npt.NDArray[np.int16]]:
    return [pcm16_from_float(speech_like_noise(d, seed + i)) for i, d in enumerate(durations)]


@pytest.mark.parametrize("t", [1, 7, 130, 563])
def test_masked_rel_shift_equals_its_reference_in_the_attention_layout(t: int) -> None:
    """The layout the attention hands over: a [H, B*T, R] product viewed as [B, H, T, R] (R aligned to
    8, so the rows are not contiguous in batch order); the kernel only moves values, so it is exact."""
    gen = torch.Generator(device="cpu").manual_seed(t)
    b, h = 3, 8
    r = -(-(2 * t - 1) // 8) * 8
    rows = torch.randn(h, b * t, r, generator=gen).to(CUDA, torch.bfloat16)
    bd = rows.view(h, b, t, r).transpose(0, 1)
    lengths = torch.tensor([t, max(1, t // 2), max(1, t - 3)], device=CUDA)
    key_pad = time_mask(lengths, t)
    got = masked_rel_shift(bd, key_pad, MASK_SCORE)
    expected = masked_rel_shift_reference(bd, key_pad, MASK_SCORE)
    assert got.shape == (b, h, t, t) and got.dtype == torch.bfloat16 and got.is_contiguous()
    assert torch.equal(got, expected)


@pytest.mark.parametrize("c,t", [(64, 50), (1024, 563), (200, 9)])
def test_glu_depthwise_silu_equals_its_reference(c: int, t: int) -> None:
    gen = torch.Generator(device="cpu").manual_seed(c + t)
    b, k = 3, 9
    y = torch.randn(b, t, 2 * c, generator=gen).to(CUDA, torch.bfloat16)
    weight = (torch.randn(c, k, generator=gen) * 0.3).to(CUDA)
    bias = torch.randn(c, generator=gen).to(CUDA)
    pad = time_mask(torch.tensor([t, max(1, t // 3), t - 1], device=CUDA), t)
    got = glu_depthwise_silu(y, pad, weight, bias)
    expected = glu_depthwise_silu_reference(y, pad, weight, bias)
    assert got.shape == (b, t, c) and got.dtype == torch.bfloat16
    # Both compute in float32 and round once to bf16; the sums' order differs.
    torch.testing.assert_close(got.float(), expected.float(), atol=2e-2, rtol=1e-2)


def test_the_convolution_module_with_the_kernel_follows_the_torch_module() -> None:
    """Random BatchNorm statistics and a bias on the depthwise convolution: the folding is exact math."""
    torch.manual_seed(5)
    module = ConformerConvolution(FULL).to(CUDA).eval()
    with torch.no_grad():
        module.batch_norm.running_mean.normal_(0.0, 0.5)  # type: ignore[union-attr]
        module.batch_norm.running_var.uniform_(0.5, 2.0)  # type: ignore[union-attr]
        module.batch_norm.weight.normal_(1.0, 0.2)
        module.batch_norm.bias.normal_(0.0, 0.2)
    x = torch.randn(2, 100, FULL.d_model, device=CUDA)
    pad = time_mask(torch.tensor([100, 61], device=CUDA), 100)
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):  # type: ignore[no-untyped-call]
        expected = module(x, pad)
        module.kernels = "triton"
        got = module(x, pad)
    for i, n in enumerate([100, 61]):
        cosines = F.cosine_similarity(got[i, :n].double(), expected[i, :n].double(), dim=-1)
        assert float(cosines.min()) >= 0.999, cosines


@pytest.mark.parametrize("compiled", [False, True])
def test_the_encoder_with_the_kernels_follows_the_encoder_without(compiled: bool) -> None:
    model = build_model(TINY, seed=4)
    model.prepare_for_inference_(CUDA, torch.bfloat16)
    audio, lengths = pad_audio(_clips([2.0, 3.0], seed=130), CUDA)
    with torch.inference_mode():  # type: ignore[no-untyped-call]
        expected, enc_len = model.encode(audio, lengths)
    model.encoder.set_kernels("triton")
    if compiled:
        model.encoder.compile_layers()
    with torch.inference_mode():  # type: ignore[no-untyped-call]
        got, _ = model.encode(audio, lengths)
        # Padding never changes a valid frame, with the kernels too: the shorter clip alone.
        alone, alone_len = model.encode(audio[:1, : int(lengths[0])], lengths[:1])
    for i in range(2):
        n = int(enc_len[i])
        cosines = F.cosine_similarity(got[i, :n].double(), expected[i, :n].double(), dim=-1)
        assert float(cosines.min()) >= 0.999, cosines
    n = int(alone_len[0])
    torch.testing.assert_close(alone[0, :n], got[0, :n], atol=3e-2, rtol=3e-2)


def test_graph_replay_with_the_kernels_equals_eager() -> None:
    options: Dict[str, Any] = {
        "config": "tiny",
        "device": "cuda",
        "batchSizes": [1, 4],
        "lengthBucketsMs": [5000],
        "compileEncoder": True,
        "experimentalKernels": "triton",
    }
    adapter = ParakeetAdapter()
    info = adapter.load(LoadContext("gpu", "parakeet", options))
    assert getattr(info, "kernels") == "triton"
    try:
        adapter.warmup()
        runner = adapter._runner
        assert runner is not None
        clips = _clips([3.1, 4.7, 1.9], seed=140)
        replayed = runner.run_graph(clips, 4, runner.buckets[0])
        eager, _ = runner.run_eager_padded(clips, 4, runner.buckets[0])
        assert [r.tokens for r in replayed] == [e.tokens for e in eager]
        outputs = adapter.run_batch([BatchInput(f"r{i}", c) for i, c in enumerate(clips)])
        assert all(isinstance(o, Transcript) for o in outputs)
    finally:
        adapter.close()
