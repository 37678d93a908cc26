"""The encoder's own Triton kernels (``kernels: triton``): two memory-bound steps of every conformer layer
that PyTorch and Inductor run far below the GPU's memory bandwidth.

- :func:`masked_rel_shift`: the attention's position bias. From the scores of every query against every
  relative position, ``bd [B, H, T, R]`` (column c = relative position T-1-c), it writes the
  ``[B, H, T, T]`` bias that the fused attention adds, ``out[b, h, i, j] = bd[b, h, i, T-1-i+j]``,
  with padded keys set to the mask value. Compiled (with dynamic shapes), Inductor's kernel for this
  strided view, masked fill and cast took 552 us per layer for 32 x 45 s on an H200, several times
  what its memory traffic needs. Here each program owns a tile of rows and columns, so the per-element
  index work is one add (no division by run-time sizes).
- :func:`glu_depthwise_silu`: the convolution module between its two pointwise products: GLU, zeroing
  padded steps, the depthwise convolution along time (same padding), eval-mode BatchNorm (folded into
  the depthwise weights and bias by the caller) and SiLU, in one pass over [B, T, 2C] that writes
  [B, T, C]; kernel size 9 only. PyTorch's depthwise kernel alone took 236 us per layer on
  [32, 1024, 563].

Both live in triton_kernels.py, registered as PyTorch custom operators (``voxmux::...``, torch >= 2.4) so that
``torch.compile`` and CUDA graph capture treat each as one opaque kernel launch. Without Triton or
without ``torch.library.custom_op`` (torch 1.13 on a CPU), :data:`KERNELS_AVAILABLE` is False and
:data:`KERNELS_UNAVAILABLE_REASON` says why; the encoder then refuses ``kernels: triton``.
:func:`masked_rel_shift_reference` and :func:`glu_depthwise_silu_reference` state the same results in
plain PyTorch (any device); the GPU tests compare the kernels against them.
"""
from __future__ import annotations

import importlib
from typing import Optional

import torch
import torch.nn.functional as F

#: The depthwise kernel size that :func:`glu_depthwise_silu` is written for (the FastConformer's).
CONV_KERNEL_SIZE = 9

_import_problem: Optional[str] = None
if not hasattr(torch.library, "custom_op"):
    _import_problem = f"torch.library.custom_op needs torch >= 2.4: this is torch {torch.__version__}"
else:
    try:
        importlib.import_module(f"{__package__}.triton_kernels")  # registers torch.ops.voxmux.*
    except ImportError as exc:  # no Triton
        _import_problem = f"Triton is not installed ({exc})"

#: The kernels can be used (Triton imports and custom operators exist). A CUDA device is still needed.
KERNELS_AVAILABLE = _import_problem is None
#: Why :data:`KERNELS_AVAILABLE` is False ('' when it is True).
KERNELS_UNAVAILABLE_REASON = _import_problem or ""


def masked_rel_shift_reference(bd: torch.Tensor, key_pad: torch.Tensor, mask_value: float) -> torch.Tensor:
    """bd [B, H, T, R >= 2T-1], key_pad [B, T] (True = padded) -> [B, H, T, T] in bd's dtype:
    out[b, h, i, j] = bd[b, h, i, T-1-i+j], or mask_value where key j of item b is padded."""
    b, h, t, r = bd.shape
    if r < 2 * t - 1:
        raise ValueError(f"Expected bd [B, H, T, >= 2T-1]: got {list(bd.shape)}")
    i = torch.arange(t, device=bd.device)[:, None]
    j = torch.arange(t, device=bd.device)[None, :]
    shifted = bd[:, :, i, t - 1 - i + j]  # [B, H, T, T]
    return shifted.masked_fill(key_pad[:, None, None, :], mask_value)


def glu_depthwise_silu_reference(
    y: torch.Tensor, pad: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """y [B, T, 2C], pad [B, T] (True = padded), weight [C, K] (K odd), bias [C] -> [B, T, C] in y's dtype:
    silu(depthwise_conv(glu(y) with padded steps zeroed, same padding) + bias), computed in float32."""
    k = weight.shape[1]
    x = F.glu(y.float(), dim=-1).masked_fill(pad[:, :, None], 0.0).transpose(1, 2)
    out = F.conv1d(x, weight.float()[:, None, :], bias.float(), padding=(k - 1) // 2, groups=weight.shape[0])
    return F.silu(out).transpose(1, 2).to(y.dtype)


def masked_rel_shift(bd: torch.Tensor, key_pad: torch.Tensor, mask_value: float) -> torch.Tensor:
    """:func:`masked_rel_shift_reference` as one Triton kernel (CUDA tensors; bd's last dimension
    contiguous, its other dimensions in any order)."""
    return torch.ops.voxmux.masked_rel_shift(bd, key_pad, mask_value)  # type: ignore[no-any-return]


def glu_depthwise_silu(y: torch.Tensor, pad: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """:func:`glu_depthwise_silu_reference` as one Triton kernel (CUDA tensors; weight [C, 9] and bias
    [C], cast to float32)."""
    return torch.ops.voxmux.glu_depthwise_silu(y, pad, weight, bias)  # type: ignore[no-any-return]
