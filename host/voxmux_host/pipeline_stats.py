"""Where an instance's time goes between batches: a summary of the main thread's batch timings.

Per batch the host records when the main thread began its model part (``begin_batch`` or
``run_batch``) and when that returned, and whether the next batch had already arrived (staged or
not) by then. Every ``every`` batches it logs one summary line ('batch pipeline'):

- ``modelMsP50`` / ``modelMsP95``: the model part of a batch on the main thread (for a GPU model: its
  host-side launches, the GPU time, the copies back);
- ``gapMsP50`` / ``gapMsP95`` / ``gapMsTotal``: from the end of one batch to the start of the next,
  over batches that were already waiting; the main thread's own cost between batches, during
  which a GPU has nothing queued;
- ``readyShare``: the share of batches that were already waiting when the previous one ended. Below 1,
  the instance waited for work (``waitMsTotal``): the scheduler, the pipe or the stager did not keep
  up, or there was no more load.

Compared with the model alone (``host/bench_parakeet.py``), these tell whether a server below the
model's throughput loses its time inside the batches, between them, or waiting for them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

#: Batches per summary line.
DEFAULT_EVERY = 200


@dataclass
class PipelineStats:
    every: int = DEFAULT_EVERY
    _model_ms: List[float] = field(default_factory=list)
    _gap_ms: List[float] = field(default_factory=list)
    _wait_ms: float = 0.0
    _waits: int = 0
    _began: Optional[float] = None
    _last_end: Optional[float] = None
    _next_was_ready: bool = False

    def began(self, now_s: float) -> None:
        """The main thread starts a batch's model part."""
        if self._last_end is not None:
            elapsed_ms = (now_s - self._last_end) * 1000
            if self._next_was_ready:
                self._gap_ms.append(elapsed_ms)
            else:
                self._wait_ms += elapsed_ms
                self._waits += 1
        self._began = now_s

    def ended(self, now_s: float, next_is_ready: bool) -> Optional[Dict[str, Any]]:
        """The model part returned; ``next_is_ready``: another batch is already waiting. Returns the
        summary fields when ``every`` batches have ended since the last one, else None."""
        if self._began is None:
            return None
        self._model_ms.append((now_s - self._began) * 1000)
        self._began = None
        self._last_end = now_s
        self._next_was_ready = next_is_ready
        if len(self._model_ms) < self.every:
            return None
        return self._summary()

    def _summary(self) -> Dict[str, Any]:
        model, gaps = np.asarray(self._model_ms), np.asarray(self._gap_ms)
        # Every batch but the host's first began either after a gap (already waiting) or after a wait.
        starts = max(len(gaps) + self._waits, 1)
        summary: Dict[str, Any] = {
            "batches": len(self._model_ms),
            "modelMsP50": round(float(np.percentile(model, 50)), 2),
            "modelMsP95": round(float(np.percentile(model, 95)), 2),
            "gapMsP50": round(float(np.percentile(gaps, 50)), 3) if len(gaps) else None,
            "gapMsP95": round(float(np.percentile(gaps, 95)), 3) if len(gaps) else None,
            "gapMsTotal": round(float(gaps.sum()), 1),
            "readyShare": round(len(gaps) / starts, 3),
            "waitMsTotal": round(self._wait_ms, 1),
        }
        self._model_ms, self._gap_ms, self._wait_ms, self._waits = [], [], 0.0, 0
        return summary
