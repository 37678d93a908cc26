"""``enc_p``: phoneme embeddings, a transformer encoder with relative-position self-attention (window 4, one
relative embedding shared by the heads) and the projection to the prior's mean and log-scale (Piper
``models.TextEncoder``, ``attentions.Encoder``). Inference only: no dropout."""
from __future__ import annotations

import math
from typing import Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .config import VitsConfig
from .layer_norm import LayerNorm


class MultiHeadAttention(nn.Module):
    def __init__(self, channels: int, n_heads: int, window_size: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.k_channels = channels // n_heads
        self.window_size = window_size
        self.conv_q = nn.Conv1d(channels, channels, 1)
        self.conv_k = nn.Conv1d(channels, channels, 1)
        self.conv_v = nn.Conv1d(channels, channels, 1)
        self.conv_o = nn.Conv1d(channels, channels, 1)
        rel_stddev = self.k_channels ** -0.5
        self.emb_rel_k = nn.Parameter(torch.randn(1, window_size * 2 + 1, self.k_channels) * rel_stddev)
        self.emb_rel_v = nn.Parameter(torch.randn(1, window_size * 2 + 1, self.k_channels) * rel_stddev)
        nn.init.xavier_uniform_(self.conv_q.weight)
        nn.init.xavier_uniform_(self.conv_k.weight)
        nn.init.xavier_uniform_(self.conv_v.weight)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor) -> torch.Tensor:
        q = self.conv_q(x)
        k = self.conv_k(x)
        v = self.conv_v(x)
        b, d, t = k.shape
        query = q.view(b, self.n_heads, self.k_channels, t).transpose(2, 3)
        key = k.view(b, self.n_heads, self.k_channels, t).transpose(2, 3)
        value = v.view(b, self.n_heads, self.k_channels, t).transpose(2, 3)
        query = query / math.sqrt(self.k_channels)
        scores = torch.matmul(query, key.transpose(-2, -1))
        rel_keys = self._relative_embeddings(self.emb_rel_k, t)
        rel_logits = torch.matmul(query, rel_keys.unsqueeze(0).transpose(-2, -1))
        scores = scores + _relative_to_absolute(rel_logits)
        scores = scores.masked_fill(attn_mask == 0, -1e4)
        p_attn = F.softmax(scores, dim=-1)
        output = torch.matmul(p_attn, value)
        rel_values = self._relative_embeddings(self.emb_rel_v, t)
        output = output + torch.matmul(_absolute_to_relative(p_attn), rel_values.unsqueeze(0))
        output = output.transpose(2, 3).contiguous().view(b, d, t)
        result: torch.Tensor = self.conv_o(output)
        return result

    def _relative_embeddings(self, embeddings: torch.Tensor, length: int) -> torch.Tensor:
        pad_length = max(length - (self.window_size + 1), 0)
        start = max((self.window_size + 1) - length, 0)
        end = start + 2 * length - 1
        if pad_length > 0:
            embeddings = F.pad(embeddings, (0, 0, pad_length, pad_length, 0, 0))
        return embeddings[:, start:end]


def _relative_to_absolute(x: torch.Tensor) -> torch.Tensor:
    """[b, h, l, 2l-1] -> [b, h, l, l]."""
    batch, heads, length, _ = x.shape
    x = F.pad(x, (0, 1, 0, 0, 0, 0, 0, 0))
    x_flat = x.reshape(batch, heads, length * 2 * length)
    x_flat = F.pad(x_flat, (0, length - 1, 0, 0, 0, 0))
    return x_flat.view(batch, heads, length + 1, 2 * length - 1)[:, :, :length, length - 1:]


def _absolute_to_relative(x: torch.Tensor) -> torch.Tensor:
    """[b, h, l, l] -> [b, h, l, 2l-1]."""
    batch, heads, length, _ = x.shape
    x = F.pad(x, (0, length - 1, 0, 0, 0, 0, 0, 0))
    x_flat = x.reshape(batch, heads, length * length + length * (length - 1))
    x_flat = F.pad(x_flat, (length, 0, 0, 0, 0, 0))
    return x_flat.view(batch, heads, length, 2 * length)[:, :, :, 1:]


class FFN(nn.Module):
    def __init__(self, channels: int, filter_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel_size)
        self.conv_2 = nn.Conv1d(filter_channels, channels, kernel_size)

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor) -> torch.Tensor:
        x = self.conv_1(self._same_padding(x * x_mask))
        x = torch.relu(x)
        x = self.conv_2(self._same_padding(x * x_mask))
        return x * x_mask

    def _same_padding(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel_size == 1:
            return x
        return F.pad(x, ((self.kernel_size - 1) // 2, self.kernel_size // 2, 0, 0, 0, 0))


class Encoder(nn.Module):
    def __init__(self, config: VitsConfig) -> None:
        super().__init__()
        h = config.hidden_channels
        self.attn_layers = nn.ModuleList()
        self.norm_layers_1 = nn.ModuleList()
        self.ffn_layers = nn.ModuleList()
        self.norm_layers_2 = nn.ModuleList()
        for _ in range(config.n_layers):
            self.attn_layers.append(MultiHeadAttention(h, config.n_heads, config.window_size))
            self.norm_layers_1.append(LayerNorm(h))
            self.ffn_layers.append(FFN(h, config.filter_channels, config.kernel_size))
            self.norm_layers_2.append(LayerNorm(h))

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor) -> torch.Tensor:
        attn_mask = x_mask.unsqueeze(2) * x_mask.unsqueeze(-1)
        x = x * x_mask
        for attn, norm_1, ffn, norm_2 in zip(self.attn_layers, self.norm_layers_1, self.ffn_layers,
                                             self.norm_layers_2):
            x = norm_1(x + attn(x, attn_mask))
            x = norm_2(x + ffn(x, x_mask))
        return x * x_mask


class TextEncoder(nn.Module):
    def __init__(self, config: VitsConfig) -> None:
        super().__init__()
        self.hidden_channels = config.hidden_channels
        self.out_channels = config.inter_channels
        self.emb = nn.Embedding(config.n_vocab, config.hidden_channels)
        nn.init.normal_(self.emb.weight, 0.0, config.hidden_channels ** -0.5)
        self.encoder = Encoder(config)
        self.proj = nn.Conv1d(config.hidden_channels, config.inter_channels * 2, 1)

    def forward(self, ids: torch.Tensor, x_mask: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """ids [b, t] and x_mask [b, 1, t] -> hidden x [b, h, t], m_p and logs_p [b, inter, t]."""
        x = self.emb(ids) * math.sqrt(self.hidden_channels)
        x = torch.transpose(x, 1, -1)
        x = self.encoder(x * x_mask, x_mask)
        stats = self.proj(x) * x_mask
        m, logs = torch.split(stats, self.out_channels, dim=1)
        return x, m, logs
