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


def window_signal(
    pending: npt.NDArray[np.int16],
    pending_start: int,
    total_samples: int,
    is_last: bool,
    first_frame: int,
    end_frame: int,
    hop: int,
    n_fft: int,
    preemph: float,
) -> npt.NDArray[np.float32]:
    """The pre-emphasised, zero-padded signal that frames ``[first_frame, end_frame)`` read:
    ``(end_frame - first_frame - 1) * hop + n_fft`` samples starting at sample ``first_frame * hop - n_fft // 2``.

    ``pending`` holds the raw samples from ``pending_start`` to ``total_samples`` (it must start at or
    before :func:`first_needed_sample` of ``first_frame``).
    """
    reach = frame_reach(n_fft)
    lo = first_frame * hop - reach
    hi = (end_frame - 1) * hop + reach
    out = np.zeros(hi - lo, dtype=np.float32)
    src_lo = max(lo, 0)
    src_hi = min(hi, total_samples)
    if src_hi <= src_lo:
        return out
    needed = src_lo - 1 if src_lo > 0 else 0
    if needed < pending_start:
        raise ValueError(f"Expected audio from sample {needed}: it starts at {pending_start}")
    x = pending[src_lo - pending_start : src_hi - pending_start].astype(np.float32) * np.float32(PCM16_SCALE)
    prev = np.float32(pending[src_lo - 1 - pending_start]) * np.float32(PCM16_SCALE) if src_lo > 0 else None
    y = np.empty_like(x)
    y[1:] = x[1:] - np.float32(preemph) * x[:-1]
    y[0] = x[0] if prev is None else x[0] - np.float32(preemph) * prev
    out[src_lo - lo : src_hi - lo] = y
    del is_last  # samples beyond the end are zero either way; frames beyond it are never asked for
    return out


def log_mel(featurizer: FilterbankFeatures, signals: Sequence[npt.NDArray[np.float32]], frames: Sequence[int],
            device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """Frames of several windows at once: ([B, max frames, n_mels] float32 on ``device``, frames [B]).

    Each signal is a :func:`window_signal`; rows beyond an item's frame count are zero.
    """
    n_fft = featurizer.n_fft
    hop = featurizer.hop_length
    longest = max(frames) if frames else 0
    width = max(0, (longest - 1) * hop + n_fft)
    host = np.zeros((len(signals), max(width, n_fft)), dtype=np.float32)
    for i, signal in enumerate(signals):
        host[i, : signal.shape[0]] = signal
    audio = torch.from_numpy(host).to(device)
    spec = torch.stft(
        audio,
        n_fft=n_fft,
        hop_length=hop,
        win_length=featurizer.win_length,
        window=featurizer.window.float(),
        center=False,
        return_complex=True,
    )
    magnitude = torch.view_as_real(spec).pow(2).sum(-1).sqrt()
    mel = torch.matmul(featurizer.fb.float(), magnitude.pow(2.0))
    feats = torch.log(mel + featurizer.log_zero_guard)[:, :, : max(longest, 0)]
    counts = torch.tensor(list(frames), dtype=torch.int64, device=device)
    valid = torch.arange(feats.shape[2], device=device).unsqueeze(0) < counts.unsqueeze(1)
    feats = feats.masked_fill(~valid.unsqueeze(1), 0.0)
    return feats.transpose(1, 2).contiguous(), counts


def whole_recording_mel(featurizer: FilterbankFeatures, audio: npt.NDArray[np.int16]) -> torch.Tensor:
    """Every frame of a recording at once [frames, n_mels] (tests: the windows must agree with it)."""
    frames = audio.shape[0] // featurizer.hop_length
    signal = window_signal(audio, 0, audio.shape[0], True, 0, frames, featurizer.hop_length, featurizer.n_fft,
                           featurizer.preemph)
    feats, _ = log_mel(featurizer, [signal], [frames], torch.device("cpu"))
    return feats[0]


__all__: List[str] = [
    "PCM16_SCALE", "first_needed_sample", "frame_reach", "log_mel", "ready_frames", "whole_recording_mel",
    "window_signal",
]
