"""The module tree of ``SortformerEncLabelModel`` with NeMo's names: ``preprocessor.featurizer``,
``encoder`` (FastConformer, shared with the Parakeet implementation), ``sortformer_modules``
(``encoder_proj``, the head, and the unused ``hidden_to_spks``) and ``transformer_encoder``.

:meth:`SortformerModel.forward_step` is one streaming step for a batch of sessions, each with its own
lengths: the chunk's features go through the subsampling stack (``pre_encode``), the chunk embeddings are
packed after each session's context (speaker cache then FIFO, already packed by the caller), and the
packed sequence runs through the encoder layers (xscale and relative positions applied after the
packing, as NeMo's ``bypass_pre_encode`` does), the projection, the Transformer and the head. Frames
beyond an item's length are masked everywhere and their outputs are zero. Every operation is a tensor
operation of fixed shape, so a step can be captured in a CUDA graph.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..parakeet.encoder import HAS_SDPA, ConformerEncoder, time_mask
from ..parakeet.features import FilterbankFeatures
from .config import SortformerConfig

#: NeMo's additive attention mask value for padded keys (``NEG_INF`` in transformer_utils).
NEG_INF = -10000.0
LAYER_NORM_EPS = 1e-5


class AudioToMelSpectrogramPreprocessor(nn.Module):
    """Holds NeMo's ``featurizer.window`` and ``featurizer.fb`` buffers (the mel front end is features.py)."""

    def __init__(self, config: SortformerConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.featurizer = FilterbankFeatures(config.encoder_config(), device)


class MultiHeadAttention(nn.Module):
    """NeMo's ``MultiHeadAttention``: q and k each divided by head_dim ** 0.25, additive key mask."""

    def __init__(self, d_model: int, n_heads: int, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.query_net = nn.Linear(d_model, d_model, device=device)
        self.key_net = nn.Linear(d_model, d_model, device=device)
        self.value_net = nn.Linear(d_model, d_model, device=device)
        self.out_projection = nn.Linear(d_model, d_model, device=device)

    def forward(self, x: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        """x [B, T, d], additive_mask [B, 1, 1, T] (0 or NEG_INF) -> [B, T, d]."""
        b, t, d = x.shape
        h, dh = self.n_heads, self.head_dim
        q = self.query_net(x).view(b, t, h, dh).transpose(1, 2)
        k = self.key_net(x).view(b, t, h, dh).transpose(1, 2)
        v = self.value_net(x).view(b, t, h, dh).transpose(1, 2)
        if HAS_SDPA:
            sdpa = getattr(F, "scaled_dot_product_attention")
            context = sdpa(q, k, v, attn_mask=additive_mask.to(q.dtype))
        else:
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh) + additive_mask.to(q.dtype)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype)
            context = torch.matmul(probs, v)
        out: torch.Tensor = self.out_projection(context.transpose(1, 2).reshape(b, t, d))
        return out


class PositionWiseFF(nn.Module):
    def __init__(self, d_model: int, inner: int, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.dense_in = nn.Linear(d_model, inner, device=device)
        self.dense_out = nn.Linear(inner, d_model, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.dense_out(F.relu(self.dense_in(x)))
        return out


class TransformerEncoderBlock(nn.Module):
    """Post-LN: h = LN1(x + MHA(x)); out = LN2(h + FFN(h))."""

    def __init__(self, config: SortformerConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        d = config.tf_d_model
        self.layer_norm_1 = nn.LayerNorm(d, eps=LAYER_NORM_EPS, device=device)
        self.first_sub_layer = MultiHeadAttention(d, config.tf_heads, device)
        self.layer_norm_2 = nn.LayerNorm(d, eps=LAYER_NORM_EPS, device=device)
        self.second_sub_layer = PositionWiseFF(d, config.tf_inner, device)

    def forward(self, x: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        h = self.layer_norm_1(x + self.first_sub_layer(x, additive_mask))
        out: torch.Tensor = self.layer_norm_2(h + self.second_sub_layer(h))
        return out


class TransformerEncoder(nn.Module):
    def __init__(self, config: SortformerConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList([TransformerEncoderBlock(config, device) for _ in range(config.tf_layers)])

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        additive_mask = pad[:, None, None, :].to(x.dtype) * NEG_INF
        for layer in self.layers:
            x = layer(x, additive_mask)
        return x


class SortformerModules(nn.Module):
    def __init__(self, config: SortformerConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        hidden, n = config.tf_d_model, config.n_speakers
        self.hidden_to_spks = nn.Linear(2 * hidden, n, device=device)  # in NeMo's state dict, unused
        self.first_hidden_to_hidden = nn.Linear(hidden, hidden, device=device)
        self.single_hidden_to_spks = nn.Linear(hidden, n, device=device)
        self.encoder_proj = nn.Linear(config.fc_d_model, hidden, device=device)

    def forward_speaker_sigmoids(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = self.first_hidden_to_hidden(F.relu(hidden))
        logits = self.single_hidden_to_spks(F.relu(hidden))
        return torch.sigmoid(logits.float())


class SortformerModel(nn.Module):
    def __init__(self, config: SortformerConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.config = config
        self.preprocessor = AudioToMelSpectrogramPreprocessor(config, device)
        self.encoder = ConformerEncoder(config.encoder_config(), device)
        self.sortformer_modules = SortformerModules(config, device)
        self.transformer_encoder = TransformerEncoder(config, device)
        self.compute_dtype: Optional[torch.dtype] = None  # None: the parameters' dtype, no autocast
        #: The head (projection, Transformer layers, sigmoids) through ``torch.compile``: compile_head.
        self._compiled_head: Optional[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = None

    @property
    def device(self) -> torch.device:
        return self.sortformer_modules.encoder_proj.weight.device

    def compile_head(self) -> None:
        """Run the step's head (the projection to the Transformer's width, its 18 layers, the speaker
        sigmoids) through ``torch.compile`` (torch >= 2.0 with a working Triton): at width 192 its
        products are small and its LayerNorms, residual adds, ReLUs and masks are as many kernels again,
        which fuse compiled. Compiles on the first call of each new shape, as ConformerEncoder.compile_layers.
        """
        compile_fn = getattr(torch, "compile", None)
        if compile_fn is None:
            raise RuntimeError(f"Expected torch >= 2.0 for a compiled head: got torch {torch.__version__}")
        # The bound method, not the module: a compiled module assigned here would join the state dict.
        self._compiled_head = compile_fn(self._head)

    def _head(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = self.sortformer_modules.encoder_proj(x)
        x = self.transformer_encoder(x, pad)
        preds = self.sortformer_modules.forward_speaker_sigmoids(x)
        return preds.masked_fill(pad.unsqueeze(-1), 0.0)

    def forward_step(
        self,
        feats: torch.Tensor,
        feat_lengths: torch.Tensor,
        context: torch.Tensor,
        context_lengths: torch.Tensor,
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One streaming step.

        feats [B, T_feat, n_mels] (the chunk with its left and right context), feat_lengths [B];
        context [B, L, fc_d_model] (each item's speaker cache then FIFO, packed from position 0),
        context_lengths [B].

        Returns (preds [B, L + T_chunk, n_speakers] float32, zero beyond each item's length; chunk
        embeddings [B, T_chunk, fc_d_model] from ``pre_encode``; their lengths [B]). Row t < L +
        T_chunk of preds belongs to the packed position t: context then chunk.
        """
        pre_encode = self.encoder._compiled_pre_encode or self.encoder.pre_encode
        chunk, chunk_lengths = pre_encode(feats, feat_lengths)
        b, l_ctx, d = context.shape
        t_chunk = chunk.shape[1]
        total = l_ctx + t_chunk
        lengths = context_lengths + chunk_lengths
        # Packed position t reads context[t] below the context length, else chunk[t - context length].
        positions = torch.arange(total, device=chunk.device).unsqueeze(0).expand(b, total)
        in_chunk = positions >= context_lengths.unsqueeze(1)
        index = torch.where(in_chunk, positions - context_lengths.unsqueeze(1) + l_ctx, positions)
        index = index.clamp(max=total - 1)
        both = torch.cat((context.to(chunk.dtype), chunk), dim=1)
        packed = torch.gather(both, 1, index.unsqueeze(-1).expand(b, total, d))
        pad = time_mask(lengths, total)
        packed = packed.masked_fill(pad.unsqueeze(-1), 0.0)
        x, pos_emb = self.encoder.pos_enc(packed)
        layers = self.encoder._compiled_layers or self.encoder._run_layers
        x = layers(x, pos_emb, pad)
        head = self._compiled_head or self._head
        return head(x, pad), chunk, chunk_lengths

    def prepare_for_inference_(self, device: torch.device, dtype: torch.dtype) -> None:
        """Move to ``device``; for a dtype other than fp32, cast the network (not the front end, not
        BatchNorm) and run it under autocast to that dtype."""
        self.eval()
        self.to(device)
        if dtype != torch.float32:
            for part in (self.encoder, self.sortformer_modules, self.transformer_encoder):
                part.to(dtype)
            for module in self.modules():
                if isinstance(module, nn.BatchNorm1d):
                    module.float()
            self.compute_dtype = dtype
        else:
            self.compute_dtype = None
        self.encoder.pos_enc.clear_cache()


def build_model(config: SortformerConfig, seed: Optional[int] = 0) -> SortformerModel:
    """A model on the CPU in fp32: seeded random weights, or uninitialised storage when seed is None
    (for loading a checkpoint into). Built on the meta device first so nothing is initialised twice."""
    from .random_init import init_random_weights_

    model = SortformerModel(config, device="meta")
    model.to_empty(device="cpu")
    model.preprocessor.featurizer.reset_buffers()
    if seed is not None:
        init_random_weights_(model, seed)
    model.eval()
    return model


def count_module_parameters(config: SortformerConfig) -> int:
    """Parameters of the real module tree, built on the meta device (no memory is allocated)."""
    model = SortformerModel(config, device="meta")
    return sum(p.numel() for p in model.parameters())
