"""``dp``: Piper's StochasticDurationPredictor, inference (reverse) path only: phoneme hidden states and
noise -> log-durations in latent frames. The ``post_*`` modules are training-only and not built (their
checkpoint tensors are skipped at load). Runs in fp32: the spline's bin search is sensitive to rounding."""
from __future__ import annotations

import math
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import VitsConfig
from .flow import Flip
from .layer_norm import LayerNorm
from .spline import inverse_spline


class DDSConv(nn.Module):
    """Dilated depth-separable convolutions (dilation kernel_size^i)."""

    def __init__(self, channels: int, kernel_size: int, n_layers: int) -> None:
        super().__init__()
        self.n_layers = n_layers
        self.convs_sep = nn.ModuleList()
        self.convs_1x1 = nn.ModuleList()
        self.norms_1 = nn.ModuleList()
        self.norms_2 = nn.ModuleList()
        for i in range(n_layers):
            dilation = kernel_size ** i
            padding = (kernel_size * dilation - dilation) // 2
            self.convs_sep.append(nn.Conv1d(channels, channels, kernel_size, groups=channels, dilation=dilation,
                                            padding=padding))
            self.convs_1x1.append(nn.Conv1d(channels, channels, 1))
            self.norms_1.append(LayerNorm(channels))
            self.norms_2.append(LayerNorm(channels))

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, g: Optional[torch.Tensor] = None) -> torch.Tensor:
        if g is not None:
            x = x + g
        for i in range(self.n_layers):
            y = self.convs_sep[i](x * x_mask)
            y = F.gelu(self.norms_1[i](y))
            y = self.convs_1x1[i](y)
            y = F.gelu(self.norms_2[i](y))
            x = x + y
        return x * x_mask


class ElementwiseAffine(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.m = nn.Parameter(torch.zeros(channels, 1))
        self.logs = nn.Parameter(torch.zeros(channels, 1))

    def reverse(self, x: torch.Tensor, x_mask: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = (x - self.m) * torch.exp(-self.logs) * x_mask
        return result


class ConvFlow(nn.Module):
    def __init__(self, filter_channels: int, kernel_size: int, n_layers: int, num_bins: int = 10,
                 tail_bound: float = 5.0) -> None:
        super().__init__()
        self.filter_channels = filter_channels
        self.num_bins = num_bins
        self.tail_bound = tail_bound
        self.pre = nn.Conv1d(1, filter_channels, 1)
        self.convs = DDSConv(filter_channels, kernel_size, n_layers)
        self.proj = nn.Conv1d(filter_channels, num_bins * 3 - 1, 1)

    def reverse(self, x: torch.Tensor, x_mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x0, x1 = torch.split(x, [1, 1], 1)
        h = self.pre(x0)
        h = self.convs(h, x_mask, g)
        h = self.proj(h) * x_mask
        b, c, t = x0.shape
        h = h.reshape(b, c, -1, t).permute(0, 1, 3, 2)
        scale = math.sqrt(self.filter_channels)
        widths = h[..., :self.num_bins] / scale
        heights = h[..., self.num_bins:2 * self.num_bins] / scale
        derivatives = h[..., 2 * self.num_bins:]
        x1 = inverse_spline(x1, widths, heights, derivatives, self.tail_bound)
        return torch.cat([x0, x1], 1) * x_mask


class StochasticDurationPredictor(nn.Module):
    def __init__(self, config: VitsConfig) -> None:
        super().__init__()
        channels = config.hidden_channels  # Piper forces filter_channels = in_channels
        self.flows = nn.ModuleList()
        self.flows.append(ElementwiseAffine(2))
        for _ in range(config.dp_flows):
            self.flows.append(ConvFlow(channels, 3, n_layers=3))
            self.flows.append(Flip())
        self.pre = nn.Conv1d(channels, channels, 1)
        self.proj = nn.Conv1d(channels, channels, 1)
        self.convs = DDSConv(channels, 3, n_layers=3)

    def reverse(self, x: torch.Tensor, x_mask: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """x [b, h, t] (the text encoder's hidden states), noise [b, 2, t] already scaled by noise_w ->
        log-durations [b, 1, t]."""
        x = self.pre(x)
        x = self.convs(x, x_mask)
        x = self.proj(x) * x_mask
        flows: List[nn.Module] = list(reversed(list(self.flows)))
        flows = flows[:-2] + [flows[-1]]  # Piper drops the last ConvFlow in reverse ("a useless vflow")
        z = noise
        for flow in flows:
            if isinstance(flow, Flip):
                z = flow(z)
            elif isinstance(flow, ConvFlow):
                z = flow.reverse(z, x_mask, x)
            elif isinstance(flow, ElementwiseAffine):
                z = flow.reverse(z, x_mask)
        return z[:, :1]
