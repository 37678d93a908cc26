"""Test support for Sortformer sessions: two halves of the same sessions run as two sequence batches,
either the second begun before the first finishes (as the host runs them with two batches in flight)
or one after the other."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray

from voxmux_host.model_api import SequenceInput, SequenceOutput
from voxmux_host.models.sortformer.adapter import SortformerAdapter


def two_batch_outputs(adapter: SortformerAdapter, chunks: Sequence[Sequence[NDArray[np.int16]]], split: int,
                      interleaved: bool) -> List[Tuple[Dict[str, Any], bytes]]:
    """Session i sends chunks[i][0], chunks[i][1], ... (the last one ``is_last``); each round, sessions
    [0, split) form one batch and the rest another. Returns every item's output and state bytes in
    order. ``interleaved``: the second batch begins before the first one's finish runs."""
    rounds = len(chunks[0])
    states: List[Optional[bytes]] = [None] * len(chunks)
    out: List[Tuple[Dict[str, Any], bytes]] = []
    for k in range(rounds):
        items = [SequenceInput(f"s{i}-{k}", f"s{i}", k, chunks[i][k], states[i], k == rounds - 1, {})
                 for i in range(len(chunks))]
        first, second = items[:split], items[split:]
        if interleaved:
            finish_first = adapter.begin_sequence(first)
            finish_second = adapter.begin_sequence(second)
            results = [*finish_first(), *finish_second()]
        else:
            results = [*adapter.begin_sequence(first)(), *adapter.begin_sequence(second)()]
        for i, result in enumerate(results):
            assert isinstance(result, SequenceOutput), result
            states[i] = result.state
            out.append((result.output, result.state))
    return out
