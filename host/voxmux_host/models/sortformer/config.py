"""Shapes of the streaming Sortformer 4-speaker model, its streaming (latency) presets and its
post-processing parameters.

Everything here is plain arithmetic; nothing allocates tensors. The full configuration has the shapes
of NVIDIA's ``diar_streaming_sortformer_4spk-v2`` (and v2.1): a 128-bin log-mel front end without
per-utterance normalisation, a FastConformer encoder (8x dw_striding subsampling, d_model 512, 17
layers, biases, xscaling), a projection to 192, 18 post-LN Transformer layers and a 2-layer head with
4 sigmoid outputs per 80 ms frame.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, List

from ..parakeet.config import ParakeetConfig

#: Trainable parameters of the full configuration (990 state-dict tensors, BatchNorm statistics and
#: the two front-end buffers included in the tensors but not in this count).
FULL_PARAMETER_COUNT = 117_693_960


@dataclass(frozen=True)
class SortformerConfig:
    """The hyper-parameters that decide every tensor shape of the model."""

    # front end (NeMo AudioToMelSpectrogramPreprocessor, normalize "NA")
    sample_rate_hz: int = 16000
    n_mels: int = 128
    n_fft: int = 512
    win_length: int = 400
    hop_length: int = 160
    preemph: float = 0.97
    log_zero_guard: float = 2.0**-24
    # FastConformer encoder (NeMo ConformerEncoder)
    fc_d_model: int = 512
    fc_layers: int = 17
    fc_heads: int = 8
    ff_expansion: int = 4
    subsampling_factor: int = 8
    subsampling_channels: int = 256
    conv_kernel_size: int = 9
    # Transformer encoder (NeMo TransformerEncoder, post-LN)
    tf_d_model: int = 192
    tf_layers: int = 18
    tf_heads: int = 8
    tf_inner: int = 768
    # output
    n_speakers: int = 4

    def __post_init__(self) -> None:
        problems = []
        if self.fc_d_model % self.fc_heads != 0:
            problems.append(f"fc_d_model {self.fc_d_model} is not a multiple of fc_heads {self.fc_heads}")
        if self.tf_d_model % self.tf_heads != 0:
            problems.append(f"tf_d_model {self.tf_d_model} is not a multiple of tf_heads {self.tf_heads}")
        if self.subsampling_factor != 8:
            problems.append(f"subsampling_factor must be 8: got {self.subsampling_factor}")
        if self.n_speakers < 1:
            problems.append(f"n_speakers must be at least 1: got {self.n_speakers}")
        if problems:
            raise ValueError("Invalid Sortformer configuration: " + "; ".join(problems))

    @property
    def frame_seconds(self) -> float:
        """Seconds per diarization frame (80 ms)."""
        return self.subsampling_factor * self.hop_length / self.sample_rate_hz

    @property
    def samples_per_frame(self) -> int:
        return self.subsampling_factor * self.hop_length

    def encoder_config(self) -> ParakeetConfig:
        """The FastConformer's shapes in the form the shared encoder modules take (the decoder fields of
        ParakeetConfig are unused)."""
        return ParakeetConfig(
            sample_rate_hz=self.sample_rate_hz,
            n_mels=self.n_mels,
            n_fft=self.n_fft,
            win_length=self.win_length,
            hop_length=self.hop_length,
            preemph=self.preemph,
            log_zero_guard=self.log_zero_guard,
            d_model=self.fc_d_model,
            n_layers=self.fc_layers,
            n_heads=self.fc_heads,
            ff_expansion=self.ff_expansion,
            subsampling_factor=self.subsampling_factor,
            subsampling_channels=self.subsampling_channels,
            conv_kernel_size=self.conv_kernel_size,
            use_bias=True,
            xscaling=True,
        )

    def replace(self, **changes: object) -> "SortformerConfig":
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


FULL = SortformerConfig()

#: Same code paths as FULL at a size that runs in milliseconds on a CPU (CI).
TINY = SortformerConfig(
    fc_d_model=32,
    fc_layers=2,
    fc_heads=2,
    subsampling_channels=8,
    tf_d_model=16,
    tf_layers=2,
    tf_heads=2,
    tf_inner=32,
)

CONFIGS: Dict[str, SortformerConfig] = {"full": FULL, "tiny": TINY}


@dataclass(frozen=True)
class StreamingParams:
    """The streaming step's lengths, all in 80 ms diarization frames (NeMo ``sortformer_modules``)."""

    chunk_len: int
    left_context: int
    right_context: int
    fifo_len: int
    spkcache_len: int
    update_period: int
    sil_frames_per_spk: int = 3
    pred_score_threshold: float = 0.25
    scores_boost_latest: float = 0.05
    sil_threshold: float = 0.2
    strong_boost_rate: float = 0.75
    weak_boost_rate: float = 1.5
    min_pos_scores_rate: float = 0.5

    def problems(self, n_speakers: int) -> List[str]:
        """What NeMo's ``_check_streaming_parameters`` refuses (empty when valid)."""
        out = []
        for name in ("left_context", "right_context", "fifo_len", "sil_frames_per_spk"):
            if getattr(self, name) < 0:
                out.append(f"{name} must be >= 0: got {getattr(self, name)}")
        for name in ("chunk_len", "update_period"):
            if getattr(self, name) < 1:
                out.append(f"{name} must be >= 1: got {getattr(self, name)}")
        minimum = (1 + self.sil_frames_per_spk) * n_speakers
        if self.spkcache_len < minimum:
            out.append(f"spkcache_len must be >= (1 + sil_frames_per_spk) * speakers = {minimum}: got {self.spkcache_len}")
        return out

    @property
    def latency_frames(self) -> int:
        """Input-buffer latency: chunk plus right context."""
        return self.chunk_len + self.right_context

    @property
    def context_frames(self) -> int:
        """Frames of speaker cache plus FIFO before each chunk (the step's fixed context width)."""
        return self.spkcache_len + self.fifo_len

    @property
    def chunk_window_frames(self) -> int:
        """Diarization frames of one chunk with its contexts."""
        return self.left_context + self.chunk_len + self.right_context

    def replace(self, **changes: object) -> "StreamingParams":
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def cache_settings(self) -> Dict[str, float]:
        """The speaker-cache settings (:data:`CACHE_SETTINGS`): a trained model's, whatever the lengths."""
        return {name: getattr(self, name) for name in CACHE_SETTINGS}


#: The fields of :class:`StreamingParams` that belong to a trained model rather than to a latency
#: setting: how the speaker cache is filled and compressed (NeMo ``sortformer_modules``).
CACHE_SETTINGS = ("sil_frames_per_spk", "pred_score_threshold", "scores_boost_latest", "sil_threshold",
                  "strong_boost_rate", "weak_boost_rate", "min_pos_scores_rate")

#: Latency presets. ``chunk-15s`` fits one step into a 15 s chunk (14.96 s of input buffer), ``high``
#: and ``low`` are the model card's 10.0 s and 1.04 s rows. The card's 30.4 s row is not offered: its
#: session state (30.5 s of pending audio plus the cache) does not fit MAX_STATE_BYTES.
PRESETS: Dict[str, StreamingParams] = {
    "chunk-15s": StreamingParams(chunk_len=186, left_context=1, right_context=1, fifo_len=0, spkcache_len=188,
                                 update_period=186),
    "high": StreamingParams(chunk_len=124, left_context=1, right_context=1, fifo_len=124, spkcache_len=188,
                            update_period=124),
    "low": StreamingParams(chunk_len=6, left_context=1, right_context=7, fifo_len=188, spkcache_len=188,
                           update_period=144),
}


@dataclass(frozen=True)
class PostProcessingParams:
    """NeMo's ``ts_vad_post_processing`` parameters, in seconds (onset/offset are probabilities)."""

    onset: float = 0.5
    offset: float = 0.5
    pad_onset: float = 0.0
    pad_offset: float = 0.0
    min_duration_on: float = 0.0
    min_duration_off: float = 0.0

    def problems(self) -> List[str]:
        out = []
        for name in ("onset", "offset"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                out.append(f"{name} must be within [0, 1]: got {getattr(self, name)}")
        for name in ("pad_onset", "pad_offset", "min_duration_on", "min_duration_off"):
            if getattr(self, name) < 0.0:
                out.append(f"{name} must be >= 0: got {getattr(self, name)}")
        return out


#: NeMo's defaults, and the v2 YAMLs tuned on DIHARD III dev and CALLHOME part 1.
POST_PROCESSING: Dict[str, PostProcessingParams] = {
    "default": PostProcessingParams(),
    "dihard3": PostProcessingParams(onset=0.56, offset=1.0, pad_onset=0.063, pad_offset=0.002,
                                    min_duration_on=0.007, min_duration_off=0.151),
    "callhome": PostProcessingParams(onset=0.641, offset=0.561, pad_onset=0.229, pad_offset=0.079,
                                     min_duration_on=0.511, min_duration_off=0.296),
}
