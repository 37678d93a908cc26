"""bench_profile_support.py on profiles made up of known events: annotation ranges dropped, kernels linked
to the operators that launched them and matched in order, busy time, rows and tables."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, List, Optional

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_profile_support import (Kernel, align, busy_us, device_kernels, kernel_rows, kernel_table,  # noqa: E402
                                   op_kernels, top)

CPU, CUDA = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA


def event(name: str, start: float, end: float, device: Any = CUDA, parent: Optional[Any] = None,
          kernels: Optional[List[Any]] = None, annotation: bool = False, self_us: float = 0.0) -> Any:
    return SimpleNamespace(name=name, device_type=device, time_range=SimpleNamespace(start=start, end=end),
                           is_async=False, cpu_parent=parent, kernels=kernels or [], is_user_annotation=annotation,
                           self_cpu_time_total=self_us)


def profile_of(events: List[Any]) -> Any:
    return SimpleNamespace(events=lambda: events)


def test_device_kernels_leave_out_annotation_ranges_flagged_or_containing_the_next_event() -> None:
    events = [
        event("gemm", 10, 20), event("bench:label", 10, 40),  # a range around two kernels (no flag)
        event("gelu", 25, 40), event("Torch-Compiled Region", 50, 70, annotation=True),
        event("triton_poi_fused_add_0", 50, 60), event("Memcpy DtoD", 80, 81),
        event("aten::mm", 5, 30, device=CPU),  # an operator: not a device event
    ]
    kernels = device_kernels(profile_of(events))
    assert [(k.name, k.us, k.start_us) for k in kernels] == [
        ("gemm", 10, 10), ("gelu", 15, 25), ("triton_poi_fused_add_0", 10, 50), ("Memcpy DtoD", 1, 80)]
    assert busy_us(kernels) == 36
    assert busy_us([Kernel("a", 10, 0), Kernel("b", 10, 5)]) == 15  # overlapping kernels counted once


def test_op_kernels_carry_the_operators_that_launched_them_and_leave_out_annotations() -> None:
    label = event("bench:attention:448", 0, 100, device=CPU,
                  kernels=[SimpleNamespace(name="bench:attention:448", duration=30.0)])
    sdpa = event("aten::scaled_dot_product_attention", 1, 50, device=CPU, parent=label)
    inner = event("aten::_efficient_attention_forward", 2, 40, device=CPU, parent=sdpa,
                  kernels=[SimpleNamespace(name="fmha_cutlassF", duration=12.0)])
    mm = event("aten::mm", 60, 70, device=CPU, kernels=[SimpleNamespace(name="nvjet_tst", duration=8.0)])
    annotation = event("bench:attention:448", 3, 33, annotation=True)
    profile = profile_of([mm, label, inner, sdpa, annotation, event("fmha_cutlassF", 3, 15), event("nvjet_tst", 61, 69)])
    kernels = op_kernels(profile, on_cpu=False)
    assert [(k.name, k.us, k.ops) for k in kernels] == [
        ("fmha_cutlassF", 12.0, ("aten::_efficient_attention_forward", "aten::scaled_dot_product_attention",
                                 "bench:attention:448")),
        ("nvjet_tst", 8.0, ("aten::mm",))]
    # On the CPU: each operator's own time, the labels left out.
    label.self_cpu_time_total, sdpa.self_cpu_time_total, inner.self_cpu_time_total = 5.0, 2.0, 30.0
    on_cpu = op_kernels(profile_of([label, sdpa, inner]), on_cpu=True, skip=lambda name: name.startswith("bench:"))
    assert [(k.name, k.us) for k in on_cpu] == [("aten::scaled_dot_product_attention", 2.0),
                                               ("aten::_efficient_attention_forward", 30.0)]


def test_align_matches_kernels_in_order_and_leaves_the_rest_without_operators() -> None:
    linked = [Kernel("ln", 1, 0, ("aten::layer_norm",)), Kernel("gemm", 1, 1, ("aten::mm",)),
              Kernel("eager_only", 1, 2, ("aten::x",)), Kernel("gemm", 1, 3, ("bench:logits", "aten::mm")),
              Kernel("argmax", 1, 4, ("bench:rules",))]
    replayed = [Kernel("fill", 1, 0), Kernel("ln", 2, 1), Kernel("gemm", 2, 2), Kernel("gemm", 2, 3), Kernel("argmax", 2, 4)]
    assert [k.ops for k in align(replayed, linked)] == [
        (), ("aten::layer_norm",), ("aten::mm",), ("bench:logits", "aten::mm"), ("bench:rules",)]
    assert [k.us for k in align(replayed, linked)] == [1, 2, 2, 2, 2]  # the replay's own times


def test_rows_tables_and_top_per_call() -> None:
    kernels = [Kernel("gemm", 300, 0), Kernel("gemm", 300, 1), Kernel("gelu", 100, 2), Kernel("gemm", 200, 3)]
    rows = kernel_rows(kernels, lambda k: "GEMM" if k.name == "gemm" else "elementwise")
    assert rows[0].name == "gemm" and rows[0].us == 800 and rows[0].calls == 3
    lines = kernel_table(rows, 900, 10, per=2)
    assert lines[0] == "| kernel | category | GPU ms | calls | share |"
    assert lines[2] == "| gemm | GEMM | 0.400 | 1.5 | 88.9% |"
    assert top(rows, 1, per=2) == [{"kernel": "gemm", "category": "GEMM", "ms": pytest.approx(0.4), "calls": 1.5}]
    assert kernel_table(kernel_rows(kernels), 900, 1)[2] == "| gemm | 0.800 | 3 | 88.9% |"
