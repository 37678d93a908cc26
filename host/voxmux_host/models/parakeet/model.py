"""The whole model: ``preprocessor``, ``encoder``, ``decoder``, ``joint`` (NeMo's top-level names)."""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, List, Mapping, Optional, Sequence, Tuple, cast

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from .config import ParakeetConfig
from .decoder import DecodedItem, DecodeState, RNNTDecoder, RNNTJoint, TDTGreedyDecoder, collect_results
from .encoder import ConformerEncoder
from .features import FilterbankFeatures
from .random_init import init_random_weights_


class AudioToMelSpectrogramPreprocessor(nn.Module):
    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.featurizer = FilterbankFeatures(config, device)

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return cast(Tuple[torch.Tensor, torch.Tensor], self.featurizer(audio, lengths))


def autocast_context(device: torch.device, dtype: Optional[torch.dtype]) -> ContextManager[object]:
    """bf16 (or fp16) autocast on the device; a no-op for fp32. The cache is off so graphs can capture."""
    if dtype is None or dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=False)


def no_autocast(device: torch.device) -> ContextManager[object]:
    return torch.autocast(device_type=device.type, enabled=False)


class ParakeetModel(nn.Module):
    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.config = config
        self.preprocessor = AudioToMelSpectrogramPreprocessor(config, device)
        self.encoder = ConformerEncoder(config, device)
        self.decoder = RNNTDecoder(config, device)
        self.joint = RNNTJoint(config, device)
        self.greedy = TDTGreedyDecoder(self.decoder, self.joint, config)
        self.compute_dtype: Optional[torch.dtype] = None  # None: the parameters' dtype, no autocast

    @property
    def device(self) -> torch.device:
        return self.joint.enc.weight.device

    def encode(self, audio: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """audio [B, N] fp32, lengths [B] -> (encoder output [B, T_enc, d_model], encoder lengths [B]).

        The front end always runs in fp32 with autocast off; the encoder under ``compute_dtype`` autocast.
        """
        device = audio.device
        with no_autocast(device):
            feats, frames = self.preprocessor(audio, lengths)
        with autocast_context(device, self.compute_dtype):
            return cast(Tuple[torch.Tensor, torch.Tensor], self.encoder(feats, frames))

    def encode_projected(self, audio: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Encoder frames already passed through ``joint.enc`` (what the decode reads), and lengths."""
        enc, enc_len = self.encode(audio, lengths)
        with autocast_context(audio.device, self.compute_dtype):
            return self.joint.project_encoder(enc), enc_len

    def new_decode_state(self, batch_size: int, max_frames: int) -> DecodeState:
        dtype = self.compute_dtype or self.joint.enc.weight.dtype
        return DecodeState.allocate(self.config, batch_size, max_frames, self.device, dtype)

    def load_encoded_(self, state: DecodeState, enc_proj: torch.Tensor, enc_len: torch.Tensor) -> None:
        """Copy projected encoder frames into a decode state and reset it (graph safe)."""
        b, t = enc_proj.shape[0], enc_proj.shape[1]
        state.enc_proj[:b, :t].copy_(enc_proj)
        state.enc_len[:b].copy_(enc_len)
        if b < state.batch_size:
            state.enc_len[b:].zero_()
        with autocast_context(enc_proj.device, self.compute_dtype):
            self.greedy.init_state(state)

    def decode_steps_(self, state: DecodeState, steps: int) -> None:
        with autocast_context(state.t.device, self.compute_dtype):
            self.greedy.run_steps(state, steps)

    def transcribe_ids(self, audios: Sequence[npt.NDArray[Any]], chunk_steps: int = 8) -> List[DecodedItem]:
        """Eager end to end on one padded batch: clips (see :func:`pad_audio`) -> token ids, frames, durations."""
        audio, lengths = pad_audio(audios, device=self.device)
        with torch.inference_mode():  # type: ignore[no-untyped-call]
            enc_proj, enc_len = self.encode_projected(audio, lengths)
            state = self.new_decode_state(len(audios), enc_proj.shape[1])
            self.load_encoded_(state, enc_proj, enc_len)
            limit = TDTGreedyDecoder.max_steps(state.max_frames, self.config)
            done = 0
            while bool(state.any_active):
                if done > limit:
                    raise RuntimeError(f"Decoding did not finish within {limit} steps")
                self.decode_steps_(state, chunk_steps)
                done += chunk_steps
            return collect_results(state, len(audios))

    def prepare_for_inference_(self, device: torch.device, dtype: torch.dtype) -> None:
        """Move to ``device``; cast the network (not the front end, not BatchNorm) to ``dtype``; fuse qkv.

        For a dtype other than fp32 the model then runs under autocast to that dtype, so LayerNorm,
        softmax and the front end stay in fp32 while matrix products use the cheaper type.
        """
        self.eval()
        self.to(device)
        if dtype != torch.float32:
            for part in (self.encoder, self.decoder, self.joint):
                part.to(dtype)
            for module in self.modules():
                if isinstance(module, nn.BatchNorm1d):
                    module.float()
            self.compute_dtype = dtype
        else:
            self.compute_dtype = None
        self.encoder.fuse_qkv_()
        self.greedy.prepare(device)
        self.encoder.pos_enc.clear_cache()


#: The float value of one 16-bit PCM step: the wire's int16 samples are read as int16 / 32768.
#: A power of two, so int16 -> float32 conversion is exact wherever it runs (host or device).
PCM16_SCALE = 1.0 / 32768


def pcm16_from_float(audio: npt.NDArray[Any]) -> npt.NDArray[np.int16]:
    """Float audio in [-1, 1] as int16 PCM (rounded, clipped): how tools and tests build wire-format clips.

    ``pcm16_from_float(pcm * PCM16_SCALE)`` gives ``pcm`` back exactly.
    """
    scaled = np.rint(np.asarray(audio, dtype=np.float32) * np.float32(32768.0))
    return cast(npt.NDArray[np.int16], np.clip(scaled, -32768, 32767).astype(np.int16))


def is_pcm16_batch(audios: Sequence[npt.NDArray[Any]]) -> bool:
    """True for int16 clips, False for floating-point clips; a batch that mixes the two is refused.

    int16 (the wire format) is the fast path: it crosses to the device at 2 bytes per sample and is
    scaled there. Float clips (float32 references in tests and tools) are copied as float32.
    """
    pcm = [a.dtype == np.int16 for a in audios]
    if any(pcm) and not all(pcm):
        raise ValueError("Expected clips of one sample type, int16 or float: got a mix")
    for a in audios:
        if a.dtype != np.int16 and not np.issubdtype(a.dtype, np.floating):
            raise ValueError(f"Expected int16 or float clips: got {a.dtype}")
    return bool(pcm) and all(pcm)


def pad_audio(
    audios: Sequence[npt.NDArray[Any]],
    device: torch.device,
    length: Optional[int] = None,
    batch_size: Optional[int] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Stack clips into float32 [batch_size, length] on ``device``, zero-padded (defaults: the clips' count and
    max length), with their lengths [batch_size] int64.

    Clips are all int16 PCM (float value = int16 / 32768) or all float (see :func:`is_pcm16_batch`). int16
    clips are stacked and copied as int16 and converted to float32 on the device.
    """
    is_pcm = is_pcm16_batch(audios)
    n = batch_size if batch_size is not None else len(audios)
    longest = max((int(a.shape[0]) for a in audios), default=0)
    width = length if length is not None else max(longest, 1)
    if longest > width or len(audios) > n:
        raise ValueError(f"Expected at most {n} clips of at most {width} samples: got {len(audios)} up to {longest}")
    host = np.zeros((n, width), dtype=np.int16 if is_pcm else np.float32)
    lengths = np.zeros((n,), dtype=np.int64)
    for i, clip in enumerate(audios):
        host[i, : clip.shape[0]] = clip
        lengths[i] = clip.shape[0]
    audio = torch.from_numpy(host).to(device)
    if is_pcm:
        audio = audio.to(torch.float32).mul_(PCM16_SCALE)
    return audio, torch.from_numpy(lengths).to(device)


def build_model(config: ParakeetConfig, seed: Optional[int] = 0) -> ParakeetModel:
    """A model on the CPU in fp32: seeded random weights, or uninitialised storage when seed is None
    (for loading a checkpoint into). Built on the meta device first so nothing is initialised twice."""
    model = ParakeetModel(config, device="meta")
    model.to_empty(device="cpu")
    model.preprocessor.featurizer.reset_buffers()
    if seed is not None:
        torch.manual_seed(seed)
        init_random_weights_(model, config, seed)
    return model


def model_for_checkpoint(config: ParakeetConfig) -> ParakeetModel:
    """A model to load a checkpoint into with :func:`assign_checkpoint_`: built on the meta device, so
    nothing is allocated, initialised or copied before the checkpoint's tensors take their places."""
    return ParakeetModel(config, device="meta")


def assign_checkpoint_(model: ParakeetModel, state_dict: Mapping[str, torch.Tensor]) -> None:
    """Make ``state_dict``'s tensors the model's parameters and buffers, without copying them (what
    ``load_state_dict(assign=True)`` does on torch 2.1+, done here by hand so that torch 1.13 takes the
    same path). A tensor whose dtype differs from the model's is cast (one copy, that tensor only).

    The caller has checked that the names and shapes match (``nemo.check_state_dict``); a tensor the
    state dict lacks is a ``KeyError`` here, and any tensor left on the meta device a ``RuntimeError``.
    """
    with torch.no_grad():
        for module_name, module in model.named_modules():
            prefix = f"{module_name}." if module_name else ""
            for name, param in list(module._parameters.items()):
                if param is not None:
                    value = state_dict[prefix + name].to(device="cpu", dtype=param.dtype)
                    module._parameters[name] = nn.Parameter(value, requires_grad=param.requires_grad)
            for name, buffer in list(module._buffers.items()):
                if buffer is not None and name not in module._non_persistent_buffers_set:
                    module._buffers[name] = state_dict[prefix + name].to(device="cpu", dtype=buffer.dtype)
    left = [name for name, t in (*model.named_parameters(), *model.named_buffers()) if t.device.type == "meta"]
    if left:
        raise RuntimeError(f"Expected every tensor to come from the checkpoint: {', '.join(left)} did not")


def count_module_parameters(config: ParakeetConfig) -> int:
    """Parameters of the real module tree, built on the meta device (no memory is allocated)."""
    model = ParakeetModel(config, device="meta")
    return sum(p.numel() for p in model.parameters())
