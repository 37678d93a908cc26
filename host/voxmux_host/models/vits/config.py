"""Shapes of the VITS generator (Piper's ``SynthesizerTrn``, single speaker, stochastic duration predictor)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple


@dataclass(frozen=True)
class VitsConfig:
    name: str
    sample_rate: int
    n_vocab: int
    inter_channels: int
    hidden_channels: int
    filter_channels: int
    n_heads: int
    n_layers: int
    kernel_size: int
    window_size: int
    resblock_kernel_sizes: Tuple[int, ...]
    resblock_dilation_sizes: Tuple[Tuple[int, ...], ...]
    upsample_rates: Tuple[int, ...]
    upsample_initial_channel: int
    upsample_kernel_sizes: Tuple[int, ...]
    #: The duration predictor's channels (Piper forces filter = in = hidden_channels) and flows.
    dp_flows: int = 4
    #: Residual coupling layers of the flow and WN layers in each.
    flow_count: int = 4
    flow_wn_layers: int = 4
    flow_kernel_size: int = 5

    @property
    def hop_samples(self) -> int:
        """Audio samples per latent frame (the product of the upsample rates)."""
        hop = 1
        for rate in self.upsample_rates:
            hop *= rate
        return hop


#: Piper "medium": 22,050 Hz, hidden 192, HiFi-GAN ResBlock2 decoder (about 15.8 M inference parameters).
MEDIUM = VitsConfig(
    name='medium',
    sample_rate=22050,
    n_vocab=256,
    inter_channels=192,
    hidden_channels=192,
    filter_channels=768,
    n_heads=2,
    n_layers=6,
    kernel_size=3,
    window_size=4,
    resblock_kernel_sizes=(3, 5, 7),
    resblock_dilation_sizes=((1, 2), (2, 6), (3, 12)),
    upsample_rates=(8, 8, 4),
    upsample_initial_channel=256,
    upsample_kernel_sizes=(16, 16, 8),
)

#: A small model of the same structure for tests on the CPU (same hop of 256 samples per frame).
TINY = VitsConfig(
    name='tiny',
    sample_rate=22050,
    n_vocab=256,
    inter_channels=16,
    hidden_channels=16,
    filter_channels=32,
    n_heads=2,
    n_layers=2,
    kernel_size=3,
    window_size=4,
    resblock_kernel_sizes=(3, 5),
    resblock_dilation_sizes=((1, 2), (2, 6)),
    upsample_rates=(8, 8, 4),
    upsample_initial_channel=16,
    upsample_kernel_sizes=(16, 16, 8),
    dp_flows=2,
    flow_count=2,
    flow_wn_layers=2,
)

PRESETS: Dict[str, VitsConfig] = {'medium': MEDIUM, 'tiny': TINY}
