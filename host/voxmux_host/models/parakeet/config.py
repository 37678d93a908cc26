"""Shapes of the Parakeet-TDT model family, the frame-count formulas and the parameter count.

Everything here is plain arithmetic on a :class:`ParakeetConfig`; nothing allocates tensors, so the
0.6 B configuration can be inspected and counted in microseconds.

The front end follows NeMo from 2.5 on: zero centre padding in the STFT, ``N // hop`` valid feature
frames for ``N`` samples, pre-emphasis and subsampling masked to each item's length. With that choice an
item's result never depends on how much padding its batch added.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, Tuple

#: The parameter count of the full configuration, derived from the module shapes (fact sheet section 5).
FULL_PARAMETER_COUNT = 617_825_926


@dataclass(frozen=True)
class ParakeetConfig:
    """The hyper-parameters that decide every tensor shape of the model."""

    # front end (NeMo AudioToMelSpectrogramPreprocessor / FilterbankFeatures)
    sample_rate_hz: int = 16000
    n_mels: int = 128
    n_fft: int = 512
    win_length: int = 400  # 25 ms
    hop_length: int = 160  # 10 ms
    preemph: float = 0.97
    log_zero_guard: float = 2.0**-24
    # encoder (NeMo ConformerEncoder, FastConformer)
    d_model: int = 1024
    n_layers: int = 24
    n_heads: int = 8
    ff_expansion: int = 4
    subsampling_factor: int = 8
    subsampling_channels: int = 256
    conv_kernel_size: int = 9
    use_bias: bool = False
    xscaling: bool = False
    # decoder and joint (NeMo RNNTDecoder / RNNTJoint, TDT)
    vocab_size: int = 1024
    pred_hidden: int = 640
    pred_layers: int = 2
    joint_hidden: int = 640
    durations: Tuple[int, ...] = (0, 1, 2, 3, 4)
    max_symbols: int = 10
    #: NeMo puts a Dropout between the joint's ReLU and output Linear when ``jointnet.dropout`` is non-zero,
    #: which moves the output layer's state-dict index from ``joint_net.1`` to ``joint_net.2``.
    joint_dropout_layer: bool = True

    def __post_init__(self) -> None:
        problems = []
        if self.d_model % self.n_heads != 0:
            problems.append(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if self.subsampling_factor not in (2, 4, 8, 16):
            problems.append(f"subsampling_factor must be 2, 4, 8 or 16: got {self.subsampling_factor}")
        if self.conv_kernel_size % 2 != 1:
            problems.append(f"conv_kernel_size must be odd: got {self.conv_kernel_size}")
        if not self.durations or list(self.durations) != sorted(set(self.durations)) or self.durations[0] < 0:
            problems.append(f"durations must be non-negative, increasing and unique: got {self.durations}")
        if self.max_symbols < 1:
            problems.append(f"max_symbols must be at least 1: got {self.max_symbols}")
        if problems:
            raise ValueError("Invalid Parakeet configuration: " + "; ".join(problems))

    @property
    def d_ff(self) -> int:
        return self.d_model * self.ff_expansion

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def n_freq_bins(self) -> int:
        return self.n_fft // 2 + 1

    @property
    def subsampling_stages(self) -> int:
        return self.subsampling_factor.bit_length() - 1

    @property
    def subsampled_mels(self) -> int:
        """The frequency width after the stride-2 stages (128 -> 64 -> 32 -> 16)."""
        width = self.n_mels
        for _ in range(self.subsampling_stages):
            width = conv_out_length(width)
        return width

    @property
    def blank_id(self) -> int:
        return self.vocab_size

    @property
    def joint_output_size(self) -> int:
        return self.vocab_size + 1 + len(self.durations)

    @property
    def frame_seconds(self) -> float:
        """Seconds per encoder frame (80 ms for the full model)."""
        return self.subsampling_factor * self.hop_length / self.sample_rate_hz

    def replace(self, **changes: object) -> "ParakeetConfig":
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


FULL = ParakeetConfig()

#: Same code paths as FULL at a size that runs in milliseconds on a CPU (CI).
TINY = ParakeetConfig(
    d_model=64,
    n_layers=2,
    n_heads=2,
    subsampling_channels=16,
    vocab_size=32,
    pred_hidden=32,
    joint_hidden=32,
)

PRESETS: Dict[str, ParakeetConfig] = {"full": FULL, "tiny": TINY}


def conv_out_length(length: int) -> int:
    """One stride-2, kernel-3, padding-1 stage: floor((L + 2 - 3) / 2) + 1, i.e. ceil(L / 2); 0 stays 0."""
    return (length - 1) // 2 + 1 if length > 0 else 0


def feature_frames(samples: int, config: ParakeetConfig = FULL) -> int:
    """Valid feature frames for ``samples`` samples (NeMo >= 2.5: ``(N + 2 * (n_fft // 2) - n_fft) // hop``)."""
    return samples // config.hop_length


def feature_tensor_frames(samples: int, config: ParakeetConfig = FULL) -> int:
    """Frames in the STFT tensor of a (padded) signal of ``samples`` samples (centre padding)."""
    return 1 + samples // config.hop_length


def encoder_frames(feature_frames_count: int, config: ParakeetConfig = FULL) -> int:
    """Encoder frames for a number of feature frames: ceil(L / 2) once per subsampling stage."""
    length = feature_frames_count
    for _ in range(config.subsampling_stages):
        length = conv_out_length(length)
    return length


def encoder_frames_for_samples(samples: int, config: ParakeetConfig = FULL) -> int:
    return encoder_frames(feature_frames(samples, config), config)


def count_parameters(config: ParakeetConfig) -> int:
    """The number of trainable parameters, from shapes alone (buffers excluded)."""
    return sum(count_parameters_by_module(config).values())


def count_parameters_by_module(config: ParakeetConfig) -> Dict[str, int]:
    c = config
    ch = c.subsampling_channels
    pre_encode = ch * 9 + ch  # Conv2d(1 -> ch, 3x3)
    pre_encode += (c.subsampling_stages - 1) * ((ch * 9 + ch) + (ch * ch + ch))  # depthwise + pointwise
    pre_encode += ch * c.subsampled_mels * c.d_model + c.d_model  # out Linear

    d, f, h = c.d_model, c.d_ff, c.n_heads
    bias = 1 if c.use_bias else 0
    feed_forward = (d * f + f * bias) + (f * d + d * bias)
    attention = 4 * (d * d + d * bias) + d * d + 2 * h * c.d_head  # q, k, v, out, pos, pos_bias_u/v
    convolution = (2 * d * d + 2 * d * bias) + (d * c.conv_kernel_size + d * bias) + 2 * d + (d * d + d * bias)
    norms = 5 * 2 * d
    layer = 2 * feed_forward + attention + convolution + norms

    p = c.pred_hidden
    decoder = (c.vocab_size + 1) * p + c.pred_layers * (4 * p * p + 4 * p * p + 8 * p)
    j = c.joint_hidden
    joint = (d * j + j) + (p * j + j) + (j * c.joint_output_size + c.joint_output_size)
    return {
        "encoder.pre_encode": pre_encode,
        "encoder.layers": c.n_layers * layer,
        "decoder": decoder,
        "joint": joint,
    }
