"""The ``profile`` part of bench_whisper.py: where the Whisper encoder's and a decode step's time goes, under
torch.profiler (bench_whisper.py's docstring says what it reports and how to run it)."""
from __future__ import annotations

import argparse
import contextlib
import re
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from bench_profile_support import (Kernel, activities, align, busy_us, device_kernels, kernel_rows, kernel_table,
                                   op_kernels, top)
from bench_whisper_support import encoder_as, fp8_problems, progress, sync, timed_ms, variant_problem
from voxmux_host import fp8
from voxmux_host.models.whisper import model as whisper_model
from voxmux_host.models.whisper.decoding import WhisperEngine
from voxmux_host.models.whisper.model import COMPILED_MIN_WINDOWS

LABEL = "bench:"
ENCODER_CATEGORIES = ("GEMM", "FP8 GEMM", "attention", "quantization", "norms/elementwise", "copies/casts",
                      "convolution", "other")
STEP_CATEGORIES = ("self-attention", "cross-attention", "GEMM", "logits", "logit rules/argmax", "KV cache writes",
                   "norms/elementwise", "copies/casts", "other")
#: Peak memory bandwidth by GPU name (vendors' figures, bytes/s), first match wins: for a decode step's share.
PEAK_BANDWIDTH = (("H200", 4.8e12), ("H100 NVL", 3.9e12), ("H100 PCIe", 2.0e12), ("H100", 3.35e12))

# Kernel names (CUDA) and operator names (the CPU, and the operator that launched a kernel).
_FP8_KERNEL = re.compile(r"e4m3|e5m2|fp8|float8|f8f6f4|_qq|scaled_mm", re.IGNORECASE)
_ATTENTION_KERNEL = re.compile(r"flash|fmha|attention|sdpa", re.IGNORECASE)
_ATTENTION_OP = re.compile(r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention")
_CONV_OP = re.compile(r"conv")
_GEMM_KERNEL = re.compile(r"gemm|gemv|nvjet|cutlass|xmma|wgmma|cublas|splitk|dot_kernel", re.IGNORECASE)
_GEMM_OP = re.compile(r"aten::(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv|dot)$")
_COPY_KERNEL = re.compile(r"copy|memcpy|memset|fillfunctor|fill_kernel|catarray", re.IGNORECASE)
_COPY_OP = re.compile(r"aten::(copy_|_to_copy|to|clone|contiguous|cat|fill_|zero_)$")
_ELEMENTWISE = re.compile(r"norm|gelu|elementwise|triton|reduce|softmax|add|mul|div|sub|where|clamp|abs|max|exp|log"
                          r"|rand|philox|distribution|gather|scatter|index|embedding|arange|masked|neg|sqrt|tanh",
                          re.IGNORECASE)


def kernel_category(kernel: Kernel, labels: Callable[[str], Optional[str]]) -> str:
    """What a kernel does: by the innermost label around it (``labels`` maps a label, prefix removed, to a
    category, or None), else by the operator that launched it and by its name (with compile, the
    activations' quantization fuses into the Triton kernel that makes them: ``amax`` in its name)."""
    label = next((op[len(LABEL):] for op in kernel.ops if op.startswith(LABEL)), None)
    category = labels(label) if label is not None else None
    if category is not None:
        return category
    name, ops = kernel.name, kernel.ops
    inner = ops[0] if ops else name
    if (_FP8_KERNEL.search(name) and _GEMM_KERNEL.search(name)) or "aten::_scaled_mm" in ops:
        return "FP8 GEMM"
    if _ATTENTION_KERNEL.search(name) or any(_ATTENTION_OP.search(op) for op in ops):
        return "attention"
    if any(_CONV_OP.search(op) for op in ops if op.startswith("aten::")):
        return "convolution"
    if "amax" in name.lower():
        return "quantization"
    if name.startswith("triton_"):
        return "norms/elementwise"  # Inductor's fused kernels (norms, GELU, adds, casts)
    if "aten::index_put_" in ops or "aten::_index_put_impl_" in ops:
        return "KV cache writes"
    if _GEMM_KERNEL.search(name) or _GEMM_OP.match(inner):
        return "GEMM"
    if _COPY_KERNEL.search(name) or _COPY_OP.match(inner):
        return "copies/casts"
    if _ELEMENTWISE.search(name):
        return "norms/elementwise"
    return "other"


def _encoder_label(label: str) -> Optional[str]:
    return "attention" if label.startswith("attention") else "quantization" if label == "quantize" else None


def _step_labels(config: Any) -> Callable[[str], Optional[str]]:
    named = {f"attention:{config.n_text_ctx}": "self-attention", f"attention:{config.n_audio_ctx}": "cross-attention",
             "logits": "logits", "rules": "logit rules/argmax", "quantize": "quantization"}
    return named.get


@contextlib.contextmanager
def labelled(model: Any, engine: Optional[WhisperEngine] = None) -> Iterator[None]:
    """The labels of :data:`LABEL` around the attention and the activations' quantization, and, with an
    engine, around the decoder's logits and the engine's logit rules, for the duration. For eager code
    only: a compiled block reads ``attend`` and ``quantize_rowwise``, and would compile again."""
    from torch.profiler import record_function

    attend, quantize = whisper_model.attend, fp8.quantize_rowwise

    def labelled_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        with record_function(f"{LABEL}attention:{k.shape[-2]}"):
            return attend(q, k, v, mask)

    def labelled_quantize(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        with record_function(f"{LABEL}quantize"):
            return quantize(x)

    def wrap(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        def wrapped(*args: Any) -> Any:
            with record_function(LABEL + label):
                return fn(*args)
        return wrapped

    whisper_model.attend, fp8.quantize_rowwise = labelled_attend, labelled_quantize  # type: ignore[assignment]
    if engine is not None:
        setattr(model.decoder, "logits", wrap(model.decoder.logits, "logits"))
        setattr(engine, "_select", wrap(engine._select, "rules"))
    try:
        yield
    finally:
        whisper_model.attend, fp8.quantize_rowwise = attend, quantize  # type: ignore[assignment]
        if engine is not None:
            delattr(model.decoder, "logits")  # the instance's wrapper: the class's method again
            delattr(engine, "_select")


def _profiled(fn: Callable[[], Any], device: torch.device, calls: int) -> Tuple[Any, float]:
    """``calls`` calls of fn (after one more) under torch.profiler: the profile and the wall ms per call."""
    from torch.profiler import profile

    fn()
    sync(device)
    with profile(activities=activities(device)) as prof:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        wall = (time.perf_counter() - start) * 1000 / calls
    return prof, wall


def profile_kernels(prof: Any, device: torch.device, linked: Optional[Sequence[Kernel]] = None) -> List[Kernel]:
    """The kernels of a profile with the operators that launched them where known: on the GPU the device's
    kernels (the truth for times and counts) matched with those the operators list (or with ``linked``:
    the eager step's, for a graph replay); on the CPU the operators' own time, the labels left out."""
    if device.type != "cuda":
        return op_kernels(prof, on_cpu=True, skip=lambda name: name.startswith(LABEL))
    return align(device_kernels(prof), op_kernels(prof, on_cpu=False) if linked is None else linked)


def summarize(kernels: Sequence[Kernel], device: torch.device, categories: Sequence[str],
              labels: Callable[[str], Optional[str]], calls: int, wall_ms: float, unprofiled_ms: float, top_n: int,
              title: str, tables: List[str]) -> Dict[str, Any]:
    """Per call: wall time (profiled, and timed without the profiler), kernel count and time, the time the
    device was busy and the gaps between kernels (launches), kernel time by category, the largest kernels;
    appends a markdown section to ``tables``. On the CPU, operators stand for kernels (their own time)."""
    def category(kernel: Kernel) -> str:
        return kernel_category(kernel, labels)

    total_us = sum(k.us for k in kernels)
    busy_ms = (busy_us(kernels) if device.type == "cuda" else total_us) / 1000 / calls
    by_category: Dict[str, List[float]] = {c: [] for c in categories}
    for kernel in kernels:
        by_category.setdefault(category(kernel), []).append(kernel.us)
    rows = kernel_rows(kernels, category)
    summary: Dict[str, Any] = {
        "calls": calls, "wallMsPerCall": round(wall_ms, 4), "wallMsPerCallUnprofiled": round(unprofiled_ms, 4),
        "kernelsPerCall": len(kernels) / calls, "kernelMsPerCall": round(total_us / 1000 / calls, 4),
        "busyMsPerCall": round(busy_ms, 4), "gapMsPerCall": round(wall_ms - busy_ms, 4),
        "linkedShare": round(sum(1 for k in kernels if k.ops) / max(len(kernels), 1), 4),
        "categories": {c: {"ms": round(sum(t) / 1000 / calls, 4), "kernels": len(t) / calls,
                           "share": round(sum(t) / max(total_us, 1e-9), 4)} for c, t in by_category.items()},
        "top": top(rows, top_n, per=calls),
    }
    if not kernels:
        summary["note"] = "the profiler recorded no kernels (nothing to tell apart: see the wall times)"
    tables += [f"## {title}", "",
               f"{len(kernels) / calls:g} kernels a call, {total_us / 1000 / calls:.3f} ms of kernel time, busy "
               f"{busy_ms:.3f} ms, wall {wall_ms:.3f} ms profiled ({unprofiled_ms:.3f} ms without the profiler), "
               f"{summary['linkedShare']:.0%} of the kernels linked to an operator", "",
               "| category | ms a call | kernels a call | share |", "| --- | ---: | ---: | ---: |"]
    tables += [f"| {c} | {v['ms']:.3f} | {v['kernels']:g} | {v['share']:.1%} |" for c, v in summary["categories"].items()]
    tables += [""] + kernel_table(rows, total_us, 40, per=calls, unit="GPU ms" if device.type == "cuda" else "CPU ms")
    tables += [""]
    return summary


def encoder_flops(config: Any, b: int) -> Dict[str, float]:
    """The encoder's floating-point operations on b windows: its products (q, k, v, out and the MLP), the
    attention (scores and weighted values) and the convolution stem."""
    t, d, layers = config.n_audio_ctx, config.n_audio_state, config.n_audio_layer
    return {"products": layers * 2.0 * b * t * 12 * d * d, "attention": layers * 4.0 * b * t * t * d,
            "convolution": 2.0 * b * 2 * t * config.n_mels * 3 * d + 2.0 * b * t * 3 * d * d}


def step_bytes(engine: WhisperEngine, b: int) -> Dict[str, int]:
    """What one decode step of b slots must read: the decoder's weights it uses (not the cross-attention's
    key and value projections: the cache holds their products; the token embedding whole, as the logits'
    product), the cross-attention keys and values of the b slots' windows, and their self-attention keys
    and values over the whole text context (the step attends to all of it, masked). Not counted: the
    vocabulary-sized passes of the logit rules (a few b x n_vocab float32 tensors each)."""
    decoder, cache = engine.model.decoder, engine.cache
    modules: List[torch.nn.Module] = [decoder.ln, decoder.token_embedding]
    for block in decoder.blocks:
        modules += [block.attn, block.attn_ln, block.cross_attn.query, block.cross_attn.out, block.cross_attn_ln,
                    block.mlp, block.mlp_ln]
    weights = sum(p.numel() * p.element_size() for m in modules for p in m.parameters())
    cross = sum(t[:b].numel() * t.element_size() for t in cache.cross_k + cache.cross_v)
    self_kv = sum(t[:b].numel() * t.element_size() for t in cache.self_k + cache.self_v)
    return {"weights": weights, "crossKv": cross, "selfKv": self_kv, "total": weights + cross + self_kv}


def peak_bandwidth(device: torch.device) -> Optional[float]:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_BANDWIDTH if key in name), None)


def _sig(x: float) -> float:
    """x to four significant figures."""
    return float(f"{x:.4g}")


def _rate(ms: float, flops: float) -> Dict[str, float]:
    return {"ms": round(ms, 4), "tflops": _sig(flops / (ms * 1e-3) / 1e12)}


@torch.no_grad()
def gemm_products(config: Any, sizes: Sequence[int], device: torch.device, dtype: torch.dtype,
                  repeats: int) -> Dict[str, Any]:
    """The encoder's products alone at its shapes (M = b x 1500 rows; K x N = d x d for q, k, v and out,
    d x 4d and 4d x d for the MLP): F.linear in the model's dtype; fp8_linear (the activations' row-wise
    quantization, then torch._scaled_mm); torch._scaled_mm alone on operands quantized beforehand, row-wise
    and with one scale per operand; the quantization alone, eager and compiled (as it runs fused in the compiled encoder)."""
    d = config.n_audio_state
    shapes = (("q/k/v/out", d, d), ("mlp in", d, 4 * d), ("mlp out", 4 * d, d))
    fp8_problem = "; ".join(fp8_problems(device, dtype)) or None
    compiled: Optional[Callable[[torch.Tensor], Any]] = None
    compile_problem: Optional[str] = None
    if fp8_problem is None:
        compiled = torch.compile(fp8.quantize_rowwise, dynamic=True)  # type: ignore[attr-defined]
    rows: List[Dict[str, Any]] = []
    for b in sizes:
        m = b * config.n_audio_ctx
        for name, k, n in shapes:
            x = torch.randn(m, k, device=device, dtype=dtype)
            weight = torch.randn(n, k, device=device, dtype=dtype) * 0.02
            bias = torch.zeros(n, device=device, dtype=dtype)
            flops = 2.0 * m * n * k
            row: Dict[str, Any] = {"batch": b, "shape": name, "m": m, "k": k, "n": n,
                                   "linear": _rate(timed_ms(lambda: F.linear(x, weight, bias), device, repeats), flops)}
            if fp8_problem is None:
                try:
                    compile_problem = _fp8_rates(row, x, weight, bias, flops, device, repeats, compiled, compile_problem)
                    compiled = compiled if compile_problem is None else None
                except Exception as error:  # noqa: BLE001 - reported, the other parts still run
                    fp8_problem = f"FP8 products failed at batch {b}, {name}: {error!r}"[:500]
            rows.append(row)
            print(f"gemm batch {b} {name} [{m} x {k}] x [{k} x {n}]: " + ", ".join(
                f"{key} {v['ms']:.3f} ms" + (f" {v['tflops']:.0f} TFLOP/s" if "tflops" in v else "")
                for key, v in row.items() if isinstance(v, dict)), flush=True)
    skipped = {"fp8": fp8_problem} if fp8_problem else {}
    if compile_problem:
        skipped["quantizeCompiled"] = compile_problem
    return {"repeats": repeats, "dtype": str(dtype).replace("torch.", ""), "rows": rows, "skipped": skipped}


def _quantize_tensorwise(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """x -> (float8_e4m3fn, float32 scalar scale): one scale for the whole tensor."""
    scale = (x.abs().amax().float().clamp(min=fp8.MIN_AMAX) / fp8.E4M3_MAX)
    quantized = (x.float() / scale).clamp(-fp8.E4M3_MAX, fp8.E4M3_MAX).to(torch.float8_e4m3fn)  # type: ignore[attr-defined]
    return quantized.contiguous(), scale


def _fp8_rates(row: Dict[str, Any], x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, flops: float,
               device: torch.device, repeats: int, compiled: Optional[Callable[[torch.Tensor], Any]],
               compile_problem: Optional[str]) -> Optional[str]:
    """Adds to ``row`` the FP8 side of one product (see :func:`gemm_products`); returns why the compiled
    quantization did not run (``compile_problem`` where it was not tried)."""
    w8 = fp8.fp8_weight_from(weight, bias)
    xq, xs = fp8.quantize_rowwise(x)
    row["fp8Linear"] = _rate(timed_ms(lambda: fp8.fp8_linear(x, w8), device, repeats), flops)
    row["scaledMm"] = _rate(timed_ms(lambda: torch._scaled_mm(  # type: ignore[attr-defined]
        xq, w8.weight.t(), scale_a=xs, scale_b=w8.scale, bias=w8.bias, out_dtype=w8.out_dtype,
        use_fast_accum=fp8.USE_FAST_ACCUM), device, repeats), flops)
    # The same product with one scale per operand (cuBLAS's per-tensor FP8 path, which row-wise
    # scaling may not take): is the row-wise kernel the part that costs?
    xt, xts = _quantize_tensorwise(x)
    wt, wts = _quantize_tensorwise(weight)
    row["scaledMmTensorwise"] = _rate(timed_ms(lambda: torch._scaled_mm(  # type: ignore[attr-defined]
        xt, wt.t(), scale_a=xts, scale_b=wts, bias=bias, out_dtype=x.dtype,
        use_fast_accum=fp8.USE_FAST_ACCUM), device, repeats), flops)
    row["fp8SpeedupProductAlone"] = round(row["linear"]["ms"] / row["scaledMm"]["ms"], 3)
    row["fp8SpeedupWithQuantize"] = round(row["linear"]["ms"] / row["fp8Linear"]["ms"], 3)
    # Reads x (2 bytes an element in bf16), writes one byte an element and a scale a row.
    moved = x.numel() * (x.element_size() + 1) + x.shape[0] * 4
    ms = timed_ms(lambda: fp8.quantize_rowwise(x), device, repeats)
    row["quantize"] = {"ms": round(ms, 4), "gbPerS": round(moved / (ms * 1e-3) / 1e9, 1)}
    if compiled is None:
        return compile_problem
    try:
        ms = timed_ms(lambda: compiled(x), device, repeats)  # type: ignore[misc]
    except Exception as error:  # noqa: BLE001 - reported, the rest still runs
        return f"compiling quantize_rowwise failed: {error!r}"[:300]
    row["quantizeCompiled"] = {"ms": round(ms, 4), "gbPerS": round(moved / (ms * 1e-3) / 1e9, 1)}
    return None


@torch.no_grad()
def profile_steps(engine: WhisperEngine, sizes: Sequence[int], device: torch.device, repeats: int, calls: int,
                  top_n: int, tables: List[str], result: Dict[str, Any]) -> Dict[int, List[Kernel]]:
    """One eager decode step of b slots, for each b, labelled (so that the self- and cross-attention, the
    logits and the rules are told apart), and the bytes a step must read; into ``result``. Returns the
    steps' kernels, which :func:`profile_replays` matches the graphs' with."""
    labels = _step_labels(engine.config)
    peak = peak_bandwidth(device)
    result["peakBandwidthGBPerS"] = peak / 1e9 if peak else None
    kernels: Dict[int, List[Kernel]] = {}
    for b in sizes:
        entry: Dict[str, Any] = {"bytes": step_bytes(engine, b)}
        result[str(b)] = entry
        eager_ms = timed_ms(lambda: engine._step(b), device, repeats)
        _step_rate(entry, eager_ms, peak)
        try:
            with labelled(engine.model, engine):
                prof, wall = _profiled(lambda: engine._step(b), device, calls)
            kernels[b] = profile_kernels(prof, device)
            entry["eager"] = summarize(kernels[b], device, STEP_CATEGORIES, labels, calls, wall, eager_ms, top_n,
                                       f"decode step, {b} slots, eager", tables)
        except Exception as error:  # noqa: BLE001 - reported, the other sizes still run
            entry["eager"] = {"skipped": f"profiling the eager step failed: {error!r}"[:500]}
        print(f"step {b} slots, eager: {eager_ms:.3f} ms; " + (_category_line(entry["eager"]) if "categories" in
                                                                 entry["eager"] else entry["eager"]["skipped"]), flush=True)
    return kernels


@torch.no_grad()
def profile_replays(engine: WhisperEngine, sizes: Sequence[int], device: torch.device, repeats: int, calls: int,
                    top_n: int, tables: List[str], result: Dict[str, Any], eager: Dict[int, List[Kernel]],
                    progress: Callable[[str], None]) -> None:
    """The CUDA graph of each captured step size replayed under the profiler (its kernels are the eager
    step's, matched in order to get their categories), and the bandwidth its time implies. Runs last: a
    replay profiled on some CUDA and CUPTI releases fails or hangs."""
    labels = _step_labels(engine.config)
    peak = peak_bandwidth(device)
    for b in sizes:
        entry = result[str(b)]
        graph = engine.graphs.get((b, engine.config.n_text_ctx))  # the step over the whole cache
        if graph is None:
            entry["replay"] = {"skipped": "no CUDA graph of this batch size (graphs need a CUDA device)"}
            continue
        replay_ms = timed_ms(graph.replay, device, repeats)
        _step_rate(entry, replay_ms, peak)
        progress(f"profile: step {b} replay timed")
        try:
            prof, wall = _profiled(graph.replay, device, calls)
            replayed = profile_kernels(prof, device, linked=eager.get(b, []))
            entry["replay"] = summarize(replayed, device, STEP_CATEGORIES, labels, calls, wall, replay_ms, top_n,
                                        f"decode step, {b} slots, CUDA graph replay", tables) if replayed else {
                "skipped": "the profiler recorded no kernels of the graph's replay"}
        except Exception as error:  # noqa: BLE001 - reported, the other sizes still run
            entry["replay"] = {"skipped": f"profiling the replay failed: {error!r}"[:500]}
        print(f"step {b} slots, replay: {replay_ms:.3f} ms, reads {entry['bytes']['total'] / 1e6:.1f} MB: "
              f"{entry['impliedGBPerS']} GB/s" + (f", {entry['shareOfPeakBandwidth']:.0%} of peak" if peak else "")
              + (f"; {_category_line(entry['replay'])}" if "categories" in entry["replay"] else
                 f"; replay not profiled: {entry['replay']['skipped']}"), flush=True)
        progress(f"profile: step {b} replay")


def _step_rate(entry: Dict[str, Any], step_ms: float, peak: Optional[float]) -> None:
    """A step's time (the replay's where there is one) and the bandwidth it implies."""
    total = entry["bytes"]["total"]
    entry["stepMs"] = round(step_ms, 4)
    entry["impliedGBPerS"] = _sig(total / (step_ms * 1e-3) / 1e9)
    if peak:
        entry["memoryBoundMs"] = round(total / peak * 1e3, 4)
        entry["shareOfPeakBandwidth"] = round(total / (step_ms * 1e-3) / peak, 3)


def _category_line(summary: Dict[str, Any]) -> str:
    return ", ".join(f"{c} {v['ms']:.3f}" for c, v in summary["categories"].items() if v["ms"] > 0) + " ms"


@torch.no_grad()
def profile_encoder(model: Any, config: Any, variants: Sequence[str], sizes: Sequence[int], device: torch.device,
                    dtype: torch.dtype, calls: int, top_n: int, tables: List[str], result: Dict[str, Any],
                    progress: Callable[[str], None]) -> None:
    """The encoder on b padded 30 s windows in each variant (as :func:`encoder_variants` makes them; batches
    under COMPILED_MIN_WINDOWS run eager in the compiled ones, as served): kernel time by category, the
    largest kernels, wall time, and the products' rate (their FLOPs over the GEMM kernels' time); into
    ``result``, ``progress`` called after each variant. Changes the model's encoder."""
    for variant in variants:
        problem = variant_problem(variant, device, dtype)
        if problem is None:
            try:
                encoder_as(model, config, variant, device, dtype)
            except Exception as error:  # noqa: BLE001 - reported, the other variants still run
                problem = f"building the variant failed: {error!r}"[:500]
        if problem is not None:
            result[variant] = {"skipped": problem}
            print(f"profile encoder {variant}: skipped: {problem}", flush=True)
            continue
        result[variant] = {}
        for b in sizes:
            try:
                result[variant][str(b)] = _profile_encoder_call(model, config, variant, b, device, dtype, calls, top_n,
                                                                tables)
            except Exception as error:  # noqa: BLE001 - reported, the other sizes still run
                result[variant][str(b)] = {"skipped": f"failed: {error!r}"[:500]}
                print(f"profile encoder {variant}, batch {b}: {result[variant][str(b)]['skipped']}", flush=True)
        progress(f"profile: encoder {variant}")


def _profile_encoder_call(model: Any, config: Any, variant: str, b: int, device: torch.device, dtype: torch.dtype,
                          calls: int, top_n: int, tables: List[str]) -> Dict[str, Any]:
    mel = torch.randn(b, config.n_mels, 3000, device=device, dtype=dtype)
    eager = not model.encoder.is_compiled or b < COMPILED_MIN_WINDOWS
    unprofiled = timed_ms(lambda: model.encoder(mel), device, calls)
    with labelled(model) if eager else contextlib.nullcontext():
        prof, wall = _profiled(lambda: model.encoder(mel), device, calls)
    summary = summarize(profile_kernels(prof, device), device, ENCODER_CATEGORIES, _encoder_label, calls, wall,
                        unprofiled, top_n, f"encoder {variant}, {b} windows ({'eager' if eager else 'compiled'} blocks)",
                        tables)
    flops = encoder_flops(config, b)
    products_ms = summary["categories"]["GEMM"]["ms"] + summary["categories"]["FP8 GEMM"]["ms"]
    attention_ms = summary["categories"]["attention"]["ms"]
    summary.update({
        "blocks": "eager" if eager else "compiled", "gflop": {k: round(v / 1e9, 1) for k, v in flops.items()},
        "productMs": round(products_ms, 4),
        "productTflops": _sig(flops["products"] / (products_ms * 1e-3) / 1e12) if products_ms > 0 else None,
        "attentionTflops": _sig(flops["attention"] / (attention_ms * 1e-3) / 1e12) if attention_ms > 0 else None,
        "effectiveTflops": _sig(sum(flops.values()) / (unprofiled * 1e-3) / 1e12),
    })
    print(f"profile encoder {variant}, batch {b}: wall {unprofiled:.2f} ms ({wall:.2f} profiled), "
          f"kernels {summary['kernelMsPerCall']:.2f} ms, busy {summary['busyMsPerCall']:.2f}, "
          f"{summary['kernelsPerCall']:g} kernels; {_category_line(summary)}; products "
          f"{summary['productTflops']} TFLOP/s", flush=True)
    return summary


def profile_part(report: Dict[str, Any], engine: WhisperEngine, model: Any, config: Any, device: torch.device,
                 dtype: torch.dtype, args: argparse.Namespace) -> None:
    """Where the time goes: the encoder's products alone (bf16 against FP8), eager decode steps, the encoder
    in each variant, then the decode steps' graphs replayed, each under torch.profiler; written to the
    report as each ends, the kernel tables to OUT.profile.md beside it. Runs last: it changes the model's
    encoder."""
    tables_path = Path(args.out).with_suffix(".profile.md")
    tables: List[str] = [f"# whisper {args.config} {report['dtype']} on {report['gpu'] or 'cpu'}: kernels by time", ""]
    profile: Dict[str, Any] = {"timeOn": "gpu" if device.type == "cuda" else "cpu (operators' own time)",
                               "calls": args.profile_calls, "repeats": args.profile_repeats, "tables": tables_path.name}
    report["profile"] = profile

    def done(part: str) -> None:
        tables_path.write_text("\n".join(tables) + "\n", encoding="utf-8")
        progress(report, args.out, part)

    profile["gemm"] = gemm_products(config, args.profile_batch_sizes, device, dtype, args.profile_repeats)
    done("profile: products")
    profile["step"] = {}
    eager = profile_steps(engine, args.batch_sizes, device, args.profile_repeats, args.profile_calls, args.profile_top,
                          tables, profile["step"])
    done("profile: eager decode steps")
    profile["encoder"] = {}
    profile_encoder(model, config, args.encoder_variants, args.profile_batch_sizes, device, dtype, args.profile_calls,
                    args.profile_top, tables, profile["encoder"], done)
    profile_replays(engine, args.batch_sizes, device, args.profile_repeats, args.profile_calls, args.profile_top, tables,
                    profile["step"], eager, done)
    skipped = [{"what": f"encoder {v}", "reason": r["skipped"]} for v, r in profile["encoder"].items() if "skipped" in r]
    skipped += [{"what": f"encoder {v} batch {b}", "reason": r["skipped"]} for v, rows in profile["encoder"].items()
                for b, r in rows.items() if isinstance(r, dict) and "skipped" in r]
    skipped += [{"what": f"products {k}", "reason": r} for k, r in profile["gemm"]["skipped"].items()]
    skipped += [{"what": f"step {b} {side}", "reason": s[side]["skipped"]} for b, s in profile["step"].items()
                if isinstance(s, dict) for side in ("eager", "replay") if "skipped" in s.get(side, {})]
    profile["skipped"] = skipped
    done("profile")



def print_profile(profile: Dict[str, Any]) -> None:
    """The profile part's tables: per call, milliseconds (of kernel time on the GPU, of operators' own time
    on the CPU)."""
    short = {"norms/elementwise": "norm/elem", "copies/casts": "copies", "quantization": "quant",
             "self-attention": "self-attn", "cross-attention": "cross-attn", "logit rules/argmax": "rules",
             "KV cache writes": "kv-write", "convolution": "conv", "attention": "attn"}
    print(f"profile ({profile['timeOn']}), ms per call:")
    for what, rows in (("encoder", profile.get("encoder", {})), ("step", profile.get("step", {}))):
        lines = []
        for key, entry in rows.items():
            if not isinstance(entry, dict):
                continue
            if "skipped" in entry:
                lines.append(f"{what:<7} {key:<16} skipped: {entry['skipped']}")
                continue
            sides = [(f"{key} {size}", summary) for size, summary in entry.items()] if what == "encoder" else \
                [(f"{key} {side}", entry.get(side, {"skipped": "not run"})) for side in ("eager", "replay")]
            for name, summary in sides:
                if "categories" not in summary:
                    lines.append(f"{what:<7} {name:<16} skipped: {summary.get('skipped')}")
                    continue
                categories = " ".join(f"{short.get(c, c)} {v['ms']:.3f}" for c, v in summary["categories"].items() if v["ms"] > 0)
                products = (f" | products {summary['productMs']:.3f} ms, {summary['productTflops']} TFLOP/s"
                            if summary.get("productTflops") else "")
                lines.append(f"{what:<7} {name:<16} wall {summary['wallMsPerCallUnprofiled']:9.3f} "
                             f"({summary['wallMsPerCall']:.3f} profiled) busy {summary['busyMsPerCall']:9.3f} gap "
                             f"{summary['gapMsPerCall']:8.3f} kernels {summary['kernelsPerCall']:6g} | {categories}"
                             + products)
        print("\n".join(lines))
    for b, entry in profile.get("step", {}).items():
        if isinstance(entry, dict) and "bytes" in entry:
            print(f"step    {b:>3} slots reads {entry['bytes']['total'] / 1e6:8.1f} MB (weights "
                  f"{entry['bytes']['weights'] / 1e6:.1f}, cross KV {entry['bytes']['crossKv'] / 1e6:.1f}, self KV "
                  f"{entry['bytes']['selfKv'] / 1e6:.1f}) in {entry['stepMs']:.3f} ms: {entry['impliedGBPerS']} GB/s"
                  + (f", {entry['shareOfPeakBandwidth']:.0%} of peak, memory-bound {entry['memoryBoundMs']:.3f} ms"
                     if "memoryBoundMs" in entry else ""))
    gemm = profile.get("gemm")
    if gemm is not None:
        print(f"products alone ({gemm['dtype']} F.linear against FP8), ms and TFLOP/s:")
        for row in gemm["rows"]:
            cells = [f"{key} {v['ms']:.3f}" + (f" ({v['tflops']:.0f})" if "tflops" in v else f" ({v['gbPerS']:.0f} GB/s)")
                     for key, v in row.items() if isinstance(v, dict)]
            print(f"gemm    batch {row['batch']:>3} {row['shape']:<10} " + ", ".join(cells))
        for key, reason in gemm["skipped"].items():
            print(f"gemm    {key} skipped: {reason}")
