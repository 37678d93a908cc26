"""Shapes of the Whisper model family and the parameter count.

The names are OpenAI's ``ModelDimensions``; :func:`from_hf_config` reads a Hugging Face ``config.json``.
Plain arithmetic: nothing here allocates tensors.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Mapping

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
CHUNK_SECONDS = 30
N_SAMPLES = SAMPLE_RATE * CHUNK_SECONDS  # 480000 samples in a window
N_FRAMES = N_SAMPLES // HOP_LENGTH  # 3000 mel frames in a window
FRAMES_PER_SECOND = SAMPLE_RATE // HOP_LENGTH  # 100 mel frames a second (OpenAI's audio.FRAMES_PER_SECOND)
#: Mel frames per encoder position (the conv stem's stride) and seconds per timestamp token.
INPUT_STRIDE = 2
TIME_PRECISION = INPUT_STRIDE * HOP_LENGTH / SAMPLE_RATE  # 0.02 s
TOKENS_PER_SECOND = SAMPLE_RATE // (INPUT_STRIDE * HOP_LENGTH)  # 50 encoder positions a second


@dataclass(frozen=True)
class WhisperConfig:
    """OpenAI's ModelDimensions."""

    n_mels: int = 128
    n_audio_ctx: int = 1500
    n_audio_state: int = 1280
    n_audio_head: int = 20
    n_audio_layer: int = 32
    n_vocab: int = 51866
    n_text_ctx: int = 448
    n_text_state: int = 1280
    n_text_head: int = 20
    n_text_layer: int = 32

    def __post_init__(self) -> None:
        problems = []
        if self.n_mels not in (80, 128):
            problems.append(f"n_mels must be 80 or 128: got {self.n_mels}")
        if self.n_audio_state % self.n_audio_head != 0:
            problems.append(f"n_audio_state {self.n_audio_state} is not a multiple of n_audio_head {self.n_audio_head}")
        if self.n_text_state % self.n_text_head != 0:
            problems.append(f"n_text_state {self.n_text_state} is not a multiple of n_text_head {self.n_text_head}")
        if self.n_audio_ctx * INPUT_STRIDE != N_FRAMES:
            problems.append(f"n_audio_ctx must be {N_FRAMES // INPUT_STRIDE} (30 s windows): got {self.n_audio_ctx}")
        if self.n_audio_state != self.n_text_state:
            problems.append(f"n_audio_state {self.n_audio_state} and n_text_state {self.n_text_state} differ")
        if problems:
            raise ValueError("Invalid Whisper config: " + "; ".join(problems))

    def to_dims(self) -> Dict[str, int]:
        return dataclasses.asdict(self)


LARGE_V3 = WhisperConfig()
LARGE_V3_TURBO = dataclasses.replace(LARGE_V3, n_text_layer=4)
#: A model for CI: 30 s windows like the others, thin layers (one encoder layer of two heads: attention over
#: 1500 positions is most of its cost; two decoder layers), and the vocabulary of the
#: generated tiny tokenizer (tokenizer.tiny_tokenizer: 256 bytes + 44 merges + the special tokens).
TINY = WhisperConfig(n_mels=80, n_audio_state=64, n_audio_head=2, n_audio_layer=1, n_vocab=1909, n_text_state=64,
                     n_text_head=4, n_text_layer=2)

PRESETS: Dict[str, WhisperConfig] = {"large-v3": LARGE_V3, "large-v3-turbo": LARGE_V3_TURBO, "tiny": TINY}


def from_dims(dims: Mapping[str, Any]) -> WhisperConfig:
    """A config from OpenAI's ``dims`` dictionary (every field required)."""
    names = [f.name for f in dataclasses.fields(WhisperConfig)]
    missing = [name for name in names if name not in dims]
    if missing:
        raise ValueError(f"Expected dims to have {', '.join(names)}: missing {', '.join(missing)}")
    return WhisperConfig(**{name: int(dims[name]) for name in names})


def from_hf_config(raw: Mapping[str, Any]) -> WhisperConfig:
    """A config from a Hugging Face ``WhisperConfig`` (config.json)."""
    keys = {
        "n_mels": "num_mel_bins", "n_audio_ctx": "max_source_positions", "n_audio_state": "d_model",
        "n_audio_head": "encoder_attention_heads", "n_audio_layer": "encoder_layers", "n_vocab": "vocab_size",
        "n_text_ctx": "max_target_positions", "n_text_state": "d_model", "n_text_head": "decoder_attention_heads",
        "n_text_layer": "decoder_layers",
    }
    missing = sorted({hf for hf in keys.values() if hf not in raw})
    if missing:
        raise ValueError(f"Expected config.json to have {', '.join(sorted(set(keys.values())))}: missing {', '.join(missing)}")
    for ffn in ("encoder_ffn_dim", "decoder_ffn_dim"):
        if ffn in raw and int(raw[ffn]) != 4 * int(raw["d_model"]):
            raise ValueError(f"Expected {ffn} to be 4 x d_model ({4 * int(raw['d_model'])}): got {raw[ffn]}")
    return WhisperConfig(**{ours: int(raw[hf]) for ours, hf in keys.items()})


def to_hf_config(config: WhisperConfig) -> Dict[str, Any]:
    """The Hugging Face config.json fields that decide the shapes (what :func:`from_hf_config` reads)."""
    return {
        "model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"],
        "num_mel_bins": config.n_mels, "max_source_positions": config.n_audio_ctx, "d_model": config.n_audio_state,
        "encoder_attention_heads": config.n_audio_head, "encoder_layers": config.n_audio_layer,
        "vocab_size": config.n_vocab, "max_target_positions": config.n_text_ctx,
        "decoder_attention_heads": config.n_text_head, "decoder_layers": config.n_text_layer,
        "encoder_ffn_dim": 4 * config.n_audio_state, "decoder_ffn_dim": 4 * config.n_text_state,
    }


def count_parameters(config: WhisperConfig) -> int:
    """Trainable parameters (the encoder's sinusoidal positions are a buffer, not counted)."""
    d_a, d_t = config.n_audio_state, config.n_text_state

    def block(d: int, cross: bool) -> int:
        attn = 4 * d * d + 3 * d  # query, value and out have biases; key has none
        mlp = 8 * d * d + 5 * d
        norms = (3 if cross else 2) * 2 * d
        return attn * (2 if cross else 1) + mlp + norms

    encoder = (config.n_mels * d_a * 3 + d_a) + (d_a * d_a * 3 + d_a) + config.n_audio_layer * block(d_a, False) + 2 * d_a
    decoder = config.n_vocab * d_t + config.n_text_ctx * d_t + config.n_text_layer * block(d_t, True) + 2 * d_t
    return encoder + decoder
