"""Whisper's log-mel front end, computed here: a 400-point periodic Hann STFT with a 160-sample hop (centred,
reflect padding), the power spectrum, the Slaney-normalised mel filterbank of librosa's ``filters.mel``
(80 or 128 bins, 0 to 8 kHz), log10 clamped at 1e-10 and at 8 below the maximum, then (x + 4) / 4.

:func:`mel_filters` is librosa's formula (slaney mel scale, area normalisation) in float64, so the
filterbank does not have to be downloaded.
"""
from __future__ import annotations

import math
from typing import Dict, Tuple

import numpy as np
import numpy.typing as npt
import torch

from .config import HOP_LENGTH, N_FFT, N_SAMPLES, SAMPLE_RATE

_F_SP = 200.0 / 3  # slaney: 66.67 Hz per mel below 1 kHz
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = math.log(6.4) / 27.0


def hz_to_mel(hz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The Slaney mel scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    mel = hz / _F_SP
    log_region = hz >= _MIN_LOG_HZ
    mel = np.where(log_region, _MIN_LOG_MEL + np.log(np.maximum(hz, 1e-12) / _MIN_LOG_HZ) / _LOGSTEP, mel)
    return np.asarray(mel, dtype=np.float64)


def mel_to_hz(mel: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    mel = np.asarray(mel, dtype=np.float64)
    hz = mel * _F_SP
    hz = np.where(mel >= _MIN_LOG_MEL, _MIN_LOG_HZ * np.exp(_LOGSTEP * (mel - _MIN_LOG_MEL)), hz)
    return np.asarray(hz, dtype=np.float64)


def mel_filters(n_mels: int, sample_rate: int = SAMPLE_RATE, n_fft: int = N_FFT) -> npt.NDArray[np.float32]:
    """librosa.filters.mel(sr, n_fft, n_mels) with its defaults (fmin 0, fmax sr/2, slaney scale and norm):
    shape [n_mels, 1 + n_fft // 2]."""
    fft_freqs = np.linspace(0.0, sample_rate / 2.0, 1 + n_fft // 2)
    mel_points = mel_to_hz(np.linspace(hz_to_mel(np.array(0.0)), hz_to_mel(np.array(sample_rate / 2.0)), n_mels + 2))
    fdiff = np.diff(mel_points)
    ramps = mel_points[:, None] - fft_freqs[None, :]
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float64)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0.0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_points[2:n_mels + 2] - mel_points[:n_mels])
    weights *= enorm[:, None]
    return weights.astype(np.float32)


_CACHE: Dict[Tuple[int, str], Tuple[torch.Tensor, torch.Tensor]] = {}


def _constants(n_mels: int, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    key = (n_mels, str(device))
    if key not in _CACHE:
        window = torch.hann_window(N_FFT, device=device)
        filters = torch.from_numpy(mel_filters(n_mels)).to(device)
        _CACHE[key] = (window, filters)
    return _CACHE[key]


def log_mel_spectrogram(audio: torch.Tensor, n_mels: int, padding: int = N_SAMPLES) -> torch.Tensor:
    """Whisper's ``log_mel_spectrogram(audio, n_mels, padding)``: float audio [samples] (in [-1, 1]) followed
    by ``padding`` zero samples; returns [n_mels, (samples + padding) // 160] in float32."""
    audio = audio.to(torch.float32)
    if padding > 0:
        audio = torch.nn.functional.pad(audio, (0, padding))
    window, filters = _constants(n_mels, audio.device)
    stft = torch.stft(audio, N_FFT, HOP_LENGTH, window=window, return_complex=True)
    magnitudes = stft[..., :-1].abs() ** 2
    mel_spec = filters @ magnitudes
    log_spec = torch.clamp(mel_spec, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def pcm_to_float(pcm: npt.NDArray[np.int16]) -> torch.Tensor:
    """16-bit PCM as floats (int16 / 32768)."""
    return torch.from_numpy(pcm.astype(np.float32) / 32768.0)
