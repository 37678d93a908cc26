"""Loading Whisper weights by their own parameter names, and writing them (tests, tools).

Two layouts:

- **Hugging Face** folder: ``config.json`` (WhisperConfig), ``model.safetensors`` (or shards listed in
  ``model.safetensors.index.json``) with ``model.encoder.layers.N.self_attn.q_proj.weight``-style names, and
  tokenizer files (tokenizer.py). The safetensors format is read here: an 8-byte little-endian header size,
  a JSON header (each tensor's dtype, shape and byte range), then the raw little-endian tensors.
- **OpenAI** ``.pt``: a pickled dict of ``dims`` (ModelDimensions) and ``model_state_dict`` with the names of
  model.py (``encoder.blocks.N.attn.query.weight``), read with ``torch.load(weights_only=True)``.

A checkpoint that does not fit the model fails with :class:`CheckpointError`, which names every missing,
unexpected, mismatched and untied tensor by the checkpoint's own names.
"""
from __future__ import annotations

import json
import os
import re
import struct
from typing import Dict, List, Mapping, Optional

import torch

from .config import WhisperConfig, from_dims, from_hf_config, to_hf_config
from .model import WhisperModel

_ST_DTYPES: Dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}
_ST_NAMES = {dtype: name for name, dtype in _ST_DTYPES.items()}
#: Hugging Face names of copies of another tensor, not loaded (checked equal when present): an untied output
#: projection is not supported.
_TIED = {"proj_out.weight": "decoder.token_embedding.weight"}


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: the message names every problem."""


# ---------------------------------------------------------------------------------------------- safetensors


def read_safetensors(path: str) -> Dict[str, torch.Tensor]:
    """Every tensor of a ``.safetensors`` file (copied out of the file, on the CPU)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise CheckpointError(f"{path} is not a safetensors file: {len(raw)} bytes")
    (header_size,) = struct.unpack("<Q", raw[:8])
    if header_size > len(raw) - 8:
        raise CheckpointError(f"{path} is not a safetensors file: a header of {header_size} bytes in {len(raw)}")
    try:
        header = json.loads(raw[8:8 + header_size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path} has an unreadable safetensors header: {exc}") from exc
    data = memoryview(raw)[8 + header_size:]
    tensors: Dict[str, torch.Tensor] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _ST_DTYPES.get(str(info.get("dtype")))
        if dtype is None:
            raise CheckpointError(f"{path}: tensor {name} has an unsupported dtype {info.get('dtype')!r}")
        begin, end = (int(x) for x in info["data_offsets"])
        shape = [int(x) for x in info["shape"]]
        count = 1
        for size in shape:
            count *= size
        itemsize = torch.empty((), dtype=dtype).element_size()
        if end - begin != count * itemsize or end > len(data):
            raise CheckpointError(f"{path}: tensor {name} has {end - begin} bytes for shape {shape} of {info['dtype']}")
        if count == 0:
            tensors[name] = torch.empty(shape, dtype=dtype)
            continue
        buffer = bytearray(data[begin:end])
        tensors[name] = torch.frombuffer(buffer, dtype=dtype).reshape(shape)
    return tensors


def write_safetensors(path: str, tensors: Mapping[str, torch.Tensor]) -> None:
    header: Dict[str, object] = {"__metadata__": {"format": "pt"}}
    chunks: List[bytes] = []
    offset = 0
    for name, tensor in tensors.items():
        tensor = tensor.detach().contiguous().cpu()
        payload = tensor.view(torch.uint8).numpy().tobytes() if tensor.dtype == torch.bfloat16 else tensor.numpy().tobytes()
        header[name] = {"dtype": _ST_NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(payload)]}
        chunks.append(payload)
        offset += len(payload)
    encoded = json.dumps(header).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for chunk in chunks:
            f.write(chunk)


# ---------------------------------------------------------------------------------------------- names

_HF_LAYER = [
    ("self_attn.q_proj", "attn.query"), ("self_attn.k_proj", "attn.key"), ("self_attn.v_proj", "attn.value"),
    ("self_attn.out_proj", "attn.out"), ("self_attn_layer_norm", "attn_ln"),
    ("encoder_attn.q_proj", "cross_attn.query"), ("encoder_attn.k_proj", "cross_attn.key"),
    ("encoder_attn.v_proj", "cross_attn.value"), ("encoder_attn.out_proj", "cross_attn.out"),
    ("encoder_attn_layer_norm", "cross_attn_ln"), ("fc1", "mlp.0"), ("fc2", "mlp.2"), ("final_layer_norm", "mlp_ln"),
]
_HF_FIXED = {
    "encoder.conv1.weight": "encoder.conv1.weight", "encoder.conv1.bias": "encoder.conv1.bias",
    "encoder.conv2.weight": "encoder.conv2.weight", "encoder.conv2.bias": "encoder.conv2.bias",
    "encoder.embed_positions.weight": "encoder.positional_embedding",
    "encoder.layer_norm.weight": "encoder.ln_post.weight", "encoder.layer_norm.bias": "encoder.ln_post.bias",
    "decoder.embed_tokens.weight": "decoder.token_embedding.weight",
    "decoder.embed_positions.weight": "decoder.positional_embedding",
    "decoder.layer_norm.weight": "decoder.ln.weight", "decoder.layer_norm.bias": "decoder.ln.bias",
}
_HF_LAYER_NAME = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(.+)\.(weight|bias)$")


def hf_to_openai_name(name: str) -> Optional[str]:
    """model.py's name for a Hugging Face tensor name (with or without the ``model.`` prefix); None when
    the name is not one of Whisper's."""
    bare = name[len("model."):] if name.startswith("model.") else name
    if bare in _HF_FIXED:
        return _HF_FIXED[bare]
    match = _HF_LAYER_NAME.match(bare)
    if match is None:
        return None
    side, index, module, kind = match.groups()
    for hf, ours in _HF_LAYER:
        if module == hf:
            return f"{side}.blocks.{index}.{ours}.{kind}"
    return None


def openai_to_hf_name(name: str) -> str:
    for hf, ours in _HF_FIXED.items():
        if ours == name:
            return "model." + hf
    side, _, index, rest = name.split(".", 3)
    module, kind = rest.rsplit(".", 1)
    for hf, ours in _HF_LAYER:
        if module == ours:
            return f"model.{side}.layers.{index}.{hf}.{kind}"
    raise KeyError(name)


# ---------------------------------------------------------------------------------------------- loading


def load_state(model: WhisperModel, state: Mapping[str, torch.Tensor], names: Mapping[str, str], source: str,
               tied: Optional[Mapping[str, str]] = None) -> None:
    """Copy ``state`` into ``model``: ``names`` maps each tensor name the checkpoint should have to model.py's
    name; ``tied`` maps names of copies that are not loaded (checked where present) to the model.py name of
    the tensor they must equal. Every missing, unexpected, mismatched and untied tensor is named, as the
    checkpoint names it, in one CheckpointError."""
    expected = model.state_dict()
    tied = tied or {}
    theirs = {ours: their for their, ours in names.items()}
    missing = sorted(their for their in names if their not in state)
    unexpected = sorted(name for name in state if name not in names and name not in tied)
    mismatched = sorted(
        f"{their} (checkpoint {list(state[their].shape)}, model {list(expected[ours].shape)})"
        for their, ours in names.items() if their in state and tuple(state[their].shape) != tuple(expected[ours].shape))
    untied = []
    for name, ours in tied.items():
        copy, original = state.get(name), state.get(theirs[ours])
        if copy is None:
            continue
        is_copy = tuple(copy.shape) == tuple(expected[ours].shape) and (
            original is None or (copy.shape == original.shape and torch.equal(copy.to(original.dtype), original)))
        if not is_copy:
            untied.append(f"{name} to {theirs[ours]}")
    problems = []
    if missing:
        problems.append(f"missing {len(missing)}: {', '.join(missing)}")
    if unexpected:
        problems.append(f"unexpected {len(unexpected)}: {', '.join(unexpected)}")
    if mismatched:
        problems.append(f"mismatched {len(mismatched)}: {', '.join(mismatched)}")
    if untied:
        problems.append(f"not tied {len(untied)}: {', '.join(untied)} (untied copies are not supported)")
    if problems:
        raise CheckpointError(f"{source} does not fit the model: " + "; ".join(problems))
    with torch.no_grad():
        for their, ours in names.items():
            expected[ours].copy_(state[their].to(expected[ours].dtype))


def load_openai_checkpoint(path: str) -> WhisperModel:
    """OpenAI's ``.pt``: ``{"dims": {...}, "model_state_dict": {...}}``."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is a load failure
        raise CheckpointError(f"Could not read {path}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(checkpoint, dict) or "dims" not in checkpoint or "model_state_dict" not in checkpoint:
        keys = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise CheckpointError(f"Expected {path} to hold dims and model_state_dict: got {keys}")
    try:
        config = from_dims(checkpoint["dims"])
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    model = WhisperModel(config)
    state = {k: v for k, v in checkpoint["model_state_dict"].items() if k != "alignment_heads"}
    load_state(model, state, {name: name for name in model.state_dict()}, path)
    return model.eval()


def load_hf_directory(path: str) -> WhisperModel:
    """A Hugging Face checkpoint folder (config.json and safetensors)."""
    config_path = os.path.join(path, "config.json")
    try:
        with open(config_path, encoding="utf-8") as f:
            config = from_hf_config(json.load(f))
    except (OSError, ValueError, TypeError) as exc:
        raise CheckpointError(f"Could not read {config_path}: {exc}") from exc
    single = os.path.join(path, "model.safetensors")
    index = os.path.join(path, "model.safetensors.index.json")
    state: Dict[str, torch.Tensor] = {}
    if os.path.exists(single):
        state = read_safetensors(single)
    elif os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        for shard in shards:
            state.update(read_safetensors(os.path.join(path, shard)))
    else:
        raise CheckpointError(f"Expected model.safetensors or model.safetensors.index.json in {path}")
    model = WhisperModel(config)
    # WhisperForConditionalGeneration names its tensors model.encoder..., WhisperModel encoder...
    prefix = "model." if any(name.startswith("model.") for name in state) else ""
    names = {prefix + openai_to_hf_name(ours)[len("model."):]: ours for ours in model.state_dict()}
    load_state(model, state, names, path, tied=_TIED)
    return model.eval()


def save_openai_checkpoint(model: WhisperModel, path: str) -> None:
    torch.save({"dims": model.config.to_dims(), "model_state_dict": model.state_dict()}, path)


def save_hf_directory(model: WhisperModel, path: str, dtype: Optional[torch.dtype] = None) -> None:
    """config.json and model.safetensors (tokenizer files: tokenizer.write_tokenizer_files)."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(to_hf_config(model.config), f, indent=1)
    tensors = {openai_to_hf_name(name): (t if dtype is None else t.to(dtype)) for name, t in model.state_dict().items()}
    write_safetensors(os.path.join(path, "model.safetensors"), tensors)


def config_of(model: WhisperModel) -> WhisperConfig:
    return model.config
