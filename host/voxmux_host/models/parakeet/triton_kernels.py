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

from .kernels import CONV_KERNEL_SIZE

#: Tile of the position-bias kernel: rows (queries) by columns (keys) per program.
BIAS_BLOCK_I = 16
BIAS_BLOCK_J = 128
#: Tile of the convolution kernel: time steps by channels per program, and its warps.
CONV_BLOCK_T = 32
CONV_BLOCK_C = 256
CONV_WARPS = 2


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
def _glu_row(y_item, pad_item, s, T, C, c, channels):
    """GLU of time step s of one item over channels c (float32), zero outside [0, T) and where padded."""
    inside = (s >= 0) & (s < T)
    padded = tl.load(pad_item + s, mask=inside, other=1)
    live = channels & inside & (padded == 0)
    row = y_item + s.to(tl.int64) * 2 * C
    a = tl.load(row + c, mask=live, other=0.0).to(tl.float32)
    gate = tl.load(row + C + c, mask=live, other=0.0).to(tl.float32)
    return a * tl.sigmoid(gate)


@triton.jit
def _glu_depthwise_silu_kernel(
    y,
    pad,
    weight,
    bias,
    out,
    T,
    C,
    BLOCK_T: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    # One program: BLOCK_C channels of one item over BLOCK_T time steps, walking along time with the
    # last nine GLU rows in registers (g0 = step t-4 ... g8 = step t+4), so each input row is read and
    # gated once (plus a halo of 8 rows per program). Kernel size 9 only (CONV_KERNEL_SIZE).
    b = tl.program_id(2)
    t0 = tl.program_id(1) * BLOCK_T
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    channels = c < C
    y_item = y + b.to(tl.int64) * T * 2 * C
    pad_item = pad + b * T
    out_item = out + b.to(tl.int64) * T * C
    w0 = tl.load(weight + c * 9 + 0, mask=channels, other=0.0)
    w1 = tl.load(weight + c * 9 + 1, mask=channels, other=0.0)
    w2 = tl.load(weight + c * 9 + 2, mask=channels, other=0.0)
    w3 = tl.load(weight + c * 9 + 3, mask=channels, other=0.0)
    w4 = tl.load(weight + c * 9 + 4, mask=channels, other=0.0)
    w5 = tl.load(weight + c * 9 + 5, mask=channels, other=0.0)
    w6 = tl.load(weight + c * 9 + 6, mask=channels, other=0.0)
    w7 = tl.load(weight + c * 9 + 7, mask=channels, other=0.0)
    w8 = tl.load(weight + c * 9 + 8, mask=channels, other=0.0)
    shift = tl.load(bias + c, mask=channels, other=0.0)
    g0 = _glu_row(y_item, pad_item, t0 - 4, T, C, c, channels)
    g1 = _glu_row(y_item, pad_item, t0 - 3, T, C, c, channels)
    g2 = _glu_row(y_item, pad_item, t0 - 2, T, C, c, channels)
    g3 = _glu_row(y_item, pad_item, t0 - 1, T, C, c, channels)
    g4 = _glu_row(y_item, pad_item, t0, T, C, c, channels)
    g5 = _glu_row(y_item, pad_item, t0 + 1, T, C, c, channels)
    g6 = _glu_row(y_item, pad_item, t0 + 2, T, C, c, channels)
    g7 = _glu_row(y_item, pad_item, t0 + 3, T, C, c, channels)
    for i in range(0, BLOCK_T):
        t = t0 + i
        g8 = _glu_row(y_item, pad_item, t + 4, T, C, c, channels)
        acc = shift + w0 * g0 + w1 * g1 + w2 * g2 + w3 * g3 + w4 * g4 + w5 * g5 + w6 * g6 + w7 * g7 + w8 * g8
        acc = acc * tl.sigmoid(acc)
        tl.store(out_item + t.to(tl.int64) * C + c, acc.to(out.dtype.element_ty), mask=channels & (t < T))
        g0 = g1
        g1 = g2
        g2 = g3
        g3 = g4
        g4 = g5
        g5 = g6
        g6 = g7
        g7 = g8


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
    if c2 != 2 * c or k != CONV_KERNEL_SIZE or tuple(pad.shape) != (b, t) or tuple(bias.shape) != (c,):
        raise ValueError(
            f"Expected y [B, T, 2C], pad [B, T], weight [C, {CONV_KERNEL_SIZE}], bias [C]: got {list(y.shape)}, "
            f"{list(pad.shape)}, {list(weight.shape)}, {list(bias.shape)}"
        )
    y = y.contiguous()
    out = torch.empty((b, t, c), device=y.device, dtype=y.dtype)
    grid = (triton.cdiv(c, CONV_BLOCK_C), triton.cdiv(t, CONV_BLOCK_T), b)
    _glu_depthwise_silu_kernel[grid](
        y, pad.contiguous().view(torch.uint8), weight.float().contiguous(), bias.float().contiguous(), out, t, c,
        BLOCK_T=CONV_BLOCK_T, BLOCK_C=CONV_BLOCK_C, num_warps=CONV_WARPS,
    )
    return out


@_glu_depthwise_silu_op.register_fake
def _glu_depthwise_silu_fake(y: torch.Tensor, pad: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    b, t, _ = y.shape
    return y.new_empty((b, t, weight.shape[0]))
