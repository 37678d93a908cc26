# mypy: ignore-errors
"""The Triton kernels behind kernels.py and their registration as PyTorch custom operators
(``torch.ops.voxmux.masked_rel_shift``, ``torch.ops.voxmux.glu_depthwise_silu``).

Imported by kernels.py only where Triton and ``torch.library.custom_op`` exist; Triton has no type
annotations, hence no type checking here. What each kernel computes is stated, and tested on the CPU,
by the references in kernels.py.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

#: Tile of the position-bias kernel: rows (queries) by columns (keys) per program.
BIAS_BLOCK_I = 16
BIAS_BLOCK_J = 128
#: Tile of the convolution kernel: time steps by channels per program.
CONV_BLOCK_T = 32
CONV_BLOCK_C = 128


@triton.jit
def _masked_rel_shift_kernel(
    bd,
    key_pad,
    out,
    T,
    H,
    stride_b,
    stride_h,
    stride_t,
    mask_value,
    BLOCK_I: tl.constexpr,
    BLOCK_J: tl.constexpr,
):
    bh = tl.program_id(2)
    b = bh // H
    h = bh - b * H
    i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    j = tl.program_id(0) * BLOCK_J + tl.arange(0, BLOCK_J)
    rows = i < T
    cols = j < T
    inside = rows[:, None] & cols[None, :]
    base = bd + b.to(tl.int64) * stride_b + h.to(tl.int64) * stride_h
    # Row i starts at column T-1-i: relative position i - j for key j.
    src = base + (i * stride_t + (T - 1) - i)[:, None] + j[None, :]
    values = tl.load(src, mask=inside, other=0.0)
    padded = tl.load(key_pad + b * T + j, mask=cols, other=1) != 0
    values = tl.where(padded[None, :], mask_value, values)
    dst = out + bh.to(tl.int64) * T * T + (i * T)[:, None] + j[None, :]
    tl.store(dst, values.to(out.dtype.element_ty), mask=inside)


@triton.jit
def _glu_depthwise_silu_kernel(
    y,
    pad,
    weight,
    bias,
    out,
    T,
    C,
    K: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    b = tl.program_id(2)
    t = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    channels = c < C
    y_item = y + b.to(tl.int64) * T * 2 * C
    acc = tl.zeros((BLOCK_T, BLOCK_C), dtype=tl.float32)
    for k in tl.static_range(K):
        s = t + (k - (K - 1) // 2)
        steps = (s >= 0) & (s < T)
        padded = tl.load(pad + b * T + s, mask=steps, other=1) != 0
        live = (steps & (padded == 0))[:, None] & channels[None, :]
        row = y_item + (s * 2 * C)[:, None] + c[None, :]
        a = tl.load(row, mask=live, other=0.0).to(tl.float32)
        gate = tl.load(row + C, mask=live, other=0.0).to(tl.float32)
        w = tl.load(weight + c * K + k, mask=channels, other=0.0)
        acc += a * tl.sigmoid(gate) * w[None, :]
    acc += tl.load(bias + c, mask=channels, other=0.0)[None, :]
    acc = acc * tl.sigmoid(acc)
    dst = out + b.to(tl.int64) * T * C + (t * C)[:, None] + c[None, :]
    tl.store(dst, acc.to(out.dtype.element_ty), mask=(t < T)[:, None] & channels[None, :])


@torch.library.custom_op("voxmux::masked_rel_shift", mutates_args=())
def _masked_rel_shift_op(bd: torch.Tensor, key_pad: torch.Tensor, mask_value: float) -> torch.Tensor:
    b, h, t, r = bd.shape
    if r < 2 * t - 1 or tuple(key_pad.shape) != (b, t):
        raise ValueError(f"Expected bd [B, H, T, >= 2T-1] and key_pad [B, T]: got {list(bd.shape)}, {list(key_pad.shape)}")
    if bd.stride(-1) != 1:
        bd = bd.contiguous()
    pad = key_pad.contiguous().view(torch.uint8)
    out = torch.empty((b, h, t, t), device=bd.device, dtype=bd.dtype)
    grid = (triton.cdiv(t, BIAS_BLOCK_J), triton.cdiv(t, BIAS_BLOCK_I), b * h)
    _masked_rel_shift_kernel[grid](
        bd, pad, out, t, h, bd.stride(0), bd.stride(1), bd.stride(2), float(mask_value),
        BLOCK_I=BIAS_BLOCK_I, BLOCK_J=BIAS_BLOCK_J,
    )
    return out


@_masked_rel_shift_op.register_fake
def _masked_rel_shift_fake(bd: torch.Tensor, key_pad: torch.Tensor, mask_value: float) -> torch.Tensor:
    b, h, t, _ = bd.shape
    return bd.new_empty((b, h, t, t))


@torch.library.custom_op("voxmux::glu_depthwise_silu", mutates_args=())
def _glu_depthwise_silu_op(y: torch.Tensor, pad: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    b, t, c2 = y.shape
    c, k = weight.shape
    if c2 != 2 * c or k % 2 != 1 or tuple(pad.shape) != (b, t) or tuple(bias.shape) != (c,):
        raise ValueError(
            f"Expected y [B, T, 2C], pad [B, T], weight [C, odd K], bias [C]: got {list(y.shape)}, "
            f"{list(pad.shape)}, {list(weight.shape)}, {list(bias.shape)}"
        )
    y = y.contiguous()
    out = torch.empty((b, t, c), device=y.device, dtype=y.dtype)
    grid = (triton.cdiv(c, CONV_BLOCK_C), triton.cdiv(t, CONV_BLOCK_T), b)
    _glu_depthwise_silu_kernel[grid](
        y, pad.contiguous().view(torch.uint8), weight.float().contiguous(), bias.float().contiguous(), out, t, c,
        K=k, BLOCK_T=CONV_BLOCK_T, BLOCK_C=CONV_BLOCK_C,
    )
    return out


@_glu_depthwise_silu_op.register_fake
def _glu_depthwise_silu_fake(y: torch.Tensor, pad: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    b, t, _ = y.shape
    return y.new_empty((b, t, weight.shape[0]))
