"""``dec``: the HiFi-GAN generator (Piper ``models.Generator`` with ResBlock2, weight norm folded), latent
frames [b, inter, t] -> audio [b, 1, t * hop] in [-1, 1].

With ``mask`` (the valid frames of each row, [b, 1, t]) every convolution's input is zeroed past the
valid length, so each row's valid audio equals that row decoded alone at its exact length: zeroing past
the end is what the convolutions' own zero padding does. This lets windows of different lengths share
one fixed-shape forward (batched windows, CUDA graphs)."""
from __future__ import annotations

from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import VitsConfig

LRELU_SLOPE = 0.1


def _padding(kernel_size: int, dilation: int) -> int:
    return (kernel_size * dilation - dilation) // 2


class ResBlock2(nn.Module):
    def __init__(self, channels: int, kernel_size: int, dilation: tuple[int, ...]) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel_size, 1, dilation=d, padding=_padding(kernel_size, d))
            for d in dilation)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        for conv in self.convs:
            xt = F.leaky_relu(x, LRELU_SLOPE)
            if mask is not None:
                xt = xt * mask
            x = conv(xt) + x
        if mask is not None:
            x = x * mask
        return x


class Generator(nn.Module):
    def __init__(self, config: VitsConfig) -> None:
        super().__init__()
        self.num_kernels = len(config.resblock_kernel_sizes)
        self.upsample_rates = config.upsample_rates
        initial = config.upsample_initial_channel
        self.conv_pre = nn.Conv1d(config.inter_channels, initial, 7, 1, padding=3)
        self.ups = nn.ModuleList()
        for i, (u, k) in enumerate(zip(config.upsample_rates, config.upsample_kernel_sizes)):
            self.ups.append(nn.ConvTranspose1d(initial // (2 ** i), initial // (2 ** (i + 1)), k, u,
                                               padding=(k - u) // 2))
        self.resblocks = nn.ModuleList()
        ch = initial
        for i in range(len(self.ups)):
            ch = initial // (2 ** (i + 1))
            for k, d in zip(config.resblock_kernel_sizes, config.resblock_dilation_sizes):
                self.resblocks.append(ResBlock2(ch, k, d))
        self.conv_post = nn.Conv1d(ch, 1, 7, 1, padding=3, bias=False)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        masks: List[Optional[torch.Tensor]] = [mask]
        if mask is not None:
            for rate in self.upsample_rates:
                prev = masks[-1]
                assert prev is not None
                # expand + reshape rather than repeat_interleave: no host sync, so CUDA graphs can capture it
                b, c, t = prev.shape
                masks.append(prev.unsqueeze(-1).expand(b, c, t, rate).reshape(b, c, t * rate))
            x = x * mask
        x = self.conv_pre(x)
        resblocks = list(self.resblocks)
        for i, up in enumerate(self.ups):
            x = F.leaky_relu(x, LRELU_SLOPE)
            if mask is not None:
                x = x * masks[i]
            x = up(x)
            m = masks[i + 1] if mask is not None else None
            xs = resblocks[i * self.num_kernels](x, m)
            for j in range(1, self.num_kernels):
                xs = xs + resblocks[i * self.num_kernels + j](x, m)
            x = xs / self.num_kernels
        x = F.leaky_relu(x)
        if mask is not None:
            x = x * masks[-1]
        x = self.conv_post(x)
        return torch.tanh(x)
