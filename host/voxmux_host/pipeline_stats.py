"""Where an instance's time goes between batches: a summary of the main thread's batch timings
(batches and sequence batches alike; the pipeline adds the adapter's own ``stageMs`` when it keeps any).

Per batch the pipeline records when the main thread began its model part (the adapter's ``begin``)
and when that returned, and whether the next batch had already arrived (staged or
not) by then. Every ``every`` batches, or once ``interval_s`` has passed since the window's first
batch began, it logs one summary line ('batch pipeline'):

- ``batches``, ``clipsPerBatch``, ``windowS``: the window's batches, their mean size and how long it
  lasted (first beginning to last end);
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

#: Batches per summary line, at most.
DEFAULT_EVERY = 200
#: Seconds per summary line, at most (a line ends the first batch that ends after this).
DEFAULT_INTERVAL_S = 10.0


@dataclass
class PipelineStats:
    every: int = DEFAULT_EVERY
    interval_s: float = DEFAULT_INTERVAL_S
    _window_start: Optional[float] = None
    _clips: int = 0
    _model_ms: List[float] = field(default_factory=list)
    _gap_ms: List[float] = field(default_factory=list)
    _wait_ms: float = 0.0
    _waits: int = 0
    _began: Optional[float] = None
    _last_end: Optional[float] = None
    _next_was_ready: bool = False

    def began(self, now_s: float, clips: int = 1) -> None:
        """The main thread starts a batch's model part, of ``clips`` requests."""
        if self._window_start is None:
            self._window_start = now_s
        self._clips += clips
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
        summary fields when ``every`` batches have ended since the last one, or ``interval_s`` has
        passed since the first of them began, else None."""
        if self._began is None:
            return None
        self._model_ms.append((now_s - self._began) * 1000)
        self._began = None
        self._last_end = now_s
        self._next_was_ready = next_is_ready
        start = self._window_start if self._window_start is not None else now_s
        if len(self._model_ms) < self.every and now_s - start < self.interval_s:
            return None
        return self._summary(now_s - start)

    def _summary(self, window_s: float) -> Dict[str, Any]:
        model, gaps = np.asarray(self._model_ms), np.asarray(self._gap_ms)
        # Every batch but the host's first began either after a gap (already waiting) or after a wait.
        starts = max(len(gaps) + self._waits, 1)
        summary: Dict[str, Any] = {
            "batches": len(self._model_ms),
            "clipsPerBatch": round(self._clips / len(self._model_ms), 2),
            "windowS": round(window_s, 2),
            "modelMsP50": round(float(np.percentile(model, 50)), 2),
            "modelMsP95": round(float(np.percentile(model, 95)), 2),
            "gapMsP50": round(float(np.percentile(gaps, 50)), 3) if len(gaps) else None,
            "gapMsP95": round(float(np.percentile(gaps, 95)), 3) if len(gaps) else None,
            "gapMsTotal": round(float(gaps.sum()), 1),
            "readyShare": round(len(gaps) / starts, 3),
            "waitMsTotal": round(self._wait_ms, 1),
        }
        self._model_ms, self._gap_ms, self._wait_ms, self._waits = [], [], 0.0, 0
        self._window_start, self._clips = None, 0
        return summary
