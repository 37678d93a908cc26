"""The contract between the host loop and a model adapter.

An adapter turns batches of 16 kHz mono float32 audio into transcripts. The host
(``host.py``) owns the protocol, threads and heartbeats; an adapter owns only the model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Sequence

import numpy as np


@dataclass
class RequestInput:
    request_id: str
    audio: np.ndarray  # float32, shape [samples], 16 kHz mono
    language: Optional[str] = None
    prompt: Optional[str] = None
    word_timestamps: bool = False


@dataclass
class Word:
    word: str
    start: float  # seconds
    end: float  # seconds


@dataclass
class Segment:
    start: float  # seconds
    end: float  # seconds
    text: str


@dataclass
class RequestOutput:
    request_id: str
    text: str
    language: str
    duration_s: float
    segments: Optional[List[Segment]] = None
    words: Optional[List[Word]] = None


@dataclass
class RequestFailure:
    request_id: str
    code: str  # a wire code, see errors.WIRE_ERROR_CODES
    message: str


@dataclass
class LoadInfo:
    device: str
    parameters: int = 0
    memory_bytes: int = 0


@dataclass
class WarmupInfo:
    graphs_captured: int = 0


@dataclass
class AdapterStats:
    """Cheap counters reported in every HeartbeatAck."""

    memory_bytes: int = 0
    eager_batches: int = 0
    graph_replays: int = 0


@dataclass
class LoadContext:
    instance_id: str
    model: str
    options: Dict[str, Any] = field(default_factory=dict)


class ModelAdapter(Protocol):
    def load(self, ctx: LoadContext) -> LoadInfo: ...

    def warmup(self) -> WarmupInfo: ...

    def run_batch(self, batch: Sequence[RequestInput]) -> List[RequestOutput | RequestFailure]:
        """One result per input, in input order; per-request failures do not fail the batch."""
        ...

    def stats(self) -> AdapterStats: ...

    def probe(self) -> bool:
        """A cheap device health check run on a timer; False marks the instance wedged."""
        ...

    def close(self) -> None: ...
