"""Spectral features: MFCCs on 25 ms frames every 10 ms (numpy only).

The usual speaker-recognition front end (pre-emphasis, Hamming window, 512-point FFT, 40 mel bands
from 20 Hz to 7.6 kHz, log, DCT-II): the cepstrum's lower coefficients follow the vocal tract's
shape, which differs from one speaker to the next, and its statistics over a second or two of speech
are the speaker statistics this engine compares.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

SAMPLE_RATE_HZ = 16000
FRAME_SAMPLES = 400  # 25 ms
HOP_SAMPLES = 160  # 10 ms
FFT_SIZE = 512
MEL_BANDS = 40
LOW_HZ = 20.0
HIGH_HZ = 7600.0
CEPSTRA = 20  # c0..c19
PRE_EMPHASIS = 0.97
#: Frames per second of every time axis below.
FRAME_RATE_HZ = SAMPLE_RATE_HZ // HOP_SAMPLES


def frame_count(samples: int) -> int:
    """Frames of a signal of ``samples``: one per hop whose window starts inside it."""
    return (samples + HOP_SAMPLES - 1) // HOP_SAMPLES


def _mel(hz: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(2595.0 * np.log10(1.0 + hz / 700.0), dtype=np.float64)


@lru_cache(maxsize=1)
def mel_filterbank() -> NDArray[np.float64]:
    """[MEL_BANDS, FFT_SIZE // 2 + 1] triangular filters, equally spaced on the mel scale."""
    edges_mel = np.linspace(_mel(np.array(LOW_HZ)), _mel(np.array(HIGH_HZ)), MEL_BANDS + 2)
    edges_hz = 700.0 * (10.0 ** (edges_mel / 2595.0) - 1.0)
    bins_hz = np.arange(FFT_SIZE // 2 + 1) * SAMPLE_RATE_HZ / FFT_SIZE
    bank = np.zeros((MEL_BANDS, bins_hz.size))
    for band in range(MEL_BANDS):
        low, centre, high = edges_hz[band:band + 3]
        rising = (bins_hz - low) / (centre - low)
        falling = (high - bins_hz) / (high - centre)
        bank[band] = np.maximum(0.0, np.minimum(rising, falling))
    return bank


@lru_cache(maxsize=1)
def dct_matrix() -> NDArray[np.float64]:
    """[CEPSTRA, MEL_BANDS] orthonormal DCT-II."""
    n = np.arange(MEL_BANDS)
    k = np.arange(CEPSTRA)[:, None]
    basis = np.cos(np.pi * k * (2 * n + 1) / (2 * MEL_BANDS)) * np.sqrt(2.0 / MEL_BANDS)
    basis[0] /= np.sqrt(2.0)
    return np.asarray(basis, dtype=np.float64)


def frames_of(audio: NDArray[np.float64]) -> NDArray[np.float64]:
    """[frames, FRAME_SAMPLES] windows, one every HOP_SAMPLES, the last ones zero-padded."""
    count = frame_count(audio.size)
    padded = np.zeros((count - 1) * HOP_SAMPLES + FRAME_SAMPLES)
    padded[:audio.size] = audio
    index = np.arange(FRAME_SAMPLES)[None, :] + HOP_SAMPLES * np.arange(count)[:, None]
    return np.asarray(padded[index], dtype=np.float64)


def pre_emphasized(audio: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(np.append(audio[:1], audio[1:] - PRE_EMPHASIS * audio[:-1]), dtype=np.float64)


def cepstra(emphasized: NDArray[np.float64]) -> NDArray[np.float64]:
    """[frames, CEPSTRA] MFCCs of pre-emphasized audio."""
    if emphasized.size == 0:
        return np.zeros((0, CEPSTRA))
    windows = frames_of(emphasized) * np.hamming(FRAME_SAMPLES)
    power = np.abs(np.fft.rfft(windows, FFT_SIZE)) ** 2
    log_mel = np.log(power @ mel_filterbank().T + 1e-10)
    return np.asarray(log_mel @ dct_matrix().T)


def mfcc(audio: NDArray[np.float64]) -> NDArray[np.float64]:
    """[frames, CEPSTRA] MFCCs of 16 kHz ``audio`` (floats, full scale 1.0), one row per 10 ms."""
    return cepstra(pre_emphasized(audio))


#: Frames windowed at a time by log_energy (60 s), to bound the memory of a long file.
ENERGY_BLOCK_FRAMES = 6000


def log_energy(audio: NDArray[np.float64]) -> NDArray[np.float64]:
    """[frames] energy of each 25 ms frame in dB (full scale 0 dB)."""
    count = frame_count(audio.size)
    energy = np.zeros(count)
    for first in range(0, count, ENERGY_BLOCK_FRAMES):
        last = min(count, first + ENERGY_BLOCK_FRAMES)
        block = audio[first * HOP_SAMPLES:(last - 1) * HOP_SAMPLES + FRAME_SAMPLES]
        energy[first:last] = np.mean(frames_of(block)[:last - first] ** 2, axis=1)
    return np.asarray(10.0 * np.log10(energy + 1e-12), dtype=np.float64)
