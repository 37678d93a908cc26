"""The log-mel front end over a session's audio, one window of frames at a time.

Frame ``i`` of a recording is NeMo's frame ``i`` (NeMo >= 2.5, ``normalize: NA``): pre-emphasis
``y[t] = x[t] - 0.97 x[t-1]`` (``y[0] = x[0]``), samples at or beyond the recording's end set to zero,
an STFT centred on sample ``160 i`` (n_fft 512, a symmetric 400-tap Hann window, zero padding before the
start), power, slaney mel, ``ln(x + 2^-24)``. A recording of N samples has ``N // 160`` frames. Frame
``i`` reads samples ``[160 i - 256, 160 i + 256)`` only, so a frame computed from a window of the audio
equals the frame computed from the whole recording: no per-utterance normalisation, and the pre-emphasis
needs one sample before the window.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch

from ..parakeet.features import FilterbankFeatures

#: The wire's int16 samples are read as int16 / 32768.
PCM16_SCALE = 1.0 / 32768


def frame_reach(n_fft: int) -> int:
    """Samples a frame reads on each side of its centre."""
    return n_fft // 2


def ready_frames(samples: int, hop: int, n_fft: int, is_last: bool) -> int:
    """Frames computable from ``samples`` samples: all ``samples // hop`` at the end of the recording,
    else those whose window ends within the audio received."""
    if is_last:
        return samples // hop
    reach = frame_reach(n_fft)
    return max(0, (samples - reach) // hop + 1) if samples >= reach else 0


def first_needed_sample(frame: int, hop: int, n_fft: int) -> int:
    """The first raw sample that frames from ``frame`` on need (one before the window, for pre-emphasis)."""
    return max(0, frame * hop - frame_reach(n_fft) - 1)


def window_span(first_frame: int, end_frame: int, hop: int, n_fft: int) -> Tuple[int, int]:
    """Samples ``[lo, hi)`` that frames ``[first_frame, end_frame)`` read (``lo`` may be negative)."""
    reach = frame_reach(n_fft)
    return first_frame * hop - reach, (end_frame - 1) * hop + reach


def window_samples(
    out: npt.NDArray[np.int16],
    pending: npt.NDArray[np.int16],
    pending_start: int,
    total_samples: int,
    first_frame: int,
    end_frame: int,
    hop: int,
    n_fft: int,
) -> int:
    """Write into ``out`` the raw samples that frames ``[first_frame, end_frame)`` read, preceded by the one
    sample before them (for pre-emphasis): ``out[j]`` is sample ``lo - 1 + j``, zero outside the recording.
    Returns how many of the window's samples (after the leading one) lie within the recording.

    ``pending`` holds the raw samples from ``pending_start`` to ``total_samples``; it must start at or
    before :func:`first_needed_sample` of ``first_frame``.
    """
    lo, hi = window_span(first_frame, end_frame, hop, n_fft)
    width = hi - lo + 1
    out[:width] = 0
    src_lo = max(lo - 1, 0)
    src_hi = min(hi, total_samples)
    if src_hi > src_lo:
        if src_lo < pending_start:
            raise ValueError(f"Expected audio from sample {src_lo}: it starts at {pending_start}")
        out[src_lo - (lo - 1) : src_hi - (lo - 1)] = pending[src_lo - pending_start : src_hi - pending_start]
    return max(0, min(hi, total_samples) - lo)


def log_mel(featurizer: FilterbankFeatures, samples: torch.Tensor, valid: Sequence[int], frames: Sequence[int],
            device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """Frames of several windows at once: ([B, max frames, n_mels] float32 on ``device``, frames [B]).

    ``samples`` [B, >= width + 1] int16 (host or device): each row a :func:`window_samples`; ``valid``: its
    return value per row. Pre-emphasis, the STFT and the filterbank run on ``device`` in float32; rows
    beyond an item's frame count are zero.
    """
    n_fft = featurizer.n_fft
    hop = featurizer.hop_length
    longest = max(frames) if frames else 0
    width = max(0, (longest - 1) * hop + n_fft)
    x = samples[:, : width + 1].to(device, non_blocking=True).float().mul_(PCM16_SCALE)
    y = x[:, 1:] - featurizer.preemph * x[:, :-1]
    limits = torch.tensor(list(valid), dtype=torch.int64).to(device, non_blocking=True)
    y = y.masked_fill(torch.arange(width, device=device).unsqueeze(0) >= limits.unsqueeze(1), 0.0)
    spec = torch.stft(
        y,
        n_fft=n_fft,
        hop_length=hop,
        win_length=featurizer.win_length,
        window=featurizer.window.float(),
        center=False,
        return_complex=True,
    )
    magnitude = torch.view_as_real(spec).pow(2).sum(-1).sqrt()
    mel = torch.matmul(featurizer.fb.float(), magnitude.pow(2.0))
    feats = torch.log(mel + featurizer.log_zero_guard)[:, :, :longest]
    counts = torch.tensor(list(frames), dtype=torch.int64).to(device, non_blocking=True)
    valid_frames = torch.arange(feats.shape[2], device=device).unsqueeze(0) < counts.unsqueeze(1)
    feats = feats.masked_fill(~valid_frames.unsqueeze(1), 0.0)
    return feats.transpose(1, 2).contiguous(), counts


def window_mel(featurizer: FilterbankFeatures, pending: npt.NDArray[np.int16], pending_start: int,
               total_samples: int, first_frame: int, end_frame: int) -> torch.Tensor:
    """Frames ``[first_frame, end_frame)`` from the audio held, [frames, n_mels] on the CPU."""
    lo, hi = window_span(first_frame, end_frame, featurizer.hop_length, featurizer.n_fft)
    out = np.zeros(hi - lo + 1, dtype=np.int16)
    valid = window_samples(out, pending, pending_start, total_samples, first_frame, end_frame,
                           featurizer.hop_length, featurizer.n_fft)
    feats, _ = log_mel(featurizer, torch.from_numpy(out).unsqueeze(0), [valid], [end_frame - first_frame],
                       torch.device("cpu"))
    return feats[0]


def whole_recording_mel(featurizer: FilterbankFeatures, audio: npt.NDArray[np.int16]) -> torch.Tensor:
    """Every frame of a recording at once [frames, n_mels] (tests: the windows must agree with it)."""
    return window_mel(featurizer, audio, 0, audio.shape[0], 0, audio.shape[0] // featurizer.hop_length)


__all__: List[str] = [
    "PCM16_SCALE", "first_needed_sample", "frame_reach", "log_mel", "ready_frames", "whole_recording_mel",
    "window_mel", "window_samples", "window_span",
]
