"""``SynthesizerTrn`` for inference, split as Piper's streaming export splits it: :meth:`encode` runs the text
encoder, the duration predictor, the expansion of the prior to latent frames and the flow in reverse (one
sentence at a time); :meth:`decode` runs the HiFi-GAN decoder on latent frames (whole or in windows).
Submodules are registered under Piper's names, so ``state_dict()`` keys are a Piper checkpoint's
``model_g.*`` keys without the prefix, the training-only ``enc_q`` and ``dp.post_*``, and with weight norm
folded (``weight`` in place of ``weight_g``/``weight_v``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from .config import VitsConfig
from .duration import StochasticDurationPredictor
from .flow import ResidualCouplingBlock
from .generator import Generator
from .text_encoder import TextEncoder

#: Piper's inference defaults (a voice's .json may override them).
NOISE_SCALE = 0.667
NOISE_W = 0.8


@dataclass(frozen=True)
class Scales:
    noise_scale: float = NOISE_SCALE
    length_scale: float = 1.0
    noise_w: float = NOISE_W


class SynthesizerTrn(nn.Module):
    def __init__(self, config: VitsConfig) -> None:
        super().__init__()
        self.config = config
        self.enc_p = TextEncoder(config)
        self.dec = Generator(config)
        self.flow = ResidualCouplingBlock(config)
        self.dp = StochasticDurationPredictor(config)

    def log_durations(self, ids: torch.Tensor, noise_w: float, generator: torch.Generator
                      ) -> torch.Tensor:
        """One sentence's log-durations [1, 1, t] (also used to calibrate random voices)."""
        x_mask = torch.ones(1, 1, ids.shape[1], device=ids.device)
        x, _, _ = self.enc_p(ids, x_mask)
        return self._log_durations(x, x_mask, noise_w, generator)

    def _log_durations(self, x: torch.Tensor, x_mask: torch.Tensor, noise_w: float,
                       generator: torch.Generator) -> torch.Tensor:
        noise = torch.randn(x.shape[0], 2, x.shape[2], generator=generator).to(x.device) * noise_w
        with _fp32(x.device):
            return self.dp.reverse(x.float(), x_mask.float(), noise.float())

    def encode(self, ids: torch.Tensor, scales: Scales, generator: torch.Generator) -> torch.Tensor:
        """ids [1, t] (one sentence) -> latent frames z [1, inter, frames] for the decoder. The noise comes
        from ``generator`` (a CPU generator: the same seed gives the same noise on any device)."""
        x_mask = torch.ones(1, 1, ids.shape[1], device=ids.device)
        x, m_p, logs_p = self.enc_p(ids, x_mask)
        logw = self._log_durations(x, x_mask, scales.noise_w, generator)
        w_ceil = torch.ceil(torch.exp(logw) * scales.length_scale)[0, 0].long()
        if int(w_ceil.sum()) < 1:
            w_ceil[0] = 1
        m_p = torch.repeat_interleave(m_p, w_ceil, dim=2)
        logs_p = torch.repeat_interleave(logs_p, w_ceil, dim=2)
        noise = torch.randn(m_p.shape, generator=generator).to(device=m_p.device, dtype=m_p.dtype)
        z_p = m_p + noise * torch.exp(logs_p) * scales.noise_scale
        y_mask = torch.ones(1, 1, z_p.shape[2], device=z_p.device, dtype=z_p.dtype)
        return self.flow.reverse(z_p, y_mask)

    def decode(self, z: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """z [b, inter, frames] (mask [b, 1, frames] for rows shorter than frames) -> audio [b, frames * hop]."""
        audio: torch.Tensor = self.dec(z, mask)
        return audio[:, 0]


class _fp32:
    """Autocast off (fp32) inside, on CUDA; nothing on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self._ctx = torch.autocast('cuda', enabled=False) if device.type == 'cuda' else None

    def __enter__(self) -> None:
        if self._ctx is not None:
            self._ctx.__enter__()  # type: ignore[no-untyped-call]

    def __exit__(self, *exc: object) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
