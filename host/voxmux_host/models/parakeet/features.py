"""The log-mel front end, computed on the model's device in fp32.

It reproduces NeMo's ``FilterbankFeatures`` as of NeMo 2.5 (the era this project chose, see config.py):

1. pre-emphasis y[t] = x[t] - 0.97 x[t-1], then samples at or beyond the item's length set to zero;
2. STFT, n_fft 512, hop 160, a symmetric 400-tap Hann window, zero centre padding of n_fft // 2;
3. power spectrum (|X| squared), slaney mel projection, ln(x + 2^-24);
4. per-feature normalisation over the item's valid frames (unbiased std, + 1e-5), then frames at or
   beyond the valid length set to zero.

An item of N samples has N // 160 valid frames; the tensor has 1 + N_padded // 160.
"""
from __future__ import annotations

import math
from typing import Tuple, cast

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from .config import ParakeetConfig

NORMALIZE_STD_EPS = 1e-5


def _hz_to_mel_slaney(freqs_hz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Slaney's mel scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic above."""
    freqs = np.asarray(freqs_hz, dtype=np.float64)
    f_sp = 200.0 / 3.0
    mels = freqs / f_sp
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    above = freqs >= min_log_hz
    mels = np.where(above, min_log_mel + np.log(np.maximum(freqs, min_log_hz) / min_log_hz) / logstep, mels)
    return mels


def _mel_to_hz_slaney(mels: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    mels = np.asarray(mels, dtype=np.float64)
    f_sp = 200.0 / 3.0
    freqs = f_sp * mels
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    above = mels >= min_log_mel
    return np.where(above, min_log_hz * np.exp(logstep * (mels - min_log_mel)), freqs)


def slaney_mel_filterbank(
    sample_rate_hz: int, n_fft: int, n_mels: int, fmin_hz: float = 0.0, fmax_hz: float | None = None
) -> npt.NDArray[np.float32]:
    """Triangular mel filters with slaney area normalisation, shape [n_mels, n_fft // 2 + 1], float32.

    Matches ``librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax, htk=False, norm='slaney')``, including
    its float64 arithmetic and its float32 rounding of the triangles before normalisation.
    """
    fmax = sample_rate_hz / 2.0 if fmax_hz is None else fmax_hz
    fft_freqs = np.arange(n_fft // 2 + 1, dtype=np.float64) * (sample_rate_hz / n_fft)
    mel_points = np.linspace(_hz_to_mel_slaney(np.array(fmin_hz)), _hz_to_mel_slaney(np.array(fmax)), n_mels + 2)
    mel_freqs = _mel_to_hz_slaney(mel_points)
    fdiff = np.diff(mel_freqs)
    ramps = mel_freqs[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper)).astype(np.float32)
    enorm = 2.0 / (mel_freqs[2 : n_mels + 2] - mel_freqs[:n_mels])
    return cast(npt.NDArray[np.float32], (weights.astype(np.float64) * enorm[:, None]).astype(np.float32))


class FilterbankFeatures(nn.Module):
    """State-dict names: ``window`` [win_length] and ``fb`` [1, n_mels, n_fft // 2 + 1] (as in NeMo)."""

    window: torch.Tensor
    fb: torch.Tensor

    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.n_fft = config.n_fft
        self.hop_length = config.hop_length
        self.win_length = config.win_length
        self.preemph = config.preemph
        self.log_zero_guard = config.log_zero_guard
        self._config = config
        window = torch.empty(config.win_length, dtype=torch.float32, device=device)
        fb = torch.empty(1, config.n_mels, config.n_freq_bins, dtype=torch.float32, device=device)
        self.register_buffer("window", window)
        self.register_buffer("fb", fb)
        if window.device.type != "meta":
            self.reset_buffers()

    def reset_buffers(self) -> None:
        """Compute the window and the filterbank (a loaded checkpoint overwrites both)."""
        config = self._config
        with torch.no_grad():
            self.window.copy_(torch.hann_window(config.win_length, periodic=False, dtype=torch.float32))
            bank = slaney_mel_filterbank(config.sample_rate_hz, config.n_fft, config.n_mels)
            self.fb.copy_(torch.from_numpy(bank).unsqueeze(0))

    def valid_frames(self, lengths: torch.Tensor) -> torch.Tensor:
        return torch.div(lengths, self.hop_length, rounding_mode="floor")

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """audio [B, N] float32, lengths [B] int64 -> (features [B, n_mels, 1 + N // hop] fp32, frames [B])."""
        audio = audio.float()
        frames = self.valid_frames(lengths)
        positions = torch.arange(audio.shape[1], device=audio.device)
        sample_pad = positions.unsqueeze(0) >= lengths.unsqueeze(1)
        x = torch.cat((audio[:, :1], audio[:, 1:] - self.preemph * audio[:, :-1]), dim=1)
        x = x.masked_fill(sample_pad, 0.0)
        spec = torch.stft(
            x,
            n_fft=self.n_fft,
            hop_length=self.hop_length,
            win_length=self.win_length,
            window=self.window.float(),
            center=True,
            pad_mode="constant",
            return_complex=True,
        )
        magnitude = torch.view_as_real(spec).pow(2).sum(-1).sqrt()
        power = magnitude.pow(2.0)
        mel = torch.matmul(self.fb.float(), power)
        feats = torch.log(mel + self.log_zero_guard)
        return normalize_per_feature(feats, frames), frames


def normalize_per_feature(feats: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    """Per item and mel bin: (x - mean) / (std + 1e-5) over valid frames; frames beyond set to 0.

    std is the unbiased estimator; NeMo >= 2.5 turns the NaN of a one-frame item into 0, which the
    clamped denominators below give directly (and a zero-frame item yields zeros, not NaNs).
    """
    max_frames = feats.shape[2]
    valid = torch.arange(max_frames, device=feats.device).unsqueeze(0) < frames.unsqueeze(1)
    valid3 = valid.unsqueeze(1)
    count = frames.to(feats.dtype).unsqueeze(1)
    mean = torch.where(valid3, feats, torch.zeros_like(feats)).sum(dim=2) / count.clamp(min=1.0)
    centred = torch.where(valid3, feats - mean.unsqueeze(2), torch.zeros_like(feats))
    var = centred.pow(2).sum(dim=2) / (count - 1.0).clamp(min=1.0)
    std = var.sqrt() + NORMALIZE_STD_EPS
    out = (feats - mean.unsqueeze(2)) / std.unsqueeze(2)
    return out.masked_fill(~valid3, 0.0)
