"""Microbenchmark of the Whisper engine on one device, without the host or HTTP: (a) naive, batch 1, eager,
a fresh key-value cache for every request (no reuse across requests), against (b) the engine, batches of
windows decoding together over its static cache with CUDA graphs of the step. Same clips, same weights,
same token budget (end-of-text forced at ``--tokens-per-audio-second``: random weights decode to arbitrary
lengths otherwise). Reports clips/s, audio seconds per second, tokens/s, per-batch latency p50/p95,
encoder calls and decode steps, and the encoder's time eager, compiled and with FP8 products side by side;
prints a table and writes JSON (each part as it ends: ``--parts`` picks them).

The ``profile`` part (not in the default) tells where the time goes, under torch.profiler: the encoder at
``--profile-batch-sizes`` in each of ``--encoder-variants`` (kernel time a call by category: GEMM, FP8 GEMM,
attention, quantization, norms/elementwise, copies/casts, convolution, other; kernel count, the device's busy
time against the wall time, the largest kernels, the products' TFLOP/s); the encoder's products alone at its
shapes (F.linear against fp8_linear, against torch._scaled_mm on operands quantized beforehand, and the
quantization alone, eager and compiled); and one decode step of each ``--batch-sizes`` slots, eager and as
its CUDA graph's replay (self-attention, cross-attention, GEMM, logits, logit rules/argmax, KV cache writes,
copies), with the bytes a step must read and the bandwidth its time implies. Kernel tables go to
OUT.profile.md beside the JSON. On the CPU, operators stand for kernels, and what cannot run there (compile,
FP8, graphs) is skipped with the reason in the report.

    python3 host/bench_whisper.py --device cuda --config large-v3-turbo --clip-seconds 45 --out engine.json
    python3 host/bench_whisper.py --device cuda --parts variants --batch-sizes 16,64 --out encoder.json  # the encoder alone
    python3 host/bench_whisper.py --device cuda --parts ahead --batch-sizes 64 --out ahead.json  # step_ahead against not
    python3 host/bench_whisper.py --device cuda --parts profile --batch-sizes 1,16,64 --profile-batch-sizes 1,16,64 \
        --out profile.json  # where the time goes (meant to take under 5 minutes, compiles included)
    python3 host/bench_whisper.py --device cpu --config tiny --clip-seconds 2 --batch-sizes 2 --naive-clips 1  # dry run
    python3 host/bench_whisper.py --device cpu --config tiny --batch-sizes 1,2 --parts profile \
        --encoder-variants eager,compiled,fp8 --profile-batch-sizes 1 --out profile.json  # the profile's dry run
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_profile_support import (Kernel, activities, align, busy_us, device_kernels, kernel_rows,  # noqa: E402
                                   kernel_table, op_kernels, top)
from voxmux_host import fp8  # noqa: E402
from voxmux_host.fp8 import fp8_option_problems  # noqa: E402
from voxmux_host.models.whisper import model as whisper_model  # noqa: E402
from voxmux_host.models.whisper.config import PRESETS  # noqa: E402
from voxmux_host.models.whisper.decoding import EngineOptions, RequestOptions, WhisperEngine  # noqa: E402
from voxmux_host.models.whisper.model import COMPILED_MIN_WINDOWS, build_model  # noqa: E402
from voxmux_host.models.whisper.tokenizer import synthetic_tokenizer, tiny_tokenizer  # noqa: E402

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")


def speech_like_clip(seconds: float, seed: int) -> torch.Tensor:
    """Noise shaped like speech's envelope (syllable-rate amplitude modulation), in [-1, 1]."""
    generator = torch.Generator().manual_seed(seed)
    samples = int(seconds * 16000)
    t = torch.arange(samples, dtype=torch.float32) / 16000
    envelope = 0.5 + 0.5 * torch.sin(2 * np.pi * 4.0 * t + seed)
    return (torch.randn(samples, generator=generator) * 0.1 * envelope).clamp(-1, 1)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _run(engine: WhisperEngine, clips: List[torch.Tensor], device: torch.device) -> Dict[str, Any]:
    requests = [RequestOptions(language="en")] * len(clips)
    _sync(device)
    start = time.perf_counter()
    results = engine.transcribe(clips, requests)
    _sync(device)
    return {"seconds": time.perf_counter() - start, "tokens": sum(r.tokens for r in results)}


def run_benchmark(args: argparse.Namespace) -> Dict[str, Any]:
    device = torch.device(args.device)
    dtype = _DTYPES[args.dtype or ("bf16" if device.type == "cuda" else "fp32")]
    config = PRESETS[args.config]
    model = build_model(config, seed=args.seed).to(device=device, dtype=dtype).eval()
    tokenizer = tiny_tokenizer() if args.config == "tiny" else synthetic_tokenizer(config.n_vocab)
    clips = [speech_like_clip(args.clip_seconds, seed) for seed in range(max(args.batch_sizes + [args.naive_clips]))]
    common = dict(temperature_increment=0.0, max_tokens_per_audio_second=args.tokens_per_audio_second)
    report: Dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.node(), "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "config": args.config, "dtype": str(dtype).replace("torch.", ""), "clipSeconds": args.clip_seconds,
        "tokensPerAudioSecond": args.tokens_per_audio_second, "command": " ".join(sys.argv), "modes": [],
    }
    if "modes" in args.parts:
        _naive(report, model, tokenizer, clips, device, dtype, common, args)
    # (b) the engine: batches of each size, graphs captured once.
    slots = max(args.batch_sizes)
    sizes = tuple(sorted({1, 2, 4, 8, 16, 32, 64, slots} & set(range(1, slots + 1))))
    engine = WhisperEngine(model, tokenizer, device, dtype,
                           EngineOptions(slots=slots, batch_sizes=sizes, use_graphs=device.type == "cuda", **common))
    graphs = engine.capture_graphs()
    if "modes" in args.parts:
        _engine_modes(report, engine, clips, graphs, device, args)
    if "stages" in args.parts:
        report["stages"] = stage_times(engine, model, config, sizes, device, dtype, args.stage_repeats)
        _progress(report, args, "stages")
    if "ahead" in args.parts:
        report["stepAhead"] = step_ahead(engine, model, tokenizer, clips, device, dtype, common, args)
        _progress(report, args, "step ahead")
    if "variants" in args.parts:
        report["encoderVariants"] = encoder_variants(model, config, sizes, device, dtype, args.encoder_variants,
                                                     max(1, args.stage_repeats // 10))
        _progress(report, args, "encoder variants")
    if "profile" in args.parts:
        profile_part(report, engine, model, config, device, dtype, args)
    return report


def step_ahead(engine: WhisperEngine, model: Any, tokenizer: Any, clips: List[torch.Tensor], device: torch.device,
               dtype: torch.dtype, common: Dict[str, Any], args: argparse.Namespace) -> Dict[str, Any]:
    """The engine with each decode step launched before the previous step's tokens are read (step_ahead)
    against the engine without it: the same ``--ahead-clips`` clips through all the slots (joins of 8
    windows or after 50 ms, as the served engine), alternating, ``--iterations`` rounds each."""
    options = engine.options
    joins: Dict[str, Any] = {"join_min_windows": 8, "join_max_wait_s": 0.05}
    plain = WhisperEngine(model, tokenizer, device, dtype, EngineOptions(
        slots=options.slots, batch_sizes=options.batch_sizes, use_graphs=options.use_graphs, **joins, **common))
    ahead = WhisperEngine(model, tokenizer, device, dtype, EngineOptions(
        slots=options.slots, batch_sizes=options.batch_sizes, use_graphs=options.use_graphs, step_ahead=True,
        **joins, **common))
    plain.capture_graphs()
    ahead.capture_graphs()
    batch = [clips[i % len(clips)] for i in range(args.ahead_clips)]
    sides: Dict[str, Dict[str, List[float]]] = {"plain": {}, "ahead": {}}
    for round_ in range(args.warmup + args.iterations):
        for name, side in (("plain", plain), ("ahead", ahead)):
            steps = side.counters.decode_steps
            run = _run(side, batch, device)
            if round_ < args.warmup:
                continue
            rows = sides[name]
            rows.setdefault("seconds", []).append(run["seconds"])
            rows.setdefault("tokens", []).append(run["tokens"])
            rows.setdefault("decodeSteps", []).append(side.counters.decode_steps - steps)
    summary: Dict[str, Any] = {"clips": len(batch), "slots": options.slots, "rounds": args.iterations}
    for name, rows in sides.items():
        seconds = float(np.median(rows["seconds"]))
        summary[name] = {**rows, "medianSeconds": seconds, "clipsPerSecond": len(batch) / seconds,
                         "wallMsPerStep": seconds * 1000 / float(np.median(rows["decodeSteps"]))}
    summary["speedup"] = summary["ahead"]["clipsPerSecond"] / summary["plain"]["clipsPerSecond"]
    del plain, ahead
    return summary


def _progress(report: Dict[str, Any], args: argparse.Namespace, part: str) -> None:
    """Writes the report so far, so that a run stopped at a time limit keeps its finished parts."""
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"{part}: done ({args.out})", flush=True)


def _naive(report: Dict[str, Any], model: Any, tokenizer: Any, clips: List[torch.Tensor], device: torch.device,
           dtype: torch.dtype, common: Dict[str, Any], args: argparse.Namespace) -> None:
    """(a) naive: one clip at a time, eager, a fresh cache per request."""
    latencies: List[float] = []
    tokens = 0
    for i in range(args.naive_clips + args.warmup):
        engine = WhisperEngine(model, tokenizer, device, dtype, EngineOptions(slots=1, batch_sizes=(1,), **common))
        run = _run(engine, [clips[i % len(clips)]], device)
        if i >= args.warmup:
            latencies.append(run["seconds"])
            tokens += run["tokens"]
        del engine
    total = sum(latencies)
    report["modes"].append({
        "mode": "a-naive", "batchSize": 1, "clips": len(latencies), "clipsPerSecond": len(latencies) / total,
        "audioSecondsPerSecond": len(latencies) * args.clip_seconds / total, "tokensPerSecond": tokens / total,
        "latencyP50S": _percentile(latencies, 50), "latencyP95S": _percentile(latencies, 95),
    })
    _progress(report, args, "naive")


def _engine_modes(report: Dict[str, Any], engine: WhisperEngine, clips: List[torch.Tensor], graphs: int,
                  device: torch.device, args: argparse.Namespace) -> None:
    """(b) the engine: batches of each size."""
    for size in args.batch_sizes:
        batch = clips[:size]
        for _ in range(args.warmup):
            _run(engine, batch, device)
        before = dict(vars(engine.counters))
        runs = [_run(engine, batch, device) for _ in range(args.iterations)]
        after = vars(engine.counters)
        seconds = [r["seconds"] for r in runs]
        total = sum(seconds)
        report["modes"].append({
            "mode": "b-engine", "batchSize": size, "clips": size * len(runs), "graphs": graphs,
            "clipsPerSecond": size * len(runs) / total, "audioSecondsPerSecond": size * len(runs) * args.clip_seconds / total,
            "tokensPerSecond": sum(r["tokens"] for r in runs) / total,
            "latencyP50S": _percentile(seconds, 50), "latencyP95S": _percentile(seconds, 95),
            "decodeStepsPerBatch": (after["decode_steps"] - before["decode_steps"]) / len(runs),
            "encoderCallsPerBatch": (after["encoder_calls"] - before["encoder_calls"]) / len(runs),
            "graphReplays": after["graph_replays"] - before["graph_replays"],
        })
        _progress(report, args, f"engine batch {size}")
    naive = report["modes"][0]["clipsPerSecond"]
    for mode in report["modes"]:
        mode["speedupOverNaive"] = mode["clipsPerSecond"] / naive


def _timed_ms(fn: Any, device: torch.device, repeats: int) -> float:
    fn()
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(device)
    return (time.perf_counter() - start) * 1000 / repeats


@torch.no_grad()
def stage_times(engine: WhisperEngine, model: Any, config: Any, sizes: Sequence[int], device: torch.device,
                dtype: torch.dtype, repeats: int) -> Dict[str, Any]:
    """Where a batch's time goes: the encoder on b padded 30 s windows, and one decode step (the replayed
    graph, or the eager step) for b slots, each in milliseconds."""
    encoder: Dict[str, float] = {}
    step: Dict[str, float] = {}
    for b in sizes:
        mel = torch.randn(b, config.n_mels, 3000, device=device, dtype=dtype)
        encoder[str(b)] = _timed_ms(lambda: model.encoder(mel), device, max(1, repeats // 10))
        step[str(b)] = _timed_ms(lambda: engine._run_step(b), device, repeats)
    return {"encoderMs": encoder, "stepMs": step, "repeats": repeats}


def variant_problem(variant: str, device: torch.device, dtype: torch.dtype) -> Optional[str]:
    """Why the encoder cannot run as ``variant`` here (None where it can)."""
    problems = []
    if variant != "eager" and not hasattr(torch.nn.Module, "compile"):
        problems.append(f"the compiled encoder needs torch >= 2.2 (torch.compile of modules): this is torch {torch.__version__}")
    if variant == "fp8":
        problems += fp8_problems(device, dtype)
    return "; ".join(problems) or None


def fp8_problems(device: torch.device, dtype: torch.dtype) -> List[str]:
    """Why FP8 products cannot run here (the checks of ``matmul: fp8`` but its need of a compiled encoder)."""
    dtype_name = next(name for name, value in _DTYPES.items() if value == dtype)
    return fp8_option_problems({"compileEncoder": True, "dtype": dtype_name, "device": str(device)})


def encoder_as(model: Any, config: Any, variant: str, device: torch.device, dtype: torch.dtype) -> None:
    """The model's encoder as ``variant`` (see :func:`encoder_variants`), from whatever it was before."""
    encoder = model.encoder
    if variant == "fp8":
        encoder.build_fp8_()
    else:
        encoder.drop_fp8()
    if variant == "eager":
        encoder.is_compiled = False
        return
    encoder.compile_()
    # The compilation, as the adapter's warmup makes it (smaller batches stay eager).
    encoder(torch.zeros(COMPILED_MIN_WINDOWS, config.n_mels, 3000, device=device, dtype=dtype))


@torch.no_grad()
def encoder_variants(model: Any, config: Any, sizes: Sequence[int], device: torch.device, dtype: torch.dtype,
                     variants: Sequence[str], repeats: int) -> Dict[str, Dict[str, float]]:
    """The encoder's time on b padded 30 s windows, side by side: ``eager``; ``compiled`` (compileEncoder:
    batches under COMPILED_MIN_WINDOWS run eager, as served); ``fp8`` (compiled, with the products in FP8:
    matmul fp8). Runs last: it changes the model's encoder."""
    times: Dict[str, Dict[str, float]] = {}
    for variant in variants:
        encoder_as(model, config, variant, device, dtype)
        times[variant] = {}
        for b in sizes:
            mel = torch.randn(b, config.n_mels, 3000, device=device, dtype=dtype)
            times[variant][str(b)] = _timed_ms(lambda: model.encoder(mel), device, repeats)
            print(f"encoder {variant}, batch {b}: {times[variant][str(b)]:.2f} ms", flush=True)
    return times


# ---------------------------------------------------------------------------------------------- profile
#: The profile part wraps parts of the model in torch.profiler labels (record_function) named with this
#: prefix, in eager code only, so that their kernels can be told apart: the attention (named with the keys'
#: length: the decoder's self-attention reads the text context, its cross-attention the audio), the
#: activations' FP8 quantization, the decoder's logits and the logit rules (suppressions, timestamp rules,
#: the budget, log-softmax, argmax).
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
    _sync(device)
    with profile(activities=activities(device)) as prof:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync(device)
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
    quantization, then torch._scaled_mm); torch._scaled_mm alone on operands quantized beforehand; the
    quantization alone, eager and compiled (as it runs fused in the compiled encoder)."""
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
                                   "linear": _rate(_timed_ms(lambda: F.linear(x, weight, bias), device, repeats), flops)}
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


def _fp8_rates(row: Dict[str, Any], x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, flops: float,
               device: torch.device, repeats: int, compiled: Optional[Callable[[torch.Tensor], Any]],
               compile_problem: Optional[str]) -> Optional[str]:
    """Adds to ``row`` the FP8 side of one product (see :func:`gemm_products`); returns why the compiled
    quantization did not run (``compile_problem`` where it was not tried)."""
    w8 = fp8.fp8_weight_from(weight, bias)
    xq, xs = fp8.quantize_rowwise(x)
    row["fp8Linear"] = _rate(_timed_ms(lambda: fp8.fp8_linear(x, w8), device, repeats), flops)
    row["scaledMm"] = _rate(_timed_ms(lambda: torch._scaled_mm(  # type: ignore[attr-defined]
        xq, w8.weight.t(), scale_a=xs, scale_b=w8.scale, bias=w8.bias, out_dtype=w8.out_dtype,
        use_fast_accum=fp8.USE_FAST_ACCUM), device, repeats), flops)
    row["fp8SpeedupProductAlone"] = round(row["linear"]["ms"] / row["scaledMm"]["ms"], 3)
    row["fp8SpeedupWithQuantize"] = round(row["linear"]["ms"] / row["fp8Linear"]["ms"], 3)
    # Reads x (2 bytes an element in bf16), writes one byte an element and a scale a row.
    moved = x.numel() * (x.element_size() + 1) + x.shape[0] * 4
    ms = _timed_ms(lambda: fp8.quantize_rowwise(x), device, repeats)
    row["quantize"] = {"ms": round(ms, 4), "gbPerS": round(moved / (ms * 1e-3) / 1e9, 1)}
    if compiled is None:
        return compile_problem
    try:
        ms = _timed_ms(lambda: compiled(x), device, repeats)  # type: ignore[misc]
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
        eager_ms = _timed_ms(lambda: engine._step(b), device, repeats)
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
        graph = engine.graphs.get(b)
        if graph is None:
            entry["replay"] = {"skipped": "no CUDA graph of this batch size (graphs need a CUDA device)"}
            continue
        replay_ms = _timed_ms(graph.replay, device, repeats)
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
    unprofiled = _timed_ms(lambda: model.encoder(mel), device, calls)
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
        _progress(report, args, part)

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


def print_table(report: Dict[str, Any]) -> None:
    print(f"whisper {report['config']} {report['dtype']} on {report['gpu'] or 'cpu'}, {report['clipSeconds']} s clips, "
          f"{report['tokensPerAudioSecond']} tokens per audio second")
    print(f"{'mode':<10} {'batch':>5} {'clips/s':>9} {'audio s/s':>10} {'tokens/s':>10} {'p50 s':>8} {'p95 s':>8} {'x naive':>8}")
    for m in report["modes"]:
        print(f"{m['mode']:<10} {m['batchSize']:>5} {m['clipsPerSecond']:>9.2f} {m['audioSecondsPerSecond']:>10.1f} "
              f"{m['tokensPerSecond']:>10.0f} {m['latencyP50S']:>8.3f} {m['latencyP95S']:>8.3f} {m['speedupOverNaive']:>8.1f}")
    stages = report.get("stages")
    if stages is not None:
        print("batch  encoder ms (b windows)  step ms (b slots)")
        for b, ms in stages["encoderMs"].items():
            print(f"{b:>5} {ms:>22.2f} {stages['stepMs'][b]:>18.3f}")
    variants = report.get("encoderVariants")
    if variants:
        print("batch  " + "  ".join(f"encoder ms {v:>8}" for v in variants))
        for b in next(iter(variants.values())):
            print(f"{b:>5}  " + "  ".join(f"{variants[v][b]:>19.2f}" for v in variants))
    ahead = report.get("stepAhead")
    if ahead is not None:
        print(f"{ahead['clips']} clips through {ahead['slots']} slots, median of {ahead['rounds']}: "
              + ", ".join(f"{name} {ahead[name]['clipsPerSecond']:.2f} clips/s ({ahead[name]['wallMsPerStep']:.3f} ms of wall time a step)"
                          for name in ("plain", "ahead"))
              + f"; step ahead x{ahead['speedup']:.3f}")
    profile = report.get("profile")
    if profile is not None:
        print_profile(profile)


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--config", default="large-v3-turbo", choices=sorted(PRESETS))
    parser.add_argument("--dtype", default=None, choices=sorted(_DTYPES))
    parser.add_argument("--clip-seconds", type=float, default=45.0)
    parser.add_argument("--tokens-per-audio-second", type=float, default=3.0)
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",") if x], default=[1, 16, 32, 64])
    parser.add_argument("--naive-clips", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stage-repeats", type=int, default=50, help="decode steps timed per batch size")
    parser.add_argument("--encoder-variants", type=lambda s: [v for v in s.split(",") if v], default=None,
                        help="eager,compiled,fp8 (default: all three on CUDA, eager on the CPU)")
    parser.add_argument("--parts", type=lambda s: [p for p in s.split(",") if p], default=["modes", "stages", "variants"],
                        help="modes (naive and engine throughput), stages (encoder and step times), variants "
                             "(the encoder eager, compiled, fp8), ahead (the engine with and without step_ahead), "
                             "profile (kernel time by category of the encoder's variants, its products alone and "
                             "decode steps, under torch.profiler); default modes,stages,variants; each is written "
                             "to --out as it ends")
    parser.add_argument("--ahead-clips", type=int, default=128, help="clips through the engine in the ahead part")
    parser.add_argument("--profile-batch-sizes", type=lambda s: [int(x) for x in s.split(",") if x], default=[1, 16],
                        help="profile part: the encoder's batch sizes (windows) profiled in each variant, and the "
                             "products' shapes (batch x 1500 rows); its decode steps are those of --batch-sizes")
    parser.add_argument("--profile-calls", type=int, default=3, help="profile part: calls under the profiler each")
    parser.add_argument("--profile-repeats", type=int, default=20,
                        help="profile part: timed calls of each product and decode step, without the profiler")
    parser.add_argument("--profile-top", type=int, default=25, help="profile part: kernels listed in the JSON each")
    parser.add_argument("--out", default="bench-whisper.json")
    args = parser.parse_args(argv)
    if args.encoder_variants is None:
        args.encoder_variants = ["eager", "compiled", "fp8"] if args.device.startswith("cuda") else ["eager"]
    unknown = set(args.encoder_variants) - {"eager", "compiled", "fp8"}
    if unknown:
        parser.error(f"unknown encoder variants: {sorted(unknown)}")
    unknown = set(args.parts) - {"modes", "stages", "variants", "ahead", "profile"}
    if unknown:
        parser.error(f"unknown parts: {sorted(unknown)}")
    torch.manual_seed(args.seed)
    report = run_benchmark(args)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
