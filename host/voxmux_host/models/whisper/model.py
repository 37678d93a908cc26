"""The Whisper network, with OpenAI's parameter names (``encoder.blocks.0.attn.query.weight``...), and a
decoder that runs against a static key-value cache.

:class:`KVCache` holds, per decoder layer, the self-attention keys and values of every batch slot up to
the text context (``[slots, heads, n_text_ctx, head_dim]``) and the cross-attention keys and values of
each slot's audio window (``[slots, heads, n_audio_ctx, head_dim]``), allocated once. A decoder call
writes the keys and values of its tokens at their positions in their slots and attends to each slot's
cache up to the position of the query (a mask, so that shapes never change: what CUDA graphs need).
:meth:`TextDecoder.forward_full` is the plain recompute over whole sequences, without a cache.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from voxmux_host import fp8
from voxmux_host.fp8 import Fp8CapableLinear

from .config import WhisperConfig

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
#: The compiled encoder runs batches of this many windows or more; fewer stay eager. On one H200
#: (large-v3-turbo, bf16) the compiled blocks took 14.5 ms for 1 window against 9.2 eager, 14.4 against
#: 13.6 for 2, and 20.2 against 25.3 for 4 (bench/results/whisper-h200-2026-12-05).
COMPILED_MIN_WINDOWS = 4


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> torch.Tensor:
    """The encoder's fixed positions (OpenAI's ``sinusoids``)."""
    log_timescale_increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2, dtype=torch.float32))
    scaled_time = torch.arange(length, dtype=torch.float32)[:, None] * inv_timescales[None, :]
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """Scaled dot-product attention; q [B, H, T, D], k and v [B, H, S, D], mask bool (True: attend),
    broadcastable to [B, H, T, S]. Softmax in float32."""
    if HAS_SDPA and q.dtype != torch.float64:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # type: ignore[attr-defined,no-any-return]
    scores = torch.matmul(q, k.transpose(-1, -2))
    if scores.dtype not in (torch.float32, torch.float64):
        scores = scores.float()
    scores = scores * (q.shape[-1] ** -0.5)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).to(q.dtype)
    return weights @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.query = Fp8CapableLinear(n_state, n_state)
        self.key = Fp8CapableLinear(n_state, n_state, bias=False)
        self.value = Fp8CapableLinear(n_state, n_state)
        self.out = Fp8CapableLinear(n_state, n_state)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, D] -> [B, H, T, D / H]."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_head, -1).transpose(1, 2)

    def merge(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, length, _ = x.shape
        return self.out(x.transpose(1, 2).reshape(batch, length, -1))  # type: ignore[no-any-return]

    def forward(self, x: torch.Tensor, xa: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        if xa is None and self.query.fp8 is not None and self.key.fp8 is not None and self.value.fp8 is not None:
            # FP8 products (the encoder's): the three read the same input, quantized once.
            q, k, v = fp8.fp8_products(x, (self.query.fp8, self.key.fp8, self.value.fp8))
            return self.merge(attend(self.heads(q), self.heads(k), self.heads(v), mask))
        source = x if xa is None else xa
        q, k, v = self.heads(self.query(x)), self.heads(self.key(source)), self.heads(self.value(source))
        return self.merge(attend(q, k, v, mask))


class ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state: int, n_head: int, cross_attention: bool = False) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(n_state, n_head)
        self.attn_ln = nn.LayerNorm(n_state)
        self.cross_attn = MultiHeadAttention(n_state, n_head) if cross_attention else None
        self.cross_attn_ln = nn.LayerNorm(n_state) if cross_attention else None
        self.mlp = nn.Sequential(Fp8CapableLinear(n_state, 4 * n_state), nn.GELU(), Fp8CapableLinear(4 * n_state, n_state))
        self.mlp_ln = nn.LayerNorm(n_state)

    def forward(self, x: torch.Tensor, xa: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = x + self.attn(self.attn_ln(x), mask=mask)
        if self.cross_attn is not None and self.cross_attn_ln is not None:
            x = x + self.cross_attn(self.cross_attn_ln(x), xa)
        return x + self.mlp(self.mlp_ln(x))  # type: ignore[no-any-return]


class AudioEncoder(nn.Module):
    def __init__(self, config: WhisperConfig) -> None:
        super().__init__()
        d = config.n_audio_state
        self.conv1 = nn.Conv1d(config.n_mels, d, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(config.n_audio_ctx, d))
        self.blocks = nn.ModuleList([ResidualAttentionBlock(d, config.n_audio_head) for _ in range(config.n_audio_layer)])
        self.ln_post = nn.LayerNorm(d)
        self.is_compiled = False

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """mel [B, n_mels, 3000] -> [B, 1500, D]."""
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        x = (x + self.positional_embedding).to(x.dtype)
        use_compiled = self.is_compiled and mel.shape[0] >= COMPILED_MIN_WINDOWS
        for block in self.blocks:
            # A compiled module's call runs its compiled code; its forward() is the eager code.
            x = block(x) if use_compiled else block.forward(x)
        return self.ln_post(x)  # type: ignore[no-any-return]

    def compile_(self) -> None:
        """Run each of the encoder's blocks through ``torch.compile`` (torch >= 2.2 with a working Triton), with
        the batch size dynamic: a block's LayerNorms, GELU and residual adds fuse into few kernels around its
        products (eager, each reads and writes the [B, 1500, D] activations once more). The blocks are
        compiled one by one, not the encoder whole: they are the same code on weights of the same shapes,
        so the first block's compilation serves all of them (torch inlines the modules, its guards do not
        name them), where with the whole 32-block encoder compiled as one, large-v3-turbo's warmup did not
        finish in two minutes on one H200. Batches of fewer than COMPILED_MIN_WINDOWS windows stay eager
        (faster there), so one compilation, at the first call of COMPILED_MIN_WINDOWS or more, serves every
        size: make it at warmup. Compiling again (after build_fp8_) compiles the new products."""
        if not hasattr(nn.Module, "compile"):
            raise RuntimeError(f"Expected torch >= 2.2 for a compiled encoder: got torch {torch.__version__}")
        for block in self.blocks:
            # In place: the module stays itself, and its state dict does not change.
            block.compile(dynamic=True)
        self.is_compiled = True

    def linears(self) -> List[Fp8CapableLinear]:
        """The encoder's products: each block's query, key, value, output and two MLP layers."""
        found: List[Fp8CapableLinear] = []
        for block in self.blocks:
            attn = block.attn  # type: ignore[union-attr]
            found += [attn.query, attn.key, attn.value, attn.out, block.mlp[0], block.mlp[2]]  # type: ignore[index,list-item]
        return found

    def build_fp8_(self) -> None:
        """The encoder's products as FP8 (e4m3) products with row-wise scales (voxmux_host/fp8.py); needs the
        weights in their place and type (build again after moving them)."""
        for linear in self.linears():
            linear.build_fp8_()

    def drop_fp8(self) -> None:
        for linear in self.linears():
            linear.drop_fp8()


@dataclass
class KVCache:
    """Static per-slot caches, one tensor per layer (see the module docstring)."""

    self_k: List[torch.Tensor]
    self_v: List[torch.Tensor]
    cross_k: List[torch.Tensor]
    cross_v: List[torch.Tensor]

    @staticmethod
    def allocate(config: WhisperConfig, slots: int, device: torch.device, dtype: torch.dtype) -> "KVCache":
        head_dim = config.n_text_state // config.n_text_head

        def make(length: int) -> List[torch.Tensor]:
            return [torch.zeros(slots, config.n_text_head, length, head_dim, device=device, dtype=dtype)
                    for _ in range(config.n_text_layer)]

        return KVCache(make(config.n_text_ctx), make(config.n_text_ctx), make(config.n_audio_ctx),
                       make(config.n_audio_ctx))

    @property
    def slots(self) -> int:
        return int(self.self_k[0].shape[0])

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.self_k + self.self_v + self.cross_k + self.cross_v)


class TextDecoder(nn.Module):
    def __init__(self, config: WhisperConfig) -> None:
        super().__init__()
        d = config.n_text_state
        self.n_ctx = config.n_text_ctx
        self.token_embedding = nn.Embedding(config.n_vocab, d)
        self.positional_embedding = nn.Parameter(torch.empty(config.n_text_ctx, d))
        self.blocks = nn.ModuleList([ResidualAttentionBlock(d, config.n_text_head, cross_attention=True)
                                     for _ in range(config.n_text_layer)])
        self.ln = nn.LayerNorm(d)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Final norm and the tied output projection, in float32."""
        x = self.ln(x)
        return (x @ self.token_embedding.weight.to(x.dtype).t()).float()

    def forward_full(self, tokens: torch.Tensor, xa: torch.Tensor) -> torch.Tensor:
        """Recompute without a cache: tokens [B, T], audio features [B, 1500, D] -> logits [B, T, V]."""
        length = tokens.shape[1]
        x = (self.token_embedding(tokens) + self.positional_embedding[:length]).to(xa.dtype)
        causal = torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()
        for block in self.blocks:
            x = block(x, xa, mask=causal)
        return self.logits(x)

    def fill_cross(self, cache: KVCache, slots: torch.Tensor, xa: torch.Tensor) -> None:
        """Write the cross-attention keys and values of audio features xa [B, 1500, D] into ``slots`` [B]."""
        for layer, block in enumerate(self.blocks):
            attn = block.cross_attn
            cache.cross_k[layer][slots] = attn.heads(attn.key(xa)).to(cache.cross_k[layer].dtype)
            cache.cross_v[layer][slots] = attn.heads(attn.value(xa)).to(cache.cross_v[layer].dtype)

    def forward_cached(self, cache: KVCache, tokens: torch.Tensor, positions: torch.Tensor,
                       slots: Optional[torch.Tensor] = None, span: Optional[int] = None) -> torch.Tensor:
        """Tokens [B, T] at positions [B, T] of cache slots ``slots`` [B] (None: slots 0..B-1, read as views,
        which is the CUDA-graph path): writes their keys and values, attends to each slot's cache up to each
        query's position and to its audio window; returns the hidden states [B, T, D] (before ``ln``).
        ``span``: the self-attention reads only the cache's first ``span`` positions (every query's
        position must be below it; views only, with ``slots`` None)."""
        batch, _ = tokens.shape
        dtype = cache.self_k[0].dtype
        x = (self.token_embedding(tokens) + self.positional_embedding[positions]).to(dtype)
        rows = torch.arange(batch, device=tokens.device) if slots is None else slots
        if span is not None and slots is not None:
            raise ValueError("Expected span with the cache's first slots (slots None)")
        span = self.n_ctx if span is None else span
        key_positions = torch.arange(span, device=tokens.device)
        mask = (key_positions[None, None, :] <= positions[:, :, None])[:, None]  # [B, 1, T, C]
        for layer, block in enumerate(self.blocks):
            attn = block.attn
            h = block.attn_ln(x)
            q, k, v = attn.heads(attn.query(h)), attn.heads(attn.key(h)), attn.heads(attn.value(h))
            k_cache, v_cache = cache.self_k[layer], cache.self_v[layer]
            k_cache[rows[:, None], :, positions] = k.transpose(1, 2)
            v_cache[rows[:, None], :, positions] = v.transpose(1, 2)
            if slots is None:
                keys, values = k_cache[:batch, :, :span], v_cache[:batch, :, :span]
                cross_k, cross_v = cache.cross_k[layer][:batch], cache.cross_v[layer][:batch]
            else:
                keys, values = k_cache[slots], v_cache[slots]
                cross_k, cross_v = cache.cross_k[layer][slots], cache.cross_v[layer][slots]
            x = x + attn.merge(attend(q, keys, values, mask))
            cross = block.cross_attn
            h = block.cross_attn_ln(x)
            x = x + cross.merge(attend(cross.heads(cross.query(h)), cross_k, cross_v, None))
            x = x + block.mlp(block.mlp_ln(x))
        return x  # type: ignore[no-any-return]


class WhisperModel(nn.Module):
    def __init__(self, config: WhisperConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = AudioEncoder(config)
        self.decoder = TextDecoder(config)

    @property
    def is_multilingual(self) -> bool:
        return self.config.n_vocab >= 51865 or self.config.n_vocab < 50000


def build_model(config: WhisperConfig, seed: int = 0) -> WhisperModel:
    """Seeded random weights with Whisper-like scales: normal(0, 0.02) matrices and embeddings, zero
    biases, unit norms (the sinusoidal positions are fixed)."""
    generator = torch.Generator().manual_seed(seed)
    model = WhisperModel(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.zero_()
            elif "ln" in name.split(".")[-2] or name.split(".")[-2].endswith("_ln"):
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    model.eval()
    return model
