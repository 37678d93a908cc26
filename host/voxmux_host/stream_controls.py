"""The credit and cancels of an instance's open streams, shared by its reader thread (which registers
streams, grants credit and takes cancels as their frames arrive) and its main thread (which spends
credit, applies cancels and removes ended streams)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Dict, List


@dataclass
class _StreamControl:
    credit: int
    cancelled: threading.Event
    is_cancelled: bool = False


class StreamControls:
    """The credit and cancels of each stream from its StartStream until its end. The reader registers,
    grants and cancels; the main thread spends credit, takes cancels and removes ended streams."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: Dict[str, _StreamControl] = {}
        self._cancels: List[str] = []
        #: A hint read without the lock: some stream was cancelled since the last take_cancels().
        self.has_cancels = False

    def register(self, stream_id: str, credit: int, cancelled: threading.Event) -> bool:
        """False when a stream of that id has not ended. ``cancelled`` is set by ``cancel``."""
        with self._lock:
            if stream_id in self._streams:
                return False
            self._streams[stream_id] = _StreamControl(credit, cancelled)
            return True

    def grant(self, stream_id: str, chunks: int) -> bool:
        """False when no such stream runs (it ended already)."""
        with self._lock:
            control = self._streams.get(stream_id)
            if control is None:
                return False
            control.credit += chunks
            return True

    def cancel(self, stream_id: str) -> bool:
        with self._lock:
            control = self._streams.get(stream_id)
            if control is None or control.is_cancelled:
                return False
            control.is_cancelled = True
            control.cancelled.set()  # seen by a step that is running now (StreamRequest.cancelled)
            self._cancels.append(stream_id)
            self.has_cancels = True
            return True

    def take_cancels(self) -> List[str]:
        with self._lock:
            cancels, self._cancels = self._cancels, []
            self.has_cancels = False
            return cancels

    def is_cancelled(self, stream_id: str) -> bool:
        with self._lock:
            control = self._streams.get(stream_id)
            return control is not None and control.is_cancelled

    def has_credit(self, stream_id: str) -> bool:
        with self._lock:
            control = self._streams.get(stream_id)
            return control is not None and control.credit > 0

    def spend(self, stream_id: str) -> None:
        with self._lock:
            control = self._streams.get(stream_id)
            if control is not None:
                control.credit -= 1

    def remove(self, stream_id: str) -> None:
        with self._lock:
            self._streams.pop(stream_id, None)
