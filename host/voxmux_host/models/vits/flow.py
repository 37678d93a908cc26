"""``flow``: the residual coupling block (Piper ``models.ResidualCouplingBlock``, mean-only coupling layers
with WaveNet-style ``WN`` encoders, a ``Flip`` between them), run in reverse at inference: prior sample z_p
-> latent z for the decoder. ``Flip`` is also the duration predictor's channel swap."""
from __future__ import annotations

from typing import List

import torch
from torch import nn

from .config import VitsConfig


class Flip(nn.Module):
    """Reverse the channel order (no parameters; it keeps its index in the module lists, as in Piper)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flip(x, [1])


class WN(nn.Module):
    """Gated dilated convolutions; ``in_layers`` and ``res_skip_layers`` carry weight norm in Piper's
    checkpoints (folded into ``weight`` at load)."""

    def __init__(self, hidden_channels: int, kernel_size: int, n_layers: int) -> None:
        super().__init__()
        self.hidden_channels = hidden_channels
        self.n_layers = n_layers
        self.in_layers = nn.ModuleList()
        self.res_skip_layers = nn.ModuleList()
        for i in range(n_layers):
            self.in_layers.append(nn.Conv1d(hidden_channels, 2 * hidden_channels, kernel_size,
                                            padding=(kernel_size - 1) // 2))
            res_skip_channels = 2 * hidden_channels if i < n_layers - 1 else hidden_channels
            self.res_skip_layers.append(nn.Conv1d(hidden_channels, res_skip_channels, 1))

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor) -> torch.Tensor:
        h = self.hidden_channels
        output = torch.zeros_like(x)
        for i in range(self.n_layers):
            x_in = self.in_layers[i](x)
            acts = torch.tanh(x_in[:, :h]) * torch.sigmoid(x_in[:, h:])
            res_skip = self.res_skip_layers[i](acts)
            if i < self.n_layers - 1:
                x = (x + res_skip[:, :h]) * x_mask
                output = output + res_skip[:, h:]
            else:
                output = output + res_skip
        return output * x_mask


class ResidualCouplingLayer(nn.Module):
    def __init__(self, channels: int, hidden_channels: int, kernel_size: int, n_layers: int) -> None:
        super().__init__()
        self.half_channels = channels // 2
        self.pre = nn.Conv1d(self.half_channels, hidden_channels, 1)
        self.enc = WN(hidden_channels, kernel_size, n_layers)
        self.post = nn.Conv1d(hidden_channels, self.half_channels, 1)

    def reverse(self, x: torch.Tensor, x_mask: torch.Tensor) -> torch.Tensor:
        x0, x1 = torch.split(x, [self.half_channels] * 2, 1)
        h = self.pre(x0) * x_mask
        h = self.enc(h, x_mask)
        m = self.post(h) * x_mask
        x1 = (x1 - m) * x_mask
        return torch.cat([x0, x1], 1)


class ResidualCouplingBlock(nn.Module):
    def __init__(self, config: VitsConfig) -> None:
        super().__init__()
        self.flows = nn.ModuleList()
        for _ in range(config.flow_count):
            self.flows.append(ResidualCouplingLayer(config.inter_channels, config.hidden_channels,
                                                    config.flow_kernel_size, config.flow_wn_layers))
            self.flows.append(Flip())

    def reverse(self, x: torch.Tensor, x_mask: torch.Tensor) -> torch.Tensor:
        flows: List[nn.Module] = list(self.flows)
        for flow in reversed(flows):
            x = flow.reverse(x, x_mask) if isinstance(flow, ResidualCouplingLayer) else flow(x)
        return x
