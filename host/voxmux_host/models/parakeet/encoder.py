"""FastConformer encoder: dw_striding subsampling, relative-position self-attention, conv modules.

Module and parameter names follow NeMo's ``ConformerEncoder`` so that a ``.nemo`` state dict loads by
name (``encoder.pre_encode.conv.0.weight``, ``encoder.layers.3.self_attn.pos_bias_u``, ...).

Padding never changes a valid frame: the subsampling stack zeroes time steps beyond each item's length
before every strided convolution, attention masks padded keys, and the convolution module zeroes padded
steps before its depthwise convolution. Frames at or beyond an item's encoder length hold unspecified
values (NeMo's do too) and are never read by the decoder. Unlike NeMo, padded *query* rows are not
forced to zero after attention: they feed only padded frames, so this saves work without changing any
valid frame.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Protocol, Tuple, cast

import torch
import torch.nn.functional as F
from torch import nn

from .config import ParakeetConfig
from voxmux_host.fp8 import FP8_AVAILABLE, Fp8Weight, fp8_linear, fp8_weight_from
from .kernels import (
    CONV_KERNEL_SIZE,
    KERNELS_AVAILABLE,
    KERNELS_UNAVAILABLE_REASON,
    glu_depthwise_silu,
    masked_rel_shift,
)

#: NeMo fills masked attention scores with -10000 (INF_VAL), not -inf.
MASK_SCORE = -10000.0
LAYER_NORM_EPS = 1e-5

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")

#: The attention implementations: PyTorch's fused SDPA with the position bias as its mask, or the
#: written-out product (any torch).
ATTENTION_IMPLS = ("sdpa", "manual")
#: The encoder's large matrix products (see ConformerEncoder.set_matmul): the parameters' own dtype, or
#: FP8 (e4m3) with row-wise scales.
MATMUL_KINDS = ("bf16", "fp8")
#: Who runs the attention's position bias and the convolution module's GLU-to-SiLU steps (see
#: ConformerEncoder.set_kernels): PyTorch's operators, or the project's Triton kernels (kernels.py).
KERNEL_KINDS = ("torch", "triton")
#: The position table gets a multiple of this many rows, so the [T, rows] score matrix has aligned rows
#: (an odd 2T-1 width sends cuBLAS to a slow unaligned kernel: 7.8 ms of 67 ms per 16 x 45 s batch).
POSITION_ROW_ALIGNMENT = 8


def time_mask(lengths: torch.Tensor, max_length: int) -> torch.Tensor:
    """Boolean [B, max_length], True at padded steps (t >= length)."""
    return torch.arange(max_length, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(1)


def subsampled_lengths(lengths: torch.Tensor, stages: int) -> torch.Tensor:
    """floor((L + 2 - 3) / 2) + 1 per stride-2 stage (ceil(L / 2); 0 stays 0)."""
    for _ in range(stages):
        lengths = torch.div(lengths - 1, 2, rounding_mode="floor") + 1
    return lengths


class ConvSubsampling(nn.Module):
    """``dw_striding``: Conv2d(1->C, 3, s2) ReLU, then (depthwise 3x3 s2, pointwise 1x1, ReLU) x (stages-1).

    Input [B, T, F] features (time, mel), output [B, T', d_model]. State-dict indices of ``conv`` match
    NeMo: 0 conv, 1 ReLU, 2 depthwise, 3 pointwise, 4 ReLU, 5 depthwise, 6 pointwise, 7 ReLU.
    """

    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        ch = config.subsampling_channels
        self.stages = config.subsampling_stages
        layers: list[nn.Module] = [nn.Conv2d(1, ch, 3, stride=2, padding=1, device=device), nn.ReLU()]
        for _ in range(self.stages - 1):
            layers.append(nn.Conv2d(ch, ch, 3, stride=2, padding=1, groups=ch, device=device))
            layers.append(nn.Conv2d(ch, ch, 1, device=device))
            layers.append(nn.ReLU())
        self.conv = nn.Sequential(*layers)
        self.out = nn.Linear(ch * config.subsampled_mels, config.d_model, device=device)
        #: FP8 copy of ``out`` (see ConformerEncoder.set_matmul); not a parameter or buffer.
        self._fp8_out: Optional[Fp8Weight] = None

    def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.drop_fp8()  # quantized from the weights as they were: build_fp8_ again after moving
        return super()._apply(fn, *args, **kwargs)  # type: ignore[no-untyped-call]

    def build_fp8_(self) -> None:
        self._fp8_out = fp8_weight_from(self.out.weight, self.out.bias)

    def drop_fp8(self) -> None:
        self._fp8_out = None

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """feats [B, T, F] (zero beyond each length), lengths [B] -> ([B, T', d_model], lengths')."""
        x = feats.masked_fill(time_mask(lengths, feats.shape[1]).unsqueeze(-1), 0.0)
        x = self.conv[0](x.unsqueeze(1))  # [B, 1, T, F]: height = time, width = mel
        lengths = subsampled_lengths(lengths, 1)
        # In place when no gradient is needed: these are the largest activations of the model
        # ([B, C, T/2, F/2] after the first convolution).
        in_place = not torch.is_grad_enabled()
        x = F.relu_(x) if in_place else F.relu(x)
        index = 2
        for _ in range(self.stages - 1):
            x = _zero_padded_steps(x, lengths, in_place)
            x = self.conv[index](x)
            x = self.conv[index + 1](x)
            lengths = subsampled_lengths(lengths, 1)
            x = F.relu_(x) if in_place else F.relu(x)
            index += 3
        x = _zero_padded_steps(x, lengths, in_place)
        b, c, t, f = x.shape
        x = x.transpose(1, 2).reshape(b, t, c * f)
        x = self.out(x) if self._fp8_out is None else fp8_linear(x, self._fp8_out)
        return x, lengths


def _zero_padded_steps(x: torch.Tensor, lengths: torch.Tensor, in_place: bool) -> torch.Tensor:
    mask = time_mask(lengths, x.shape[2])[:, None, :, None]
    return x.masked_fill_(mask, 0.0) if in_place else x.masked_fill(mask, 0.0)


class RelPositionalEncoding(nn.Module):
    """Sinusoidal table for relative positions T-1 ... -(T-1); no parameters (NeMo's ``pe`` is not saved)."""

    def __init__(self, d_model: int, xscale: Optional[float]) -> None:
        super().__init__()
        self.d_model = d_model
        self.xscale = xscale
        self._cache: Dict[Tuple[int, str, torch.dtype], torch.Tensor] = {}

    def table(self, length: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """[1, rows, d_model] with rows = 2 * length - 1 rounded up to a multiple of 8; row r holds
        relative position (length - 1 - r). NeMo's table is the first 2 * length - 1 rows; the extra rows
        (positions below -(length - 1)) are never read and only keep the attention's position GEMM aligned.

        Cached per (length, device, dtype); a table first needed while a CUDA graph is being captured is
        computed inside the graph and not cached, since its values exist only after the first replay.
        """
        key = (length, str(device), dtype)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        rows = -(-(2 * length - 1) // POSITION_ROW_ALIGNMENT) * POSITION_ROW_ALIGNMENT
        positions = torch.arange(length - 1, length - 1 - rows, -1, dtype=torch.float32, device=device).unsqueeze(1)
        div_term = torch.exp(
            torch.arange(0, self.d_model, 2, dtype=torch.float32, device=device) * -(math.log(10000.0) / self.d_model)
        )
        pe = torch.zeros(rows, self.d_model, dtype=torch.float32, device=device)
        pe[:, 0::2] = torch.sin(positions * div_term)
        pe[:, 1::2] = torch.cos(positions * div_term)
        pe = pe.unsqueeze(0).to(dtype)
        capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()  # type: ignore[no-untyped-call]
        if not capturing:
            self._cache[key] = pe
        return pe

    def clear_cache(self) -> None:
        self._cache.clear()

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.xscale is not None:
            x = x * self.xscale
        return x, self.table(x.shape[1], x.device, x.dtype)


class RelPositionMultiHeadAttention(nn.Module):
    """Transformer-XL attention with untied per-layer biases ``pos_bias_u`` / ``pos_bias_v``.

    score[i, j] = ((q_i + u) . k_j + (q_i + v) . p_{i-j}) / sqrt(d_head), p = linear_pos(pos_emb).
    """

    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        d = config.d_model
        self.n_heads = config.n_heads
        self.d_head = config.d_head
        self.linear_q = nn.Linear(d, d, bias=config.use_bias, device=device)
        self.linear_k = nn.Linear(d, d, bias=config.use_bias, device=device)
        self.linear_v = nn.Linear(d, d, bias=config.use_bias, device=device)
        self.linear_out = nn.Linear(d, d, bias=config.use_bias, device=device)
        self.linear_pos = nn.Linear(d, d, bias=False, device=device)
        self.pos_bias_u = nn.Parameter(torch.zeros(self.n_heads, self.d_head, device=device))
        self.pos_bias_v = nn.Parameter(torch.zeros(self.n_heads, self.d_head, device=device))
        #: One of ATTENTION_IMPLS (see ConformerEncoder.set_attention_impl).
        self.impl = "sdpa" if HAS_SDPA else "manual"
        #: One of KERNEL_KINDS: "triton" builds the masked position bias in one kernel (sdpa only).
        self.kernels = "torch"
        #: Set by fuse_qkv_, cleared whenever the module is moved or cast (see _apply).
        self._qkv_weight: Optional[torch.Tensor] = None
        self._qkv_bias: Optional[torch.Tensor] = None
        #: FP8 copies of the fused q, k, v projection and of linear_out (see ConformerEncoder.set_matmul).
        self._fp8_qkv: Optional[Fp8Weight] = None
        self._fp8_out: Optional[Fp8Weight] = None

    def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        # Moving or casting gives the q, k and v parameters data of their own: the fused tensor no
        # longer backs them, so forget it (fuse_qkv_ again afterwards). The FP8 copies were quantized
        # from the weights as they were (build_fp8_ again afterwards).
        self._qkv_weight = None
        self._qkv_bias = None
        self.drop_fp8()
        return super()._apply(fn, *args, **kwargs)  # type: ignore[no-untyped-call]

    def build_fp8_(self) -> None:
        """Quantize the fused q, k, v weight (with the bias the fused GEMM adds) and linear_out."""
        if self._qkv_weight is None:
            raise ValueError("Expected fused q, k and v projections for FP8: call fuse_qkv_() first")
        self._fp8_qkv = fp8_weight_from(self._qkv_weight, self._fused_qkv_bias())
        self._fp8_out = fp8_weight_from(self.linear_out.weight, self.linear_out.bias)

    def drop_fp8(self) -> None:
        self._fp8_qkv = None
        self._fp8_out = None

    def fuse_qkv_(self) -> None:
        """Store q, k and v weights in one [3d, d] tensor, the three parameters becoming views of it.

        One GEMM then produces q, k and v. The parameters keep their names and shapes, so state dicts
        still load and save by NeMo's names; call this only after the module has reached its final device
        and dtype (moving or casting it again undoes the fusion, which the next call redoes).
        """
        with torch.no_grad():
            weight = torch.cat([self.linear_q.weight, self.linear_k.weight, self.linear_v.weight], dim=0)
            d = self.linear_q.weight.shape[0]
            self.linear_q.weight = nn.Parameter(weight[:d], requires_grad=False)
            self.linear_k.weight = nn.Parameter(weight[d : 2 * d], requires_grad=False)
            self.linear_v.weight = nn.Parameter(weight[2 * d :], requires_grad=False)
            self._qkv_weight = weight
            if self.linear_q.bias is not None:
                bias = torch.cat([self.linear_q.bias, self.linear_k.bias, self.linear_v.bias], dim=0)
                self.linear_q.bias = nn.Parameter(bias[:d], requires_grad=False)
                self.linear_k.bias = nn.Parameter(bias[d : 2 * d], requires_grad=False)
                self.linear_v.bias = nn.Parameter(bias[2 * d :], requires_grad=False)
                self._qkv_bias = bias

    def _is_fused(self) -> bool:
        # A plain attribute test (no data_ptr): torch.compile traces it without a graph break.
        return self._qkv_weight is not None

    def _fused_qkv_bias(self) -> torch.Tensor:
        """The fused GEMM's bias [3d] in the weight's dtype: pos_bias_u on the q third, plus the q, k and v
        biases where the model has them."""
        weight = self._qkv_weight
        assert weight is not None
        u = self.pos_bias_u.reshape(-1)
        bias = torch.cat([u, torch.zeros_like(u), torch.zeros_like(u)])
        if self._qkv_bias is not None:
            bias = self._qkv_bias + bias.to(self._qkv_bias.dtype)
        return bias.to(weight.dtype)

    def _project_qkv(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q + pos_bias_u, k, v, each [B, T, d]. Fused, the bias u rides in the GEMM's bias epilogue."""
        if self._is_fused():
            weight = self._qkv_weight
            assert weight is not None
            if self._fp8_qkv is not None:
                qkv = fp8_linear(x, self._fp8_qkv)
            else:
                qkv = F.linear(x, weight, self._fused_qkv_bias())
            q_u, k, v = qkv.chunk(3, dim=-1)
            return q_u, k, v
        u = self.pos_bias_u.reshape(-1)
        q = self.linear_q(x)
        return q + u.to(q.dtype), self.linear_k(x), self.linear_v(x)

    def forward(self, x: torch.Tensor, pos_emb: torch.Tensor, key_pad: torch.Tensor) -> torch.Tensor:
        """x [B, T, d], pos_emb [1, R >= 2T-1, d], key_pad [B, T] (True = padded) -> [B, T, d]."""
        b, t, _ = x.shape
        h, dk = self.n_heads, self.d_head
        scale = 1.0 / math.sqrt(dk)
        q_u, k, v = self._project_qkv(x)
        q_v = q_u + (self.pos_bias_v - self.pos_bias_u).reshape(-1).to(q_u.dtype)
        q_u = q_u.view(b, t, h, dk).transpose(1, 2)  # [B, H, T, dk]
        k = k.view(b, t, h, dk).transpose(1, 2)
        v = v.view(b, t, h, dk).transpose(1, 2)
        rows = pos_emb.shape[1]
        p = (self.linear_pos(pos_emb) * scale).view(rows, h, dk).permute(1, 2, 0)  # [H, dk, R], scaled
        # One GEMM per head over all B*T query rows: [H, B*T, dk] x [H, dk, R]. (A [B, H, T, dk] x
        # [H, dk, R] matmul would first copy p out to every batch item.) The result, viewed as
        # [B, H, T, R], keeps rows of R contiguous values, which is all rel_shift needs.
        q_v_heads = q_v.view(b * t, h, dk).transpose(0, 1)
        bd_rows = torch.bmm(q_v_heads, p.to(q_v_heads.dtype)).view(h, b, t, rows).transpose(0, 1)
        mask = key_pad[:, None, None, :]
        if self.impl == "sdpa" and HAS_SDPA:
            if self.kernels == "triton":
                bias = masked_rel_shift(bd_rows, key_pad, MASK_SCORE)
            else:
                # [B, H, T, T]: bd[i, j] uses relative position i - j
                bias = rel_shift(bd_rows, t).masked_fill(mask, MASK_SCORE)
            sdpa = getattr(F, "scaled_dot_product_attention")
            out = sdpa(q_u, k, v, attn_mask=bias.to(q_u.dtype))
        else:
            bd = rel_shift(bd_rows, t)
            scores = torch.matmul(q_u, k.transpose(-2, -1)) * scale + bd
            scores = scores.masked_fill(mask, MASK_SCORE)
            attn = torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype)
            out = torch.matmul(attn, v)
        return self._project_out(out, b, t)

    def _project_out(self, out: torch.Tensor, b: int, t: int) -> torch.Tensor:
        """[B, H, T, dk] -> [B, T, d] through linear_out."""
        x = out.transpose(1, 2).reshape(b, t, self.n_heads * self.d_head)
        projected: torch.Tensor = self.linear_out(x) if self._fp8_out is None else fp8_linear(x, self._fp8_out)
        return projected


def rel_shift(bd: torch.Tensor, length: int) -> torch.Tensor:
    """[..., T, R] (R >= 2T-1, column c = relative position T-1-c) -> [..., T, T] with
    out[i, j] = bd[i, T-1-i+j], i.e. the score of relative position i - j, without a copy.

    Equal to NeMo's pad / view / slice ``rel_shift`` followed by keeping the first T columns: row i of
    the result starts at column T-1-i of row i of the input, so it is a strided view with row stride
    R-1 and offset T-1.
    """
    *lead, t, width = bd.shape
    if t != length or width < 2 * t - 1:
        raise ValueError(f"Expected [..., {length}, >= {2 * length - 1}]: got {list(bd.shape)}")
    # Only the last two dimensions must be row-major; the leading ones may be in any order.
    if bd.stride(-1) != 1 or bd.stride(-2) != width:
        bd = bd.contiguous()
    lead_strides: List[int] = list(bd.stride()[:-2])
    return bd.as_strided(
        size=(*lead, t, t),
        stride=(*lead_strides, width - 1, 1),
        storage_offset=bd.storage_offset() + t - 1,
    )


class ConformerFeedForward(nn.Module):
    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.linear1 = nn.Linear(config.d_model, config.d_ff, bias=config.use_bias, device=device)
        self.linear2 = nn.Linear(config.d_ff, config.d_model, bias=config.use_bias, device=device)
        #: FP8 copies of linear1 and linear2 (see ConformerEncoder.set_matmul); not parameters or buffers.
        self._fp8_linear1: Optional[Fp8Weight] = None
        self._fp8_linear2: Optional[Fp8Weight] = None

    def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.drop_fp8()  # quantized from the weights as they were: build_fp8_ again after moving
        return super()._apply(fn, *args, **kwargs)  # type: ignore[no-untyped-call]

    def build_fp8_(self) -> None:
        self._fp8_linear1 = fp8_weight_from(self.linear1.weight, self.linear1.bias)
        self._fp8_linear2 = fp8_weight_from(self.linear2.weight, self.linear2.bias)

    def drop_fp8(self) -> None:
        self._fp8_linear1 = None
        self._fp8_linear2 = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear1(x) if self._fp8_linear1 is None else fp8_linear(x, self._fp8_linear1)
        h = F.silu(h)
        out: torch.Tensor = self.linear2(h) if self._fp8_linear2 is None else fp8_linear(h, self._fp8_linear2)
        return out


class ConformerConvolution(nn.Module):
    """pointwise (d -> 2d), GLU, zero padded steps, depthwise k (same padding), BatchNorm, SiLU, pointwise.

    The 1x1 convolutions run as linear layers on [B, T, C] (same weights, no transposes).
    """

    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        d, k = config.d_model, config.conv_kernel_size
        self.pointwise_conv1 = nn.Conv1d(d, 2 * d, 1, bias=config.use_bias, device=device)
        self.depthwise_conv = nn.Conv1d(d, d, k, padding=(k - 1) // 2, groups=d, bias=config.use_bias, device=device)
        self.batch_norm = nn.BatchNorm1d(d, device=device)
        self.pointwise_conv2 = nn.Conv1d(d, d, 1, bias=config.use_bias, device=device)
        #: One of KERNEL_KINDS: "triton" runs GLU, padding, depthwise, BatchNorm and SiLU as one kernel.
        self.kernels = "torch"
        #: FP8 copies of the pointwise convolutions (see ConformerEncoder.set_matmul).
        self._fp8_pointwise1: Optional[Fp8Weight] = None
        self._fp8_pointwise2: Optional[Fp8Weight] = None

    def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.drop_fp8()  # quantized from the weights as they were: build_fp8_ again after moving
        return super()._apply(fn, *args, **kwargs)  # type: ignore[no-untyped-call]

    def build_fp8_(self) -> None:
        self._fp8_pointwise1 = fp8_weight_from(self.pointwise_conv1.weight.squeeze(-1), self.pointwise_conv1.bias)
        self._fp8_pointwise2 = fp8_weight_from(self.pointwise_conv2.weight.squeeze(-1), self.pointwise_conv2.bias)

    def drop_fp8(self) -> None:
        self._fp8_pointwise1 = None
        self._fp8_pointwise2 = None

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """x [B, T, d], pad [B, T] (True = padded) -> [B, T, d]."""
        if self._fp8_pointwise1 is None:
            x = F.linear(x, self.pointwise_conv1.weight.squeeze(-1), self.pointwise_conv1.bias)
        else:
            x = fp8_linear(x, self._fp8_pointwise1)
        if self.kernels == "triton":
            weight, bias = self.folded_depthwise()
            x = glu_depthwise_silu(x, pad, weight, bias)
        else:
            x = F.glu(x, dim=-1)
            x = x.masked_fill(pad.unsqueeze(-1), 0.0)
            x = self.depthwise_conv(x.transpose(1, 2))
            x = self.batch_norm(x)
            x = F.silu(x).transpose(1, 2)
        if self._fp8_pointwise2 is None:
            return F.linear(x, self.pointwise_conv2.weight.squeeze(-1), self.pointwise_conv2.bias)
        return fp8_linear(x, self._fp8_pointwise2)


    def folded_depthwise(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """The depthwise convolution followed by eval-mode BatchNorm as one convolution: float32 weight
        [C, K] and bias [C]. Computed on every call (a few small kernels inside the layer's graph), so
        it always reflects the current parameters and running statistics."""
        bn = self.batch_norm
        assert bn.running_mean is not None and bn.running_var is not None
        scale = torch.rsqrt(bn.running_var.float() + bn.eps)
        if bn.weight is not None:
            scale = scale * bn.weight.float()
        shift = -bn.running_mean.float() * scale
        if bn.bias is not None:
            shift = shift + bn.bias.float()
        conv_bias = self.depthwise_conv.bias
        if conv_bias is not None:
            shift = shift + conv_bias.float() * scale
        weight = self.depthwise_conv.weight.float().squeeze(1) * scale[:, None]
        return weight, shift


class ConformerLayer(nn.Module):
    """Macaron block: x + FF/2, x + MHSA, x + Conv, x + FF/2, LayerNorm."""

    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        d = config.d_model
        self.norm_feed_forward1 = nn.LayerNorm(d, eps=LAYER_NORM_EPS, device=device)
        self.feed_forward1 = ConformerFeedForward(config, device)
        self.norm_conv = nn.LayerNorm(d, eps=LAYER_NORM_EPS, device=device)
        self.conv = ConformerConvolution(config, device)
        self.norm_self_att = nn.LayerNorm(d, eps=LAYER_NORM_EPS, device=device)
        self.self_attn = RelPositionMultiHeadAttention(config, device)
        self.norm_feed_forward2 = nn.LayerNorm(d, eps=LAYER_NORM_EPS, device=device)
        self.feed_forward2 = ConformerFeedForward(config, device)
        self.norm_out = nn.LayerNorm(d, eps=LAYER_NORM_EPS, device=device)

    def forward(self, x: torch.Tensor, pos_emb: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = torch.add(x, self.feed_forward1(self.norm_feed_forward1(x)), alpha=0.5)
        x = x + self.self_attn(self.norm_self_att(x), pos_emb, pad)
        x = x + self.conv(self.norm_conv(x), pad)
        x = torch.add(x, self.feed_forward2(self.norm_feed_forward2(x)), alpha=0.5)
        out: torch.Tensor = self.norm_out(x)
        return out


class ConformerEncoder(nn.Module):
    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.config = config
        self.pre_encode = ConvSubsampling(config, device)
        self.pos_enc = RelPositionalEncoding(config.d_model, math.sqrt(config.d_model) if config.xscaling else None)
        self.layers = nn.ModuleList([ConformerLayer(config, device) for _ in range(config.n_layers)])
        self._compiled_layers: Optional[Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = None
        self._compiled_pre_encode: Optional[Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]] = None

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """feats [B, n_mels, T] (NeMo layout), lengths [B] -> ([B, T_enc, d_model], lengths [B])."""
        pre_encode = self._compiled_pre_encode or self.pre_encode
        x, lengths = pre_encode(feats.transpose(1, 2), lengths)
        x, pos_emb = self.pos_enc(x)
        pad = time_mask(lengths, x.shape[1])
        layers_fn = self._compiled_layers or self._run_layers
        return layers_fn(x, pos_emb, pad), lengths

    def _run_layers(self, x: torch.Tensor, pos_emb: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, pos_emb, pad)
        return x

    def compile_layers(self) -> None:
        """Run the subsampling stack and the conformer layers through ``torch.compile`` (torch >= 2.0 with
        a working Triton).

        Under bf16 autocast the layers spend about half their GPU time in memory-bound work (casts
        around LayerNorm, residual adds, activations, masks); compiled, it fuses into the neighbouring
        kernels. The subsampling's activations are the largest of the model ([B, 256, T/2, 64] after its
        first convolution: 2.4 GB for 32 x 45 s in bf16); eager, its bias adds, ReLUs and padding masks
        each read and write them once more (about 12 ms of a 122 ms batch of 32 on an H200), compiled
        they fuse into one pass after each convolution (the convolutions stay cuDNN's and PyTorch's:
        written as strided products for Inductor, the subsampling and the depthwise convolutions came
        out slower). The position table stays eager. Compilation happens on the first call of each new
        shape (the first batch size, then once more with dynamic sizes), so run every shape before
        capturing CUDA graphs, as the runner's prepare() does.
        """
        compile_fn = getattr(torch, "compile", None)
        if compile_fn is None:
            raise RuntimeError(f"Expected torch >= 2.0 for compiled encoder layers: got torch {torch.__version__}")
        # The bound method, not the module: a compiled module assigned here would join the state dict.
        self._compiled_pre_encode = compile_fn(self.pre_encode.forward)
        self._compiled_layers = compile_fn(self._run_layers)

    def fuse_qkv_(self) -> None:
        for layer in self.layers:
            layer.self_attn.fuse_qkv_()  # type: ignore[union-attr]

    def set_attention_impl(self, impl: str) -> None:
        """``sdpa`` (needs torch >= 2.0) or ``manual``."""
        if impl not in ATTENTION_IMPLS:
            raise ValueError(f"Expected an attention implementation of {ATTENTION_IMPLS}: got {impl!r}")
        if impl == "sdpa" and not HAS_SDPA:
            raise ValueError(f"Attention {impl} is not available in torch {torch.__version__}")
        for layer in self.layers:
            layer.self_attn.impl = impl  # type: ignore[union-attr]

    def set_kernels(self, kind: str) -> None:
        """``torch``: PyTorch's operators (and Inductor's kernels under compile_layers). ``triton``: the
        project's Triton kernels (kernels.py) for the position bias of ``sdpa`` attention and for the
        convolution module's GLU, padding, depthwise convolution, BatchNorm (eval) and SiLU. Needs
        Triton and torch >= 2.4 here, and a CUDA device to run; the math is the same, the rounding
        differs (the kernels keep float32 between the steps).
        """
        if kind not in KERNEL_KINDS:
            raise ValueError(f"Expected kernels to be one of {KERNEL_KINDS}: got {kind!r}")
        if kind == "triton" and not KERNELS_AVAILABLE:
            raise ValueError(f"kernels triton is not available: {KERNELS_UNAVAILABLE_REASON}")
        if kind == "triton" and self.config.conv_kernel_size != CONV_KERNEL_SIZE:
            raise ValueError(
                f"kernels triton needs a convolution kernel size of {CONV_KERNEL_SIZE}: this model's is {self.config.conv_kernel_size}"
            )
        for module in self.layers:
            layer = cast(ConformerLayer, module)
            layer.self_attn.kernels = kind
            layer.conv.kernels = kind

    def set_matmul(self, kind: str) -> None:
        """``bf16``: the large matrix products multiply the parameters as they are. ``fp8``: they run as
        FP8 (e4m3) GEMMs with row-wise scales (fp8.py): both feed-forward modules, the fused q, k, v
        projection, linear_out, the convolution module's pointwise convolutions and the subsampling's
        output projection. The position projection (small), the decoder and the joint stay as they are.

        The FP8 weights are plain attributes, not parameters or buffers, quantized from the current
        weights: the state dict keeps NeMo's names and values, and the device holds half a byte more per
        quantized parameter. Call this once the model has its final device and dtype and after
        fuse_qkv_, and again after loading other weights; moving or casting the model drops them (back
        to bf16). Needs torch >= 2.5 and bf16 weights (row-wise scaled products write bf16), and a GPU
        of compute capability 8.9 or higher to run. Fast only under compile_layers, where quantizing an
        activation fuses into the kernel that produces it; eager, it is a pass of its own per product.
        """
        if kind not in MATMUL_KINDS:
            raise ValueError(f"Expected a matmul kind of {MATMUL_KINDS}: got {kind!r}")
        owners = self._fp8_owners()
        if kind == "bf16":
            for owner in owners:
                owner.drop_fp8()
            return
        if not FP8_AVAILABLE:
            raise ValueError(f"FP8 matrix products need torch >= 2.5 (row-wise scaled _scaled_mm): got {torch.__version__}")
        dtype = self.pre_encode.out.weight.dtype
        if dtype != torch.bfloat16:
            raise ValueError(f"Expected bf16 weights for FP8 matrix products: got {dtype}")
        try:
            for owner in owners:
                owner.build_fp8_()
        except Exception:
            for owner in owners:
                owner.drop_fp8()
            raise

    def _fp8_owners(self) -> List[_Fp8Owner]:
        owners: List[_Fp8Owner] = [self.pre_encode]
        for module in self.layers:
            layer = cast(ConformerLayer, module)
            owners += [layer.feed_forward1, layer.self_attn, layer.conv, layer.feed_forward2]
        return owners


class _Fp8Owner(Protocol):
    """A module with FP8 copies of its products: built by build_fp8_, dropped by drop_fp8 (and _apply)."""

    def build_fp8_(self) -> None: ...

    def drop_fp8(self) -> None: ...
