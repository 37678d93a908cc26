"""The TDT greedy decode loop around :meth:`ParakeetModel.decode_steps_`: eager, or as replays of a graph.

A decode *chunk* is ``chunk_steps`` decode steps (the model's TDT greedy step, see decoder.py) followed by
the "any item still active" flag. The loop runs chunks until the flag says every item is done.

- Eager (:func:`decode_eager`): the host reads the flag after every chunk.
- Graphs (:func:`capture_decode_graph`, :func:`replay_until_done`): one captured chunk per batch size,
  replayed until the flag, read back one chunk behind so that the GPU never waits for the host, says
  every item is done; finished items do not change, so the extra chunk is harmless.

Both leave the tokens in the :class:`DecodeState`; ``decoder.collect_results`` reads them out.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Dict, Tuple

import torch

from .config import ParakeetConfig, encoder_frames, feature_tensor_frames
from .decoder import DecodeState, TDTGreedyDecoder
from .model import ParakeetModel


def graph_kwargs() -> Dict[str, object]:
    """Keyword arguments of ``torch.cuda.graph`` for every capture of the runner."""
    # Another thread (the heartbeat or the probe) may touch CUDA while we capture; "thread_local" keeps
    # that from invalidating the capture (torch >= 2.1).
    if "capture_error_mode" in inspect.signature(torch.cuda.graph.__init__).parameters:
        return {"capture_error_mode": "thread_local"}
    return {}


def decode_eager(model: ParakeetModel, state: DecodeState, chunk_steps: int) -> None:
    """Run decode chunks until no item is active, reading the flag back after each (a host sync)."""
    limit = TDTGreedyDecoder.max_steps(state.max_frames, model.config)
    done = 0
    while bool(state.any_active):
        if done > limit:
            raise RuntimeError(f"Decoding did not finish within {limit} steps")
        model.decode_steps_(state, chunk_steps)
        done += chunk_steps


@dataclass
class ReplayFlags:
    """Where a graph's decode loop reads its flag back: two pinned flags and two events, used in turn
    (one per batch size, allocated before capture)."""

    flags_host: torch.Tensor  # [2] bool, pinned: any_active of the last two decode chunks
    events: Tuple[torch.cuda.Event, torch.cuda.Event]

    @classmethod
    def allocate(cls) -> "ReplayFlags":
        return cls(
            flags_host=torch.zeros(2, dtype=torch.bool).pin_memory(),
            events=(torch.cuda.Event(), torch.cuda.Event()),  # type: ignore[no-untyped-call]
        )


def capture_decode_graph(
    model: ParakeetModel, state: DecodeState, chunk_steps: int, stream: torch.cuda.Stream, pool: object
) -> torch.cuda.CUDAGraph:
    """Capture one decode chunk on ``stream`` (the stream it will replay on), into ``pool``.

    Runs the chunk twice first (this also creates the stream's cuBLAS workspace before the capture).
    The caller has made ``stream`` current.
    """
    for _ in range(2):
        model.decode_steps_(state, chunk_steps)
    stream.synchronize()  # type: ignore[no-untyped-call]
    graph = torch.cuda.CUDAGraph()  # type: ignore[no-untyped-call]
    with torch.cuda.graph(graph, pool=pool, stream=stream, **graph_kwargs()):  # type: ignore[arg-type, no-untyped-call]
        model.decode_steps_(state, chunk_steps)
    return graph


def replay_until_done(
    graph: torch.cuda.CUDAGraph,
    state: DecodeState,
    flags: ReplayFlags,
    stream: torch.cuda.Stream,
    bucket: int,
    config: ParakeetConfig,
    chunk_steps: int,
) -> None:
    """Replay the decode graph on ``stream`` (current) until every item of ``state`` is done.

    The flag of chunk k is copied to pinned memory behind an event; the host waits for that event only
    after it has queued chunk k + 1, so the GPU always has the next chunk.
    """
    frames = encoder_frames(feature_tensor_frames(bucket, config), config)
    limit = TDTGreedyDecoder.max_steps(frames, config) // chunk_steps + 2
    host, events = flags.flags_host, flags.events
    slot = 0
    graph.replay()  # type: ignore[no-untyped-call]
    host[slot].copy_(state.any_active, non_blocking=True)
    events[slot].record(stream)  # type: ignore[no-untyped-call]
    for _ in range(limit):
        other = 1 - slot
        graph.replay()  # type: ignore[no-untyped-call]
        host[other].copy_(state.any_active, non_blocking=True)
        events[other].record(stream)  # type: ignore[no-untyped-call]
        events[slot].synchronize()  # type: ignore[no-untyped-call]
        if not bool(host[slot]):
            break
        slot = other
    else:
        raise RuntimeError(f"Decoding did not finish within {limit} chunks")
