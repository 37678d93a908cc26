"""One session's state between items, and its byte form (what the host keeps and sends back).

Layout: ``b"VXSF"``, a version byte, a little-endian u32 header length, the header (JSON: counters,
post-processing carry, speaker order, and a list of ``[name, dtype, shape]`` for the arrays), then the
arrays' raw little-endian bytes in header order. bf16 arrays travel as their 16-bit patterns. The adapter
reads every item's state from these bytes, so a session continued on another instance computes exactly
what it would have computed in place.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import numpy as np
import numpy.typing as npt
import torch

from .cache import SpeakerContext
from .postprocess import PostState

MAGIC = b"VXSF"
VERSION = 2
_HEADER = struct.Struct("<4sBI")
_DTYPES: Dict[str, Tuple[torch.dtype, Any]] = {
    "f32": (torch.float32, np.float32),
    "bf16": (torch.bfloat16, np.int16),
    "f16": (torch.float16, np.float16),
    "i16": (torch.int16, np.int16),
}
_NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.int16: "i16"}


class StateError(ValueError):
    """The bytes are not a state of this engine and configuration."""


@dataclass
class SessionState:
    fingerprint: str
    context: SpeakerContext
    post: PostState
    samples: int = 0  # samples received so far
    pending_start: int = 0  # sample index of pending[0]
    pending: npt.NDArray[np.int16] = field(default_factory=lambda: np.zeros(0, dtype=np.int16))
    steps: int = 0  # steps run
    frames: int = 0  # diarization frames output
    finished: bool = False
    #: speaker id -> slot, in order of first appearance.
    speakers: List[int] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        arrays = [
            ("pending", torch.from_numpy(np.ascontiguousarray(self.pending))),
            ("spkcache", self.context.spkcache),
            ("spkcache_preds", self.context.spkcache_preds),
            ("fifo", self.context.fifo),
            ("fifo_preds", self.context.fifo_preds),
            ("mean_sil_emb", self.context.mean_sil_emb),
        ]
        specs = []
        blobs = []
        for name, tensor in arrays:
            tensor = tensor.detach().cpu().contiguous()
            dtype = _NAMES.get(tensor.dtype)
            if dtype is None:
                raise TypeError(f"Cannot store {name} of dtype {tensor.dtype}")
            host = tensor.view(torch.int16) if tensor.dtype == torch.bfloat16 else tensor
            blobs.append(host.numpy().astype(host.numpy().dtype.newbyteorder("<"), copy=False).tobytes())
            specs.append([name, dtype, list(tensor.shape)])
        header = {
            "fingerprint": self.fingerprint,
            "samples": self.samples,
            "pendingStart": self.pending_start,
            "steps": self.steps,
            "frames": self.frames,
            "finished": self.finished,
            "nSil": self.context.n_sil_frames,
            "compressed": self.context.compressed,
            "speakers": self.speakers,
            "post": self.post.to_json(),
            "arrays": specs,
        }
        head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode("utf-8")
        return _HEADER.pack(MAGIC, VERSION, len(head)) + head + b"".join(blobs)

    @staticmethod
    def from_bytes(data: bytes, fingerprint: str, n_slots: int) -> "SessionState":
        if len(data) < _HEADER.size:
            raise StateError(f"Expected a session state of at least {_HEADER.size} bytes: got {len(data)}")
        magic, version, head_len = _HEADER.unpack_from(data)
        if magic != MAGIC or version != VERSION:
            raise StateError(f"Expected a sortformer session state (version {VERSION}): got magic {magic!r} "
                             f"version {version}")
        try:
            header = json.loads(data[_HEADER.size : _HEADER.size + head_len].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StateError(f"The session state's header is unreadable: {exc}") from exc
        if header.get("fingerprint") != fingerprint:
            raise StateError(f"The session state was made by another configuration ({header.get('fingerprint')}); "
                             f"this instance runs {fingerprint}")
        offset = _HEADER.size + head_len
        tensors: Dict[str, torch.Tensor] = {}
        try:
            for name, dtype, shape in header["arrays"]:
                torch_dtype, np_dtype = _DTYPES[dtype]
                count = int(np.prod(shape)) if shape else 1
                size = count * np.dtype(np_dtype).itemsize
                if offset + size > len(data):
                    raise StateError(f"The session state is truncated in {name}")
                array = np.frombuffer(data, dtype=np.dtype(np_dtype).newbyteorder("<"), count=count, offset=offset)
                tensor = torch.from_numpy(array.astype(np_dtype).reshape(shape))
                tensors[name] = tensor.view(torch.bfloat16) if torch_dtype == torch.bfloat16 else tensor
                offset += size
            context = SpeakerContext(
                spkcache=tensors["spkcache"], spkcache_preds=tensors["spkcache_preds"], fifo=tensors["fifo"],
                fifo_preds=tensors["fifo_preds"], mean_sil_emb=tensors["mean_sil_emb"],
                n_sil_frames=int(header["nSil"]), compressed=bool(header["compressed"]),
            )
            return SessionState(
                fingerprint=fingerprint,
                context=context,
                post=PostState.from_json(header["post"], n_slots),
                samples=int(header["samples"]),
                pending_start=int(header["pendingStart"]),
                pending=tensors["pending"].numpy().astype(np.int16),
                steps=int(header["steps"]),
                frames=int(header["frames"]),
                finished=bool(header["finished"]),
                speakers=[int(s) for s in header["speakers"]],
            )
        except StateError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"The session state is malformed: {type(exc).__name__}: {exc}") from exc
