"""What the benches' torch.profiler tables share (``bench_sortformer_forward.py``, ``bench_whisper.py``): the
kernels of a profiled window (on the GPU the device's kernels, copies and fills; on the CPU the operators'
own time, as a CPU run has no kernels), their time grouped by name, how long the device was busy, and a
markdown table of the largest.

Works with torch 1.13 to 2.x: recent releases also list each ``record_function`` range (a user annotation:
torch.compile's regions, a bench's labels) as a device event spanning its kernels, which would count their
time twice; those are dropped (by the event's flag where torch has it, and otherwise because such a range
contains the next event, where the kernels of one stream never overlap)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import torch


class Kernel(NamedTuple):
    """One kernel (or copy, or fill) of a profiled window; on the CPU, one operator's own time."""

    name: str
    us: float
    #: When it started (for the CPU op that launched it, where the kernel came from an op's list).
    start_us: float
    #: The operator that launched it, then that operator's callers, innermost first (record_function
    #: labels among them); empty where unknown (kernels replayed from a CUDA graph).
    ops: Tuple[str, ...] = ()


class KernelRow(NamedTuple):
    """Kernels of one name (and category, where the caller gives one), added up."""

    name: str
    us: float
    calls: int
    category: str = ""


def activities(device: torch.device) -> List[Any]:
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])


def _device_us(event: Any) -> float:
    return float(event.time_range.end - event.time_range.start)


def _op_chain(event: Any) -> Tuple[str, ...]:
    chain: List[str] = []
    while event is not None:
        chain.append(str(event.name))
        event = event.cpu_parent
    return tuple(chain)


def _device_events(prof: Any) -> Tuple[List[Any], List[Any]]:
    """The device events of a profiled window by start time: (kernels, annotation ranges)."""
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                    key=lambda e: (e.time_range.start, -e.time_range.end))
    kept: List[Any] = []
    annotations: List[Any] = []
    for i, event in enumerate(events):
        after = events[i + 1] if i + 1 < len(events) else None
        contains_next = (after is not None and after.time_range.start < event.time_range.end
                         and after.time_range.end <= event.time_range.end)
        (annotations if getattr(event, "is_user_annotation", False) or contains_next else kept).append(event)
    return kept, annotations


def device_kernels(prof: Any) -> List[Kernel]:
    """The device events of a profiled window (kernels, copies, fills) by start time, without the
    annotation ranges (see the module docstring). Empty for a CPU-only profile."""
    return [Kernel(str(e.name), _device_us(e), float(e.time_range.start)) for e in _device_events(prof)[0]]


def op_kernels(prof: Any, on_cpu: bool, skip: Callable[[str], bool] = lambda name: False) -> List[Kernel]:
    """The kernels of a profiled window with the operators that launched them, in the order the operators
    started. On the GPU, the kernels each operator launched (kernels of a CUDA-graph replay belong to no
    operator: take :func:`device_kernels`); on the CPU, each operator's own time (not counting the
    operators it called), operators whose name ``skip`` accepts (a bench's labels) left out."""
    kernels: List[Kernel] = []
    # A user annotation's device range may be listed among its operator's kernels: left out.
    annotations = {(str(e.name), _device_us(e)) for e in _device_events(prof)[1]}
    cpu_events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU
                         and not e.is_async), key=lambda e: float(e.time_range.start))
    for event in cpu_events:
        if on_cpu:
            if event.self_cpu_time_total > 0 and not skip(str(event.name)):
                kernels.append(Kernel(str(event.name), float(event.self_cpu_time_total),
                                      float(event.time_range.start), _op_chain(event)))
            continue
        for kernel in event.kernels:
            if (str(kernel.name), float(kernel.duration)) not in annotations:
                kernels.append(Kernel(str(kernel.name), float(kernel.duration), float(event.time_range.start),
                                      _op_chain(event)))
    return kernels


def busy_us(kernels: Iterable[Kernel]) -> float:
    """How long at least one of ``kernels`` ran (their union in time)."""
    spans = sorted((k.start_us, k.start_us + k.us) for k in kernels)
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def kernel_rows(kernels: Iterable[Kernel], category: Optional[Callable[[Kernel], str]] = None) -> List[KernelRow]:
    """Kernels grouped by name (and by ``category`` where given), the largest total first."""
    grouped: dict[Tuple[str, str], List[float]] = {}
    for kernel in kernels:
        grouped.setdefault((kernel.name, category(kernel) if category else ""), []).append(kernel.us)
    rows = [KernelRow(name, sum(times), len(times), cat) for (name, cat), times in grouped.items()]
    return sorted(rows, key=lambda r: -r.us)


def kernel_table(rows: Sequence[KernelRow], total_us: float, limit: int, per: int = 1, unit: str = "GPU ms") -> List[str]:
    """Markdown lines of the ``limit`` largest rows: time (divided by ``per``, the calls profiled), count
    (also divided) and share of ``total_us``; a category column where the rows have one."""
    with_category = any(r.category for r in rows)
    header = "| kernel | " + ("category | " if with_category else "") + f"{unit} | calls | share |"
    lines = [header, "| --- | " + ("--- | " if with_category else "") + "---: | ---: | ---: |"]
    for row in rows[:limit]:
        count = f"{row.calls / per:g}" if per > 1 else str(row.calls)
        lines.append(f"| {row.name[:110]} | " + (f"{row.category} | " if with_category else "")
                     + f"{row.us / 1000 / per:.3f} | {count} | {row.us / max(total_us, 1e-9):.1%} |")
    return lines


def top(rows: Sequence[KernelRow], limit: int, per: int = 1) -> List[dict[str, Any]]:
    """The ``limit`` largest rows for a JSON report (times and counts divided by ``per``)."""
    return [{"kernel": r.name[:110], **({"category": r.category} if r.category else {}),
             "ms": round(r.us / 1000 / per, 4), "calls": r.calls / per if per > 1 else r.calls} for r in rows[:limit]]


def align(kernels: Sequence[Kernel], linked: Sequence[Kernel], window: int = 16) -> List[Kernel]:
    """``kernels`` (the device's, in the order they ran) with the operators of the same kernels in
    ``linked`` (from :func:`op_kernels`, or from an eager run of the code a CUDA graph replays): walks
    both in order, matching names, looking up to ``window`` kernels ahead in ``linked`` for the next
    match; kernels left unmatched keep no operators. Linear in the kernels' number."""
    out: List[Kernel] = []
    j = 0
    for kernel in kernels:
        found = next((j + d for d in range(window) if j + d < len(linked) and linked[j + d].name == kernel.name), None)
        if found is None:
            out.append(kernel)
        else:
            out.append(kernel._replace(ops=linked[found].ops))
            j = found + 1
    return out
