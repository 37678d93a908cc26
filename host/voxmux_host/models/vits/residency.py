"""Which voices are resident: an LRU of voice weights on the device under a byte budget, and an LRU of host
copies (pinned on CUDA) of the voices seen, under their own budget, so that a device miss costs a
host->device copy rather than a disk read.

Counts (cumulative, read by the heartbeat thread through :meth:`VoiceResidency.counters`):

- ``hits`` / ``misses``: per request (stream) that uses a voice: a hit when the voice was on the device
  already, a miss when it had to be loaded for it (by :meth:`load` just before, as the host does for a
  stream's resource, or by :meth:`use` itself). Loads that no request asked for (preloading) count neither.
- ``loadsFromDisk`` / ``loadsFromHost`` and ``diskLoadMs`` / ``hostLoadMs``: each load onto the device by
  where it came from, and the time it took (disk: read, check and pack the file, make the host copy and
  copy to the device; host: the copy to the device).
- ``evictions``: voices removed from the device to make room (or by :meth:`evict`); dropped host copies
  are not counted.

A voice in use by an open stream (the adapter takes it at the stream's open) is never evicted; a voice that
does not fit beside the voices in use, or is larger than the budget, fails with ``out_of_memory``. Effects
(reading files, copying to the device) are the injected callables; the bookkeeping is plain Python, tested
on its own."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Dict, Generic, List, Literal, Optional, Set, Tuple, TypeVar

import torch

from voxmux_host.errors import InstanceError

T = TypeVar('T')
Source = Literal['disk', 'host', 'resident']


@dataclass
class ResidencyOptions:
    #: Device bytes for voice weights; None: no limit.
    budget_bytes: Optional[int]
    #: Host bytes for host copies; 0: no host copies; None: no limit.
    host_budget_bytes: Optional[int]


@dataclass
class _Resident(Generic[T]):
    value: T
    bytes: int


class VoiceResidency(Generic[T]):
    def __init__(self, options: ResidencyOptions, *, voice_bytes: Callable[[str], int],
                 read_disk: Callable[[str], torch.Tensor], to_host: Callable[[torch.Tensor], torch.Tensor],
                 to_device: Callable[[torch.Tensor], T], clock_ms: Callable[[], float] = lambda: time.perf_counter() * 1000
                 ) -> None:
        self._options = options
        self._voice_bytes = voice_bytes
        self._read_disk = read_disk
        self._to_host = to_host
        self._to_device = to_device
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._device: 'OrderedDict[str, _Resident[T]]' = OrderedDict()  # least recently used first
        self._host: 'OrderedDict[str, torch.Tensor]' = OrderedDict()
        self._in_use: Dict[str, int] = {}
        self._fresh: Set[str] = set()  # loaded for the request about to use it
        self._counts: Dict[str, float] = {key: 0.0 for key in (
            'hits', 'misses', 'loadsFromDisk', 'loadsFromHost', 'evictions', 'diskLoadMs', 'hostLoadMs')}

    # -- requests -------------------------------------------------------------------------------

    def load(self, name: str, *, for_request: bool = True) -> Tuple[Source, int, int]:
        """Make the voice resident on the device: (source, bytes, milliseconds). ``for_request``: a request
        is about to use it (its :meth:`use` then counts the miss)."""
        with self._lock:
            resident = self._device.get(name)
            if resident is not None:
                self._device.move_to_end(name)
                return 'resident', resident.bytes, 0
        source, nbytes, ms = self._bring(name)
        if for_request:
            self._fresh.add(name)
        return source, nbytes, ms

    def use(self, name: str) -> T:
        """A request starts using the voice: count the hit or miss, load it if need be, and keep it on the
        device until :meth:`release`."""
        with self._lock:
            resident = self._device.get(name)
            if resident is not None:
                self._counts['misses' if name in self._fresh else 'hits'] += 1
                self._fresh.discard(name)
                self._device.move_to_end(name)
                self._in_use[name] = self._in_use.get(name, 0) + 1
                return resident.value
        self._bring(name)
        with self._lock:
            self._counts['misses'] += 1
            self._fresh.discard(name)
            self._in_use[name] = self._in_use.get(name, 0) + 1
            return self._device[name].value

    def release(self, name: str) -> None:
        with self._lock:
            left = self._in_use.get(name, 0) - 1
            if left > 0:
                self._in_use[name] = left
            else:
                self._in_use.pop(name, None)

    def evict(self, name: str) -> int:
        """Remove the voice from the device (its host copy stays): the bytes freed, 0 when it is not
        resident or is in use by an open stream (it stays)."""
        with self._lock:
            if name in self._in_use:
                return 0
            resident = self._device.pop(name, None)
            self._fresh.discard(name)
            if resident is None:
                return 0
            self._counts['evictions'] += 1
            return resident.bytes

    # -- reading (any thread) -------------------------------------------------------------------

    def listing(self) -> List[Tuple[str, Literal['device', 'host'], int]]:
        """Resident voices, device first (least recently used first), then host-only copies."""
        with self._lock:
            out: List[Tuple[str, Literal['device', 'host'], int]] = [
                (name, 'device', r.bytes) for name, r in self._device.items()]
            out.extend((name, 'host', _nbytes(t)) for name, t in self._host.items() if name not in self._device)
            return out

    def on_device(self) -> List[str]:
        with self._lock:
            return list(self._device)

    def counters(self) -> Dict[str, float]:
        with self._lock:
            out = dict(self._counts)
            out['budgetBytes'] = float(self._options.budget_bytes or 0)
            out['residentBytes'] = float(sum(r.bytes for r in self._device.values()))
            return out

    def value(self, name: str) -> Optional[T]:
        with self._lock:
            resident = self._device.get(name)
            return None if resident is None else resident.value

    # -- loading --------------------------------------------------------------------------------

    def _bring(self, name: str) -> Tuple[Source, int, int]:
        nbytes = self._voice_bytes(name)
        self._make_room(name, nbytes)
        start = self._clock_ms()
        with self._lock:
            host = self._host.get(name)
            if host is not None:
                self._host.move_to_end(name)
        if host is not None:
            value = self._to_device(host)
            source: Source = 'host'
        else:
            flat = self._read_disk(name)
            host_copy = self._keep_on_host(name, flat)
            value = self._to_device(host_copy if host_copy is not None else flat)
            source = 'disk'
        ms = self._clock_ms() - start
        with self._lock:
            self._device[name] = _Resident(value, nbytes)
            if source == 'host':
                self._counts['loadsFromHost'] += 1
                self._counts['hostLoadMs'] += ms
            else:
                self._counts['loadsFromDisk'] += 1
                self._counts['diskLoadMs'] += ms
        return source, nbytes, int(round(ms))

    def _make_room(self, name: str, nbytes: int) -> None:
        budget = self._options.budget_bytes
        if budget is None:
            return
        if nbytes > budget:
            raise InstanceError('out_of_memory', f"Voice '{name}' needs {nbytes} bytes: more than the device budget "
                                                 f'of {budget} bytes (residentBudgetBytes)')
        with self._lock:
            resident = sum(r.bytes for r in self._device.values())
            while resident + nbytes > budget:
                victim = next((n for n in self._device if n not in self._in_use), None)
                if victim is None:
                    in_use = sorted(self._in_use)
                    raise InstanceError('out_of_memory', f"Voice '{name}' ({nbytes} bytes) does not fit in the device "
                                                         f'budget of {budget} bytes (residentBudgetBytes) beside the '
                                                         f'voices held by open streams ({", ".join(in_use)})')
                resident -= self._device.pop(victim).bytes
                self._fresh.discard(victim)
                self._counts['evictions'] += 1

    def _keep_on_host(self, name: str, flat: torch.Tensor) -> Optional[torch.Tensor]:
        budget = self._options.host_budget_bytes
        nbytes = _nbytes(flat)
        if budget is not None and nbytes > budget:
            return None
        copy = self._to_host(flat)
        with self._lock:
            self._host[name] = copy
            if budget is not None:
                total = sum(_nbytes(t) for t in self._host.values())
                while total > budget:
                    _, dropped = self._host.popitem(last=False)
                    total -= _nbytes(dropped)
        return copy


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()
